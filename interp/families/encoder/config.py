"""The encoder family's configuration: which variant (DSTG or a baseline), its widths, its positional terms and its
head.

Fields that depend on the variant (``residual``, ``rp_bias``, ``untie_cls``, ``d_qk``) are filled in when left unset,
and every field is checked in ``__post_init__``: a config that cannot build a model is refused here, naming the field.
``interp.families.encoder.model`` describes the variants' forward passes; two fields in more detail:

**Residual.** ``residual="normalized"`` is the development code's DSTG block: the block *replaces* its input
by the normalised input (AP and semantic parts normalised separately, then re-concatenated), adds the
attention output to that, and does the same before the FFN. Checkpoints trained with it need it.
``residual="prenorm"`` is standard pre-norm (``x + attn(norm x)``, ``h + ffn(norm h)``), what the
development code's baselines use. Left unset it is ``normalized`` for DSTG and ``prenorm`` for baselines.

``rope_style`` picks the rotary layout: ``half_split`` (``rotate_half``) or ``interleaved`` (pairs 2i, 2i+1, the
complex-number rotary of the development code; loaders pick it for development checkpoints).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.base import InputError

VARIANTS = ("disentangled", "ap", "rp", "rope")
RESIDUALS = ("normalized", "prenorm")
ROPE_STYLES = ("half_split", "interleaved")
MLM_INPUTS = ("semantic", "full")
TOKENIZERS = (None, "bert-uncased")
THETA_ROWS = ("CLS row", "SEP row", "CLS column", "SEP column")
KINDS = {"disentangled": "DSTG (AP {c.pos_size} | semantic {c.hidden_size}, d_qk {c.d_qk})",
         "ap": "AP baseline (learned absolute positions)", "rp": "RP baseline (T5 bias)",
         "rope": "RoPE baseline ({c.rope_style}, theta {c.rope_theta:g})"}


@dataclass
class EncoderConfig:
    vocab_size: int
    hidden_size: int  # semantic width (the whole stream for the baselines)
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int  # SwiGLU width I: ffn.w12 is [2I, d_model], ffn.w3 is [d_model, I]
    variant: str = "disentangled"
    pos_size: int = 0  # AP width (DSTG only)
    d_qk: int | None = None  # per-head query/key width; DSTG default (hidden + pos) / H, baselines hidden / H
    max_length: int = 512
    residual: str | None = None  # None: "normalized" for DSTG, "prenorm" for the baselines
    norm_eps: float = 1e-6
    rp_bias: bool | None = None  # T5 bucketed bias; None: on for disentangled and rp
    untie_cls: bool | None = None  # CLS/SEP thetas; None: on for disentangled and rp
    rp_per_layer: bool = False  # one RP bias / theta module per layer instead of one shared by all
    rp_at_special: bool = False  # also add the bucketed bias at the special rows / columns
    rp_skip_special: bool = False  # no bucketed bias at the special rows / columns even without thetas
    num_buckets: int = 32
    max_distance: int = 128
    rope_theta: float = 10000.0
    rope_style: str = "half_split"
    mlm_head: bool = True  # False: forward returns the final-normed residual stream
    mlm_input: str = "semantic"  # DSTG: the head reads the semantic stream, or "full" [AP | sem]
    tie_word_embeddings: bool = False  # decoder weight = encoder.weight (only decoder.bias is its own)
    pad_token_id: int = 0
    tokenizer: str | None = None  # "bert-uncased": attach the WordPiece tokenizer
    training_only: dict | None = None  # authors' config fields that act only in training (recorded, never used here)
    inert_config: dict | None = None  # authors' config fields inert for this architecture (recorded, never used here)

    CHOICES = {"variant": VARIANTS, "residual": RESIDUALS, "rope_style": ROPE_STYLES, "mlm_input": MLM_INPUTS,
               "tokenizer": TOKENIZERS}

    def __post_init__(self):
        """Defaults that depend on the variant, then every field checked: a config that cannot build is refused here."""
        self._fill_defaults()
        self._check_sizes()
        self._check_streams()
        self._check_positions()

    def _fill_defaults(self) -> None:
        positional = self.variant in ("disentangled", "rp")
        if self.residual is None:
            self.residual = "normalized" if self.variant == "disentangled" else "prenorm"
        if self.rp_bias is None:
            self.rp_bias = positional
        if self.untie_cls is None:
            self.untie_cls = positional

    def _check_sizes(self) -> None:
        for field, allowed in self.CHOICES.items():
            if getattr(self, field) not in allowed:
                raise ValueError(f"config {field}={getattr(self, field)!r} is not one of {allowed}")
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "max_length"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"config {field}={getattr(self, field)} must be positive")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                             f"({self.num_attention_heads})")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"config pad_token_id ({self.pad_token_id}) is outside the vocabulary "
                             f"[0, {self.vocab_size})")

    def _check_streams(self) -> None:
        """The AP stream and the query/key width: DSTG's own, the baselines' hidden_size / heads."""
        h = self.num_attention_heads
        if self.variant == "disentangled":
            if self.pos_size < 1 or self.pos_size % h:
                raise ValueError(f"config pos_size ({self.pos_size}) must be a positive multiple of "
                                 f"num_attention_heads ({h}) for the disentangled variant")
            if self.d_qk is None:
                if (self.hidden_size + self.pos_size) % h:
                    raise ValueError("config d_qk is unset and hidden_size + pos_size "
                                     f"({self.hidden_size + self.pos_size}) is not divisible by num_attention_heads "
                                     f"({h}); set d_qk")
                self.d_qk = (self.hidden_size + self.pos_size) // h
            if self.d_qk < 1:
                raise ValueError(f"config d_qk ({self.d_qk}) must be positive")
        else:
            if self.pos_size:
                raise ValueError(f"config pos_size={self.pos_size}: only the disentangled variant has an AP "
                                 "stream (use 0)")
            if self.d_qk is not None and self.d_qk != self.hidden_size // h:
                raise ValueError(f"config d_qk={self.d_qk}: the {self.variant} variant uses hidden_size / heads "
                                 f"= {self.hidden_size // h}")
            self.d_qk = self.hidden_size // h
            if self.mlm_input != "semantic":
                raise ValueError(f"config mlm_input={self.mlm_input!r}: only the disentangled variant has streams to "
                                 "choose from")
        if self.tie_word_embeddings and (not self.mlm_head or self.mlm_input == "full"):
            raise ValueError("config tie_word_embeddings needs an MLM head reading hidden_size dims (mlm_head=True, "
                             "mlm_input='semantic')")

    def _check_positions(self) -> None:
        """The relative bias, the CLS/SEP thetas and rotary widths each variant has or lacks."""
        if self.variant == "rp" and not self.rp_bias:
            raise ValueError("config rp_bias=False contradicts variant='rp' (the T5 bias is what the rp variant is)")
        if self.variant in ("ap", "rope") and (self.rp_bias or self.untie_cls):
            raise ValueError(f"config variant={self.variant!r} has no RP bias and no CLS/SEP thetas "
                             f"(got rp_bias={self.rp_bias}, untie_cls={self.untie_cls})")
        if self.rp_skip_special and (not self.rp_bias or self.rp_at_special):
            raise ValueError("config rp_skip_special=True needs the bucketed bias (rp_bias) and contradicts "
                             "rp_at_special=True")
        if self.rp_per_layer and not self.has_rp_component:
            raise ValueError("config rp_per_layer=True but there is neither an RP bias nor CLS/SEP thetas")
        if self.variant == "rope" and self.d_qk % 2:
            raise ValueError(f"config head dimension ({self.d_qk}) must be even for rotary positions")
        if self.rp_bias:
            if self.num_buckets < 4 or self.num_buckets % 2:
                raise ValueError(f"config num_buckets ({self.num_buckets}) must be even and at least 4")
            if self.max_distance <= self.num_buckets // 4:
                raise ValueError(f"config max_distance ({self.max_distance}) must exceed the exact buckets "
                                 f"({self.num_buckets // 4})")

    @property
    def disentangled(self) -> bool:
        return self.variant == "disentangled"

    @property
    def d_model(self) -> int:
        return self.pos_size + self.hidden_size

    @property
    def has_rp_component(self) -> bool:
        return bool(self.rp_bias or self.untie_cls)

    def describe(self) -> str:
        """The variant and what sets it apart, in words (the model's ``describe``)."""
        parts = [KINDS[self.variant].format(c=self)]
        if self.has_rp_component:
            what = " + ".join(w for w, on in (("T5 RP bias", self.rp_bias), ("CLS/SEP thetas", self.untie_cls)) if on)
            parts.append(f"{what} {'per layer' if self.rp_per_layer else 'shared by all layers'}"
                         + (" (no bias on the [CLS]/[SEP] rows and columns)" if self.rp_skip_special else ""))
        parts.append(f"{self.residual} residual")
        if not self.mlm_head:
            parts.append("no MLM head")
        elif self.mlm_input == "full":
            parts.append("MLM head on [AP | semantic]")
        return ", ".join(parts)

    def position_offsets(self, position_offset, b: int, n: int) -> Tensor:
        """``[batch]`` shifts of the absolute positions of ``b`` sequences of ``n`` tokens, checked."""
        off = torch.as_tensor(position_offset)
        if off.dtype.is_floating_point or off.dtype == torch.bool or off.is_complex():
            raise InputError(f"position_offset must be an integer or a [batch] integer tensor, got dtype {off.dtype}")
        if off.dim() == 0:
            off = off.expand(b)
        elif tuple(off.shape) != (b,):
            raise InputError(f"position_offset must be an int or a [batch] tensor ([{b}]), got "
                             f"shape {tuple(off.shape)}")
        lo, hi = int(off.min()), int(off.max())
        if lo < 0:
            raise InputError(f"position_offset must be >= 0, got {lo}")
        if hi and self.variant == "rp":
            raise InputError(f"position_offset={hi}: the rp variant has no absolute positions to shift")
        if hi + n > self.max_length:
            raise InputError(f"position_offset {hi} + {n} tokens = {hi + n} exceeds max_length {self.max_length} "
                             f"(real tokens take positions offset+1..offset+n of 1..{self.max_length})")
        return off.long()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

