"""Bidirectional MLM encoders of the DSTG paper (seed 002): disentangled DSTG-NeoBERT and its baselines, hooked.

Four variants, each a class on shared blocks, picked once by ``EncoderConfig.variant`` (``EncoderModel(cfg)`` builds
the variant's class):

- ``disentangled`` (DSTG): the residual stream is ``[AP (pos_size dims) | semantic (hidden_size dims)]``.
  The token embedding ``encoder`` fills the semantic part, ``positional_embedding`` the AP part. Real tokens
  take rows ``1..n`` of the AP table (row 0 is the padding row), or ``k+1..k+n`` with ``position_offset=k``
  (AP shifting). Each stream has its own RMSNorms, its own queries and keys (``d_qk`` per head for both, so
  their dot products have matched variance) and its own values (``pos_size/H`` and ``hidden_size/H`` per
  head). The logit of head h is ``q_ap.k_ap/sqrt(d_qk) + q_sem.k_sem/sqrt(d_qk) + RP``, one softmax, and the
  same probabilities weigh both value streams. The SwiGLU FFN reads and writes the concatenated stream (the
  only place the streams mix); the MLM head ``decoder`` reads the semantic stream only.
- ``ap``: one stream of ``hidden_size``; learned absolute positions (rows ``1..n``) added to the embedding.
- ``rp``: one stream; T5 bucketed bias added to the logits.
- ``rope``: one stream; rotary positions ``0..n-1`` on queries and keys.

The code is split by layout, chosen once when the model is built: ``TwoStreamAttention`` / ``TwoStreamBlock``
(DSTG) and ``SingleStreamAttention`` / ``SingleStreamBlock`` (the baselines) share ``EncoderAttention`` (RP
term, logit hooks, softmax) and ``EncoderBlock`` (residual wiring); the RP pieces live in ``interp.families.encoder.relative``.
The baselines share norms, SwiGLU, residual mode and MLM head with DSTG. Their fused ``qkv`` projection is
split per head as the development code (NeoBERT) does: output rows ``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``.
``rope_style`` picks the rotary layout: ``half_split`` (``rotate_half``) or ``interleaved`` (pairs 2i, 2i+1,
the complex-number rotary of the development code; loaders pick it for development checkpoints).

**RP bias and special tokens.** T5 bidirectional buckets of ``key - query`` (32 buckets, max distance 128:
16 per direction, 8 of them exact) index ``relative_pos_bias.relative_attention_bias`` ``[buckets, H]``;
the buckets live in the persistent buffer ``relative_pos_bias.bucket_indices`` ``[max_length, max_length]``.
Sequences are unpadded, so [CLS] is index 0 and [SEP] index n-1. With ``untie_cls`` the logits of the
[CLS]/[SEP] rows and columns take learned per-head values ``cls_sep_override.thetas`` ``[4, H]`` (rows:
CLS row, SEP row, CLS column, SEP column; where a special row meets a special column the column wins).

The development code writes these thetas *over the AP logits* of those rows and columns, the bucketed bias
being 0 there. The paper instead counts them as the RP bias of special tokens and has no AP term for them.
The total logit is the same either way; the *decomposition* here follows the paper: ``hook_logits_rp``
carries the thetas at special rows/columns (the bucketed bias elsewhere) and ``hook_logits_ap`` is 0 there.
The semantic logit is never overwritten. ``rp_at_special=True`` also adds the bucketed bias at special
rows/columns (what one snapshot of the development code does); it is off by default, as the paper says.
Without thetas the bucketed bias covers every row and column, unless ``rp_skip_special=True``: the transformers
fork's ``RelativePositionBucketedBias`` zeroes it on the [CLS]/[SEP] rows and columns, thetas or not (its loader
sets the flag for configs without thetas).
The RP bias and thetas are one module shared by all layers (``rp_per_layer=False``, how the reference lists
them) or one per layer (``rp_per_layer=True``, how the development code builds them inside each block).

**Residual.** ``residual="normalized"`` is the development code's DSTG block: the block *replaces* its input
by the normalised input (AP and semantic parts normalised separately, then re-concatenated), adds the
attention output to that, and does the same before the FFN. Checkpoints trained with it need it.
``residual="prenorm"`` is standard pre-norm (``x + attn(norm x)``, ``h + ffn(norm h)``), what the
development code's baselines use. Left unset it is ``normalized`` for DSTG and ``prenorm`` for baselines.

Inputs are unpadded: every sequence of a batch has the same length and no pad id (0) may occur, because the
[SEP] handling reads the last index and pads would take real positions. Attention is computed eagerly (max
length 512) and every ``[batch, head, q, k]`` term is materialised and hookable; inside
``model.query_rows(idx)`` those hooks see only the selected query rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from interp import rope
from interp.attention import current_query_rows
from interp.base import InputError, PosLensModel
from interp.capabilities import Capability
from interp.hooks import AttentionHooks, BlockHooks, Hook
from interp.layers import RMSNorm, normal_init
from interp.families.encoder.relative import RelativePositionBias, SpecialTokenThetas, rp_logits, special_mask, t5_buckets  # noqa: F401 (re-exported)

VARIANTS = ("disentangled", "ap", "rp", "rope")
RESIDUALS = ("normalized", "prenorm")
ROPE_STYLES = ("half_split", "interleaved")
MLM_INPUTS = ("semantic", "full")
TOKENIZERS = (None, "bert-uncased")
THETA_ROWS = ("CLS row", "SEP row", "CLS column", "SEP column")


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
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_length"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"config {field}={getattr(self, field)} must be positive")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                             f"({self.num_attention_heads})")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"config pad_token_id ({self.pad_token_id}) is outside the vocabulary [0, {self.vocab_size})")

    def _check_streams(self) -> None:
        """The AP stream and the query/key width: DSTG's own, the baselines' hidden_size / heads."""
        h = self.num_attention_heads
        if self.variant == "disentangled":
            if self.pos_size < 1 or self.pos_size % h:
                raise ValueError(f"config pos_size ({self.pos_size}) must be a positive multiple of num_attention_heads ({h}) "
                                 "for the disentangled variant")
            if self.d_qk is None:
                if (self.hidden_size + self.pos_size) % h:
                    raise ValueError(f"config d_qk is unset and hidden_size + pos_size ({self.hidden_size + self.pos_size}) "
                                     f"is not divisible by num_attention_heads ({h}); set d_qk")
                self.d_qk = (self.hidden_size + self.pos_size) // h
            if self.d_qk < 1:
                raise ValueError(f"config d_qk ({self.d_qk}) must be positive")
        else:
            if self.pos_size:
                raise ValueError(f"config pos_size={self.pos_size}: only the disentangled variant has an AP stream (use 0)")
            if self.d_qk is not None and self.d_qk != self.hidden_size // h:
                raise ValueError(f"config d_qk={self.d_qk}: the {self.variant} variant uses hidden_size / heads = {self.hidden_size // h}")
            self.d_qk = self.hidden_size // h
            if self.mlm_input != "semantic":
                raise ValueError(f"config mlm_input={self.mlm_input!r}: only the disentangled variant has streams to choose from")
        if self.tie_word_embeddings and (not self.mlm_head or self.mlm_input == "full"):
            raise ValueError("config tie_word_embeddings needs an MLM head reading hidden_size dims (mlm_head=True, mlm_input='semantic')")

    def _check_positions(self) -> None:
        """The relative bias, the CLS/SEP thetas and rotary widths each variant has or lacks."""
        if self.variant == "rp" and not self.rp_bias:
            raise ValueError("config rp_bias=False contradicts variant='rp' (the T5 bias is what the rp variant is)")
        if self.variant in ("ap", "rope") and (self.rp_bias or self.untie_cls):
            raise ValueError(f"config variant={self.variant!r} has no RP bias and no CLS/SEP thetas "
                             f"(got rp_bias={self.rp_bias}, untie_cls={self.untie_cls})")
        if self.rp_skip_special and (not self.rp_bias or self.rp_at_special):
            raise ValueError("config rp_skip_special=True needs the bucketed bias (rp_bias) and contradicts rp_at_special=True")
        if self.rp_per_layer and not self.has_rp_component:
            raise ValueError("config rp_per_layer=True but there is neither an RP bias nor CLS/SEP thetas")
        if self.variant == "rope" and self.d_qk % 2:
            raise ValueError(f"config head dimension ({self.d_qk}) must be even for rotary positions")
        if self.rp_bias:
            if self.num_buckets < 4 or self.num_buckets % 2:
                raise ValueError(f"config num_buckets ({self.num_buckets}) must be even and at least 4")
            if self.max_distance <= self.num_buckets // 4:
                raise ValueError(f"config max_distance ({self.max_distance}) must exceed the exact buckets ({self.num_buckets // 4})")

    @property
    def disentangled(self) -> bool:
        return self.variant == "disentangled"

    @property
    def d_model(self) -> int:
        return self.pos_size + self.hidden_size

    @property
    def has_rp_component(self) -> bool:
        return bool(self.rp_bias or self.untie_cls)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class TiedDecoder(nn.Module):
    """The MLM head when tied to the token embedding: only the bias is its own."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size))


# ---- blocks ------------------------------------------------------------------------------------------


class SwiGLUFFN(nn.Module):
    """``w3(silu(gate) * up)`` with ``[gate | up] = w12 x`` (the xformers SwiGLU layout)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w12 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w3 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(gate) * up)


def _keep(scores: Tensor) -> Tensor:
    return scores


def _zero_special(scores: Tensor) -> Tensor:
    """The AP logit of [CLS]/[SEP] rows and columns set to 0: their thetas live in the RP component."""
    return scores.masked_fill(special_mask(scores.shape[-1], scores.device), 0.0)


class EncoderAttention(AttentionHooks):
    """What both attention layouts share: the RP term (per layer or shared), the logit hooks and one softmax.

    Subclasses build their projections and implement ``logits_and_values`` (hooked logit components and
    value tensors) and ``output`` (per-head outputs -> the block's attention output).
    """

    hook_logits_sem = Hook("[batch, head, q, k]", "semantic (content) logit q.k/sqrt(d_qk)")
    hook_logits_rp = Hook("[batch, head, q, k]", "RP logit: T5 bucketed bias, and the CLS/SEP thetas on the special rows / "
                          "columns", when=lambda attn: attn.cfg.has_rp_component)
    hook_attn_scores = Hook("[batch, head, q, k]", "sum of the logit components, before the softmax")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities")

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        h = cfg.num_attention_heads
        self.scale = 1.0 / math.sqrt(cfg.d_qk)
        self.relative_pos_bias = None
        self.cls_sep_override = None
        if cfg.rp_per_layer:
            if cfg.rp_bias:
                self.relative_pos_bias = RelativePositionBias(h, cfg.max_length, cfg.num_buckets, cfg.max_distance)
            if cfg.untie_cls:
                self.cls_sep_override = SpecialTokenThetas(h)
        self.relative = self._rp_component if cfg.has_rp_component else self._no_rp

    def _rp_component(self, n: int, b: int, shared_bias, shared_thetas, like: Tensor) -> list:
        """``[(hook_logits_rp, [batch, head, q, k])]``: bucketed bias, and thetas on the special rows / columns."""
        cfg = self.cfg
        bias = self.relative_pos_bias if cfg.rp_per_layer else shared_bias
        thetas = self.cls_sep_override if cfg.rp_per_layer else shared_thetas
        rp = rp_logits(n, cfg.num_attention_heads, bias, thetas, add_bias_at_special=cfg.rp_at_special,
                       skip_special=cfg.rp_skip_special, device=like.device)
        return [(self.hook_logits_rp, rp.to(like.dtype).unsqueeze(0).expand(b, -1, -1, -1))]

    @staticmethod
    def _no_rp(n: int, b: int, shared_bias, shared_thetas, like: Tensor) -> list:
        return []

    def forward(self, x: Tensor, rope_positions: Tensor | None, shared_bias, shared_thetas) -> Tensor:
        b, n, _ = x.shape
        components, values = self.logits_and_values(x, rope_positions)
        components += self.relative(n, b, shared_bias, shared_thetas, x)
        pattern = self._pattern(components, values[0].dtype)
        return self.output([torch.einsum("bhqk,bkhd->bqhd", pattern, v) for v in values])

    def _pattern(self, components, dtype) -> Tensor:
        """Hooked components -> summed scores -> softmax; under ``query_rows`` only those rows pass the hooks."""
        rows = current_query_rows(components[0][1].shape[-2])
        if rows is None:
            scores = self.hook_attn_scores(sum(hook(t.clone()) for hook, t in components))
            return self.hook_pattern(torch.softmax(scores.float(), dim=-1).to(dtype))
        rows = rows.to(components[0][1].device)
        pattern = torch.softmax(sum(t for _, t in components).float(), dim=-1).to(dtype)
        scores = self.hook_attn_scores(sum(hook(t.index_select(-2, rows)) for hook, t in components))
        chosen = self.hook_pattern(torch.softmax(scores.float(), dim=-1).to(dtype))
        return pattern.index_copy(-2, rows, chosen)


class TwoStreamAttention(EncoderAttention):
    """DSTG: AP and semantic streams with their own q, k (``d_qk`` each) and values; logits AP + semantic (+ RP)."""

    hook_q_ap = Hook("[batch, pos, head, d_qk]", "AP queries")
    hook_k_ap = Hook("[batch, pos, head, d_qk]", "AP keys")
    hook_v_ap = Hook("[batch, pos, head, pos_size/head]", "AP values")
    hook_q_sem = Hook("[batch, pos, head, d_qk]", "semantic queries")
    hook_k_sem = Hook("[batch, pos, head, d_qk]", "semantic keys")
    hook_v_sem = Hook("[batch, pos, head, hidden_size/head]", "semantic values")
    hook_logits_ap = Hook("[batch, head, q, k]", "AP logit q_ap.k_ap/sqrt(d_qk); 0 on [CLS]/[SEP] rows and columns when they "
                          "have thetas")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities (one softmax for both value streams)")
    hook_z_ap = Hook("[batch, pos, head, pos_size/head]", "per-head AP output before wo_pos")
    hook_z_sem = Hook("[batch, pos, head, hidden_size/head]", "per-head semantic output before wo_sem")

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg)
        h, dqk = cfg.num_attention_heads, cfg.d_qk
        self.qkv_pos = nn.Linear(cfg.pos_size, 2 * h * dqk + cfg.pos_size, bias=False)
        self.qkv_sem = nn.Linear(cfg.hidden_size, 2 * h * dqk + cfg.hidden_size, bias=False)
        self.wo_pos = nn.Linear(cfg.pos_size, cfg.pos_size, bias=False)
        self.wo_sem = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=False)
        self.special_ap = _zero_special if cfg.untie_cls else _keep  # with thetas, special tokens carry no AP term

    def logits_and_values(self, x: Tensor, rope_positions):
        cfg = self.cfg
        b, n, _ = x.shape
        h, dqk, p = cfg.num_attention_heads, cfg.d_qk, cfg.pos_size
        q_ap, k_ap, v_ap = self.qkv_pos(x[..., :p]).split([h * dqk, h * dqk, p], dim=-1)
        q_sem, k_sem, v_sem = self.qkv_sem(x[..., p:]).split([h * dqk, h * dqk, cfg.hidden_size], dim=-1)
        q_ap, k_ap = self.hook_q_ap(q_ap.view(b, n, h, dqk)), self.hook_k_ap(k_ap.view(b, n, h, dqk))
        q_sem, k_sem = self.hook_q_sem(q_sem.view(b, n, h, dqk)), self.hook_k_sem(k_sem.view(b, n, h, dqk))
        values = [self.hook_v_ap(v_ap.view(b, n, h, -1)), self.hook_v_sem(v_sem.view(b, n, h, -1))]
        ap = self.special_ap(torch.einsum("bqhd,bkhd->bhqk", q_ap, k_ap) * self.scale)
        sem = torch.einsum("bqhd,bkhd->bhqk", q_sem, k_sem) * self.scale
        return [(self.hook_logits_ap, ap), (self.hook_logits_sem, sem)], values

    def output(self, zs) -> Tensor:
        b, n = zs[0].shape[:2]
        z_ap, z_sem = self.hook_z_ap(zs[0]), self.hook_z_sem(zs[1])
        return torch.cat([self.wo_pos(z_ap.reshape(b, n, -1)), self.wo_sem(z_sem.reshape(b, n, -1))], dim=-1)


class SingleStreamAttention(EncoderAttention):
    """The baselines: one fused ``qkv`` split per head ``[q_h k_h v_h]``."""

    hook_q = Hook("[batch, pos, head, d_head]", "queries")
    hook_k = Hook("[batch, pos, head, d_head]", "keys")
    hook_v = Hook("[batch, pos, head, d_head]", "values")
    hook_logits_sem = Hook("[batch, head, q, k]", "semantic (content) logit q.k/sqrt(d_qk)")
    hook_z = Hook("[batch, pos, head, d_head]", "per-head output before wo")

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg)
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=False)
        self.wo = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=False)

    def queries_keys(self, q: Tensor, k: Tensor, rope_positions) -> tuple[Tensor, Tensor]:
        return q, k

    def logits_and_values(self, x: Tensor, rope_positions):
        cfg = self.cfg
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, cfg.num_attention_heads, 3 * cfg.d_qk).chunk(3, dim=-1)
        q, k = self.queries_keys(self.hook_q(q), self.hook_k(k), rope_positions)
        return [(self.hook_logits_sem, torch.einsum("bqhd,bkhd->bhqk", q, k) * self.scale)], [self.hook_v(v)]

    def output(self, zs) -> Tensor:
        b, n = zs[0].shape[:2]
        return self.wo(self.hook_z(zs[0]).reshape(b, n, -1))


class RotaryAttention(SingleStreamAttention):
    """The rope baseline: queries and keys turned by positions ``offset + 0..n-1`` in the config's ``rope_style``."""

    hook_q = Hook("[batch, pos, head, d_head]", "queries (before rotation)")
    hook_k = Hook("[batch, pos, head, d_head]", "keys (before rotation)")
    hook_rot_q = Hook("[batch, pos, head, d_head]", "queries rotated by positions offset+0..offset+n-1")
    hook_rot_k = Hook("[batch, pos, head, d_head]", "rotated keys")

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg)
        self.rotate = rope.rotate_half_split if cfg.rope_style == "half_split" else rope.rotate_interleaved

    def queries_keys(self, q: Tensor, k: Tensor, rope_positions) -> tuple[Tensor, Tensor]:
        theta = self.cfg.rope_theta
        return self.hook_rot_q(self.rotate(q, rope_positions, theta)), self.hook_rot_k(self.rotate(k, rope_positions, theta))


def _normalized_base(x: Tensor, normed: Tensor) -> Tensor:
    return normed


def _raw_base(x: Tensor, normed: Tensor) -> Tensor:
    return x


class EncoderBlock(BlockHooks):
    """Norm -> attention -> residual -> norm -> SwiGLU -> residual; ``residual="normalized"`` adds each output to
    the normalised input instead of the raw one. Subclasses build the norms and say how they apply."""

    hook_attn_in = Hook("[batch, pos, d_model]", "normalised attention input; with residual='normalized' the attention "
                        "output is added to this, not to the raw residual")
    hook_mlp_in = Hook("[batch, pos, d_model]", "normalised FFN input (the FFN base with residual='normalized')")
    hook_mlp_out = Hook("[batch, pos, d_model]", "SwiGLU output added to the residual")

    def __init__(self, cfg: EncoderConfig, attention: type[EncoderAttention]):
        super().__init__()
        self.cfg = cfg
        self.base = _normalized_base if cfg.residual == "normalized" else _raw_base
        self.attn = attention(cfg)
        self.ffn = SwiGLUFFN(cfg.d_model, cfg.intermediate_size)

    def forward(self, x: Tensor, rope_positions: Tensor | None, shared_bias, shared_thetas) -> Tensor:
        x = self.hook_resid_pre(x)
        a = self.hook_attn_in(self._norm(x, "attention"))
        attn_out = self.hook_attn_out(self.attn(a, rope_positions, shared_bias, shared_thetas))
        h = self.hook_resid_mid(self.base(x, a) + attn_out)
        m = self.hook_mlp_in(self._norm(h, "ffn"))
        out = self.base(h, m) + self.hook_mlp_out(self.ffn(m))
        return self.hook_resid_post(self._streams(out))

    def _streams(self, out: Tensor) -> Tensor:
        return out


class SingleStreamBlock(EncoderBlock):
    def __init__(self, cfg: EncoderConfig, attention: type[EncoderAttention] = SingleStreamAttention):
        super().__init__(cfg, attention)
        self.attention_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")

    def _norm(self, x: Tensor, stage: str) -> Tensor:
        return getattr(self, f"{stage}_norm")(x)


class TwoStreamBlock(EncoderBlock):
    """DSTG: the AP and semantic parts are normalised apart; both streams leaving the block are hooked."""

    hook_resid_pre = Hook("[batch, pos, d_model]", "residual entering layer l: [AP | semantic]")
    hook_attn_in = Hook("[batch, pos, d_model]", "normalised attention input (AP and semantic parts normalised apart); with "
                        "residual='normalized' the attention output is added to this, not to the raw residual")
    hook_attn_out = Hook("[batch, pos, d_model]", "attention output added to the residual: [wo_pos z_ap | wo_sem z_sem]")
    hook_mlp_out = Hook("[batch, pos, d_model]", "SwiGLU output added to the residual (the only place the streams mix)")
    hook_resid_ap = Hook("[batch, pos, pos_size]", "AP stream leaving layer l (hooked before the concatenation, so edits "
                         "propagate)")
    hook_resid_sem = Hook("[batch, pos, hidden_size]", "semantic stream leaving layer l")

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg, TwoStreamAttention)
        for stage in ("attention", "ffn"):
            setattr(self, f"pos_{stage}_norm", RMSNorm(cfg.pos_size, cfg.norm_eps, style="llama"))
            setattr(self, f"sem_{stage}_norm", RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama"))

    def _norm(self, x: Tensor, stage: str) -> Tensor:
        p = self.cfg.pos_size
        return torch.cat([getattr(self, f"pos_{stage}_norm")(x[..., :p]), getattr(self, f"sem_{stage}_norm")(x[..., p:])], dim=-1)

    def _streams(self, out: Tensor) -> Tensor:
        p = self.cfg.pos_size
        return torch.cat([self.hook_resid_ap(out[..., :p]), self.hook_resid_sem(out[..., p:])], dim=-1)
# ---- the models ----------------------------------------------------------------------------------------


def _untied_head(model, head_in: Tensor) -> Tensor:
    return model.decoder(head_in)


def _tied_head(model, head_in: Tensor) -> Tensor:
    return F.linear(head_in, model.encoder.weight, model.decoder.bias)


class EncoderModel(PosLensModel):
    """What the four variants share: the token embedding, the blocks, the RP modules and the MLM head.
    ``EncoderModel(cfg)`` builds the class of ``cfg.variant`` (``VARIANT_CLASSES``); each implements ``embed`` (tokens and
    offsets -> the first residual and the rotary positions, if any) and ``finish`` (last residual -> what the model
    returns and what the head reads)."""

    family = "encoder"
    hook_embed_sem = Hook("[batch, pos, hidden_size]", "token embeddings (encoder.weight rows), before any positions are added")
    hook_final = Hook("[batch, pos, hidden_size]", "final-normed residual (the MLM head's input)")

    def __new__(cls, cfg: EncoderConfig | None = None, *args, **kwargs):
        # copy and pickle call __new__ with the instance's own class and no arguments
        return super().__new__(VARIANT_CLASSES[cfg.variant] if cls is EncoderModel and cfg is not None else cls)

    def __init__(self, cfg: EncoderConfig, init_weights: bool = True):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.d_model
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_length
        self._tokenizer = None
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.build_positions(cfg)
        shared = not cfg.rp_per_layer
        self.relative_pos_bias = (RelativePositionBias(cfg.num_attention_heads, cfg.max_length, cfg.num_buckets, cfg.max_distance)
                                  if cfg.rp_bias and shared else None)
        self.cls_sep_override = SpecialTokenThetas(cfg.num_attention_heads) if cfg.untie_cls and shared else None
        self.blocks = nn.ModuleList([self.make_block(cfg) for _ in range(cfg.num_hidden_layers)])
        self.build_final(cfg)
        self.decoder = None
        self.head = None
        if cfg.mlm_head:
            width = cfg.d_model if cfg.mlm_input == "full" else cfg.hidden_size
            self.decoder = TiedDecoder(cfg.vocab_size) if cfg.tie_word_embeddings else nn.Linear(width, cfg.vocab_size, bias=True)
            self.head = _tied_head if cfg.tie_word_embeddings else _untied_head
        self.capabilities = frozenset({Capability.HIDDEN_STATES, Capability.ATTENTION} | self.CAPABILITIES)
        if init_weights:
            self.reset_parameters()
        self.setup()

    CAPABILITIES: frozenset = frozenset()

    def make_block(self, cfg: EncoderConfig) -> EncoderBlock:
        return SingleStreamBlock(cfg)

    def build_positions(self, cfg: EncoderConfig) -> None:
        self.positional_embedding = None

    def build_final(self, cfg: EncoderConfig) -> None:
        self.layer_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")

    def embed(self, tokens: Tensor, offset: Tensor) -> tuple[Tensor, Tensor | None]:
        return self.hook_embed_sem(self.encoder(tokens)), None

    def finish(self, x: Tensor) -> tuple[Tensor, Tensor]:
        final = self.hook_final(self.layer_norm(x))
        return final, final

    @property
    def tokenizer(self):
        """The WordPiece tokenizer when the config names one (built on first use), else whatever was set."""
        if self._tokenizer is None and self.cfg.tokenizer == "bert-uncased":
            from interp.tokenizers import WordPieceTokenizer

            self._tokenizer = WordPieceTokenizer()
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, value):
        self._tokenizer = value

    def describe(self) -> str:
        c = self.cfg
        parts = [f"encoder family, {self.KIND.format(c=c)}"]
        if c.has_rp_component:
            what = " + ".join(w for w, on in (("T5 RP bias", c.rp_bias), ("CLS/SEP thetas", c.untie_cls)) if on)
            parts.append(f"{what} {'per layer' if c.rp_per_layer else 'shared by all layers'}"
                         + (" (no bias on the [CLS]/[SEP] rows and columns)" if c.rp_skip_special else ""))
        parts.append(f"{c.residual} residual")
        if not c.mlm_head:
            parts.append("no MLM head")
        elif c.mlm_input == "full":
            parts.append("MLM head on [AP | semantic]")
        return ", ".join(parts)

    def reset_parameters(self, std: float = 0.02):
        normal_init(self, std, {RelativePositionBias: "relative_attention_bias", SpecialTokenThetas: "thetas"})

    # -- inputs --------------------------------------------------------------------------------------------
    def check_tokens(self, tokens) -> Tensor:
        """Base checks, and no padding: one length per batch and no pad id anywhere."""
        if isinstance(tokens, (list, tuple)) and tokens and all(isinstance(t, (Sequence, Tensor)) for t in tokens):
            lengths = [len(t) for t in tokens]
            if len(set(lengths)) > 1:
                raise InputError(f"sequences in one batch must have the same length, got lengths {lengths}: this encoder takes "
                                 "unpadded sequences only ([SEP] is read at the last index); group them by length")
            tokens = torch.stack([torch.as_tensor(t) for t in tokens])
        tokens = super().check_tokens(tokens)
        pads = (tokens == self.cfg.pad_token_id).nonzero()
        if len(pads):
            row, pos = (int(i) for i in pads[0])
            raise InputError(f"pad id {self.cfg.pad_token_id} at batch row {row}, position {pos}: this encoder takes unpadded sequences "
                             "only ([CLS]/[SEP] are found at indices 0 and n-1, and pads would take real positions); "
                             "run sequences of different lengths separately")
        return tokens

    def _offsets(self, position_offset, b: int, n: int) -> Tensor:
        off = torch.as_tensor(position_offset)
        if off.dtype.is_floating_point or off.dtype == torch.bool or off.is_complex():
            raise InputError(f"position_offset must be an integer or a [batch] integer tensor, got dtype {off.dtype}")
        if off.dim() == 0:
            off = off.expand(b)
        elif tuple(off.shape) != (b,):
            raise InputError(f"position_offset must be an int or a [batch] tensor ([{b}]), got shape {tuple(off.shape)}")
        lo, hi = int(off.min()), int(off.max())
        if lo < 0:
            raise InputError(f"position_offset must be >= 0, got {lo}")
        self.check_shift(hi)
        if hi + n > self.cfg.max_length:
            raise InputError(f"position_offset {hi} + {n} tokens = {hi + n} exceeds max_length {self.cfg.max_length} "
                             f"(real tokens take positions offset+1..offset+n of 1..{self.cfg.max_length})")
        return off.long().to(self.device)

    def check_shift(self, largest: int) -> None:
        """Refuse a shift of the absolute positions this variant cannot make (every variant with positions can)."""

    # -- forward -------------------------------------------------------------------------------------------
    def forward(self, tokens, position_offset=0, predict_at: Tensor | None = None) -> Tensor:
        """MLM logits ``[batch, pos, vocab]`` (without an MLM head: the final-normed residual ``[batch, pos, d_model]``).

        ``position_offset`` (int or ``[batch]``) shifts absolute positions: real tokens take AP rows
        ``k+1..k+n`` (rotary positions ``k..k+n-1`` in the rope baseline). ``predict_at`` (bool
        ``[batch, pos]``) applies the MLM head only there and returns ``[n_selected, vocab]`` (training).
        """
        tokens = self.check_tokens(tokens)
        b, n = tokens.shape
        x, rope_positions = self.embed(tokens, self._offsets(position_offset, b, n))
        for block in self.blocks:
            x = block(x, rope_positions, self.relative_pos_bias, self.cls_sep_override)
        final, head_in = self.finish(x)
        if self.head is None:
            return final
        if predict_at is not None:
            head_in = head_in[predict_at.to(head_in.device)]
        return self.head(self, head_in)

    @property
    def has_output_head(self) -> bool:
        return self.head is not None

    def unembed(self, hidden: Tensor) -> Tensor:
        """MLM logits of rows of what the head reads (``final_hidden``)."""
        if self.head is None:
            return super().unembed(hidden)
        return self.head(self, hidden)

    # -- capability: HIDDEN_STATES ---------------------------------------------------------------------------
    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}


def _positions_of(offset: Tensor, n: int) -> Tensor:
    """Rows ``offset+1..offset+n`` of a position table (row 0 is the padding row)."""
    return offset[:, None] + torch.arange(n, device=offset.device) + 1


class DSTGEncoder(EncoderModel):
    """DSTG: the residual stream is ``[AP | semantic]``; the AP table fills the first ``pos_size`` dims."""

    KIND = "DSTG (AP {c.pos_size} | semantic {c.hidden_size}, d_qk {c.d_qk})"
    CAPABILITIES = frozenset({Capability.AP_STREAM, Capability.LOGIT_COMPONENTS})
    hook_embed_sem = Hook("[batch, pos, hidden_size]", "token embeddings (encoder.weight rows): the semantic stream's input")
    hook_embed_ap = Hook("[batch, pos, pos_size]", "AP embeddings, rows offset+1..offset+n of positional_embedding")
    hook_final = None  # the two streams are normed apart
    hook_final_ap = Hook("[batch, pos, pos_size]", "final-normed AP stream (read by no head unless mlm_input='full')")
    hook_final_sem = Hook("[batch, pos, hidden_size]", "final-normed semantic stream (the MLM head's input)")
    head_hooks = ("hook_final_ap", "hook_final_sem")

    def head_reads(self, captured: dict[str, Tensor]) -> Tensor:
        sem = captured["hook_final_sem"]
        return torch.cat([captured["hook_final_ap"], sem], -1) if self.cfg.mlm_input == "full" else sem

    def make_block(self, cfg: EncoderConfig) -> EncoderBlock:
        return TwoStreamBlock(cfg)

    def build_positions(self, cfg: EncoderConfig) -> None:
        self.positional_embedding = nn.Embedding(cfg.max_length + 1, cfg.pos_size)

    def build_final(self, cfg: EncoderConfig) -> None:
        self.pos_layer_norm = RMSNorm(cfg.pos_size, cfg.norm_eps, style="llama")
        self.sem_layer_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.head_input = 0 if cfg.mlm_input == "full" else 1  # [AP | semantic], or the semantic stream

    def embed(self, tokens: Tensor, offset: Tensor) -> tuple[Tensor, None]:
        ap = self.hook_embed_ap(self.positional_embedding(_positions_of(offset, tokens.shape[1])))
        return torch.cat([ap, self.hook_embed_sem(self.encoder(tokens))], dim=-1), None

    def finish(self, x: Tensor) -> tuple[Tensor, Tensor]:
        p = self.cfg.pos_size
        ap = self.hook_final_ap(self.pos_layer_norm(x[..., :p]))
        sem = self.hook_final_sem(self.sem_layer_norm(x[..., p:]))
        final = torch.cat([ap, sem], dim=-1)
        return final, (final, sem)[self.head_input]

    def residual_subspaces(self) -> dict[str, slice]:
        p = self.cfg.pos_size
        return {"full": slice(0, self.d_model), "ap": slice(0, p), "semantic": slice(p, self.d_model)}

    def ap_embedding_matrix(self) -> Tensor:
        """``[max_length, pos_size]``: the AP rows real positions 1..max_length use (row 0, the padding row, left out)."""
        return self.positional_embedding.weight[1:].detach()

    def ap_hook(self) -> str:
        return "hook_embed_ap"

    def logit_components(self) -> tuple[str, ...]:
        """Names of the logit components, each at ``blocks.{l}.attn.hook_logits_{name}``; their sum is the score."""
        return ("ap", "sem") + (("rp",) if self.cfg.has_rp_component else ())


class APEncoder(EncoderModel):
    """The ap baseline: learned absolute positions added to the token embeddings."""

    KIND = "AP baseline (learned absolute positions)"
    CAPABILITIES = frozenset({Capability.AP_STREAM})
    hook_pos_embed = Hook("[batch, pos, hidden_size]", "position embeddings (rows offset+1..offset+n) added to the tokens")

    def build_positions(self, cfg: EncoderConfig) -> None:
        self.positional_embedding = nn.Embedding(cfg.max_length + 1, cfg.hidden_size)

    def embed(self, tokens: Tensor, offset: Tensor) -> tuple[Tensor, None]:
        rows = self.hook_pos_embed(self.positional_embedding(_positions_of(offset, tokens.shape[1])))
        return self.hook_embed_sem(self.encoder(tokens)) + rows, None

    def ap_embedding_matrix(self) -> Tensor:
        """``[max_length, hidden_size]``: the rows real positions 1..max_length use (row 0, the padding row, left out)."""
        return self.positional_embedding.weight[1:].detach()

    def ap_hook(self) -> str:
        return "hook_pos_embed"


class RPEncoder(EncoderModel):
    """The rp baseline: T5 bucketed bias on the logits, no absolute positions."""

    KIND = "RP baseline (T5 bias)"
    CAPABILITIES = frozenset({Capability.LOGIT_COMPONENTS})

    def check_shift(self, largest: int) -> None:
        if largest:
            raise InputError(f"position_offset={largest}: the rp variant has no absolute positions to shift")

    def logit_components(self) -> tuple[str, ...]:
        return ("sem", "rp")


class RoPEEncoder(EncoderModel):
    """The rope baseline: queries and keys rotated by positions ``offset + 0..n-1``."""

    KIND = "RoPE baseline ({c.rope_style}, theta {c.rope_theta:g})"
    CAPABILITIES = frozenset({Capability.ROTARY})

    def make_block(self, cfg: EncoderConfig) -> EncoderBlock:
        return SingleStreamBlock(cfg, RotaryAttention)

    def embed(self, tokens: Tensor, offset: Tensor) -> tuple[Tensor, Tensor]:
        positions = (offset[:, None] + torch.arange(tokens.shape[1], device=tokens.device)).float()
        return self.hook_embed_sem(self.encoder(tokens)), positions

    def rotation(self, layer: int) -> rope.RotarySpec:
        """Every layer turns its queries and keys in the config's ``rope_style``."""
        return rope.RotarySpec(rope.inverse_frequencies(self.cfg.d_qk, self.cfg.rope_theta), self.cfg.rope_style)


VARIANT_CLASSES = {"disentangled": DSTGEncoder, "ap": APEncoder, "rp": RPEncoder, "rope": RoPEEncoder}
