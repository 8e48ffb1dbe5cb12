"""Bidirectional MLM encoders of the DSTG paper (seed 002): disentangled DSTG-NeoBERT and its baselines, hooked.

One model class, ``EncoderModel``; ``EncoderConfig.variant`` (``interp.families.encoder.config``) picks, once in
``__init__``, which of four it is:

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

DSTG's blocks are ``TwoStreamBlock`` / ``TwoStreamAttention``; the baselines' (same norms, SwiGLU, residual and
head) are ``SingleStreamBlock`` / ``SingleStreamAttention`` (``RotaryAttention`` for rope), whose fused ``qkv`` is split
per head as the development code (NeoBERT) does: output rows ``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``.

**RP bias and special tokens** (``interp.families.encoder.relative``, which says how the paper and the development
code differ on them): T5 bucketed bias ``relative_pos_bias``, and with ``untie_cls`` learned per-head logits
``cls_sep_override.thetas`` for the [CLS] (index 0) and [SEP] (index n-1) rows and columns. ``hook_logits_rp`` carries
the thetas there (the bucketed bias elsewhere) and ``hook_logits_ap`` is 0 there; the semantic logit is never
overwritten. One module shared by all layers, or one per layer (``rp_per_layer=True``, as the development code builds
them).

**Residual** (``residual``, see ``interp.families.encoder.config``): pre-norm, or the development code's
``normalized`` block, which adds each output to the normalised input.

**Attention** goes through ``interp.attention.attend``. With no hook on a logit component, the components are one dot
product: DSTG's AP + semantic logit is ``[q_ap | q_sem].[k_ap | k_sem]`` at the same scale (``q_ap`` zeroed on the
special rows and ``k_ap`` on the special columns where they have thetas, which zeroes their AP logit), the RP logit
is the additive bias, and one softmax over ``[v_ap | v_sem]`` weighs both value streams, so the fused kernel runs
unless the scores or pattern are hooked. With a component hooked, every ``[batch, head, q, k]`` component is
materialised and hookable; inside ``model.query_rows(idx)`` those hooks see only the selected query rows.

Token batches are unpadded (one length, no pad id: pads would take real positions); a padded batch runs with its
``attention_mask`` (``model(texts)``, ``model(tokens, attention_mask=...)``, ``interp.padding``): pad keys are hidden,
each row's positions count its real tokens from 0, and [CLS] / [SEP] are each row's first and last real token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp import padding, rope
from interp.attention import attend, current_query_rows, hooked
from interp.base import InputError, PosLensModel
from interp.capabilities import Capability
from interp.families.encoder.config import (  # noqa: F401 (re-exported)
    MLM_INPUTS,
    RESIDUALS,
    ROPE_STYLES,
    THETA_ROWS,
    TOKENIZERS,
    VARIANTS,
    EncoderConfig,
)
from interp.families.encoder.relative import (  # noqa: F401 (re-exported)
    RelativePositionBias,
    SpecialTokenThetas,
    rp_logits,
    special_edges,
    special_ends,
    special_mask,
    t5_buckets,
)
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Either, Hook, MLPHooks, NormHooks, head_hooks
from interp.layers import RMSNorm, normal_init
from interp.tl import AttentionWeights, per_head_split, result_heads


class SwiGLUFFN(nn.Module):
    """``w3(silu(gate) * up)`` with ``[gate | up] = w12 x`` (the xformers SwiGLU layout)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w12 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w3 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Tensor, hooks: MLPHooks | None = None) -> Tensor:
        """``hooks``: the block's ``mlp`` (TransformerLens' names for this ``ffn``'s hidden layer)."""
        gate, up = self.w12(x).chunk(2, dim=-1)
        if hooks is None:
            return self.w3(F.silu(gate) * up)
        return self.w3(hooks.hook_post(F.silu(hooks.hook_pre(gate)) * up))


class TiedDecoder(nn.Module):
    """The MLM head when tied to the token embedding: only the bias is its own."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size))


def relative_logits(cfg: EncoderConfig, n: int, bias, thetas, like: Tensor) -> Tensor | None:
    """``[1, head, q, k]``: the RP logit (bucketed bias, and the thetas on the special rows / columns), or None
    for a config with neither."""
    if not cfg.has_rp_component:
        return None
    ends = padded_ends(n, like.device)
    rp = rp_logits(n, cfg.num_attention_heads, bias, thetas, add_bias_at_special=cfg.rp_at_special,
                   skip_special=cfg.rp_skip_special, device=like.device, ends=ends,
                   positions=None if ends is None else padding.position_ids(n, like.device))
    return rp.to(like.dtype) if ends is not None else rp.to(like.dtype)[None]


def padded_ends(n: int, device) -> tuple[Tensor, Tensor] | None:
    """Each row's [CLS] and [SEP] index (its first and last real token) in the padded batch running, or None
    (unpadded: 0 and n-1)."""
    mask = padding.current_padding()
    if mask is None or mask.shape[-1] != n:
        return None
    return tuple(e.to(device) for e in special_ends(mask))


# ---- attention -----------------------------------------------------------------------------------------


class EncoderAttention(AttentionHooks):
    """What both layouts share: the per-layer RP modules (``rp_per_layer``), the logit hooks and ``attend``."""

    hook_logits_sem = Hook("[batch, head, q, k]", "semantic (content) logit q.k/sqrt(d_qk)")
    hook_logits_rp = Hook("[batch, head, q, k]",
                          "RP logit: T5 bucketed bias, and the CLS/SEP thetas on the special rows / "
                          "columns", when=lambda attn: attn.cfg.has_rp_component)
    hook_attn_scores = Hook("[batch, head, q, k]", "sum of the logit components, before the softmax")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities")

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.scale = 1.0 / math.sqrt(cfg.d_qk)
        per_layer = cfg.rp_per_layer
        self.relative_pos_bias = (RelativePositionBias(cfg.num_attention_heads, cfg.max_length, cfg.num_buckets,
                                                       cfg.max_distance)
                                  if cfg.rp_bias and per_layer else None)
        self.cls_sep_override = SpecialTokenThetas(cfg.num_attention_heads) if cfg.untie_cls and per_layer else None

    def attend(self, parts: list, v: Tensor, rp: Tensor | None) -> Tensor:
        """Per-head output ``[batch, pos, head, d_v]``. ``parts``: ``(logit hook, q, k, special)`` per content component
        (``[batch, pos, head, d_qk]``; ``special``: its logit is 0 on the [CLS]/[SEP] rows and columns); ``v``
        ``[batch, pos, head, d_v]``; ``rp`` ``[1, head, q, k]`` or None."""
        b, n = v.shape[:2]
        if self.cfg.rp_per_layer:
            rp = relative_logits(self.cfg, n, self.relative_pos_bias, self.cls_sep_override, v)
        hooks = [hook for hook, *_ in parts] + ([self.hook_logits_rp] if rp is not None else [])
        ends = padded_ends(n, v.device)
        if ends is None:
            edge = torch.zeros(1, n, dtype=torch.bool, device=v.device)
            edge[:, [0, n - 1]] = True
        else:
            edge = special_edges(n, ends)
        edge = edge[:, :, None, None]  # [batch or 1, pos, 1, 1]
        q = torch.cat([q.masked_fill(edge, 0.0) if special else q for _, q, _, special in parts], -1)
        k = torch.cat([k.masked_fill(edge, 0.0) if special else k for _, _, k, special in parts], -1)
        scores = None
        if any(hooked(hook) for hook in hooks):
            logits = [(hook, self.logit(q_, k_, special)) for hook, q_, k_, special in parts]
            if rp is not None:
                logits.append((self.hook_logits_rp, rp.expand(b, -1, -1, -1)))
            scores, rp = self.hooked_sum(logits), None
        z = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=False, bias=rp, scale=self.scale,
                   hook_scores=self.hook_attn_scores, hook_pattern=self.hook_pattern, scores=scores)
        return z.transpose(1, 2)

    def logit(self, q: Tensor, k: Tensor, special: bool) -> Tensor:
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.scale
        if not special:
            return scores
        n = scores.shape[-1]
        ends = padded_ends(n, scores.device)
        mask = special_mask(n, scores.device) if ends is None else special_mask(n, scores.device, ends)[:, None]
        return scores.masked_fill(mask, 0.0)

    @staticmethod
    def hooked_sum(logits: list) -> Tensor:
        """The components through their hooks, summed; inside ``query_rows`` the hooks see those rows only and the
        other rows are the unhooked sum."""
        rows = current_query_rows(logits[0][1].shape[-2])
        if rows is None:
            return sum(hook(t.clone()) for hook, t in logits)
        rows = rows.to(logits[0][1].device)
        chosen = sum(hook(t.index_select(-2, rows)) for hook, t in logits)
        return sum(t for _, t in logits).index_copy(-2, rows, chosen)


class SingleStreamAttention(EncoderAttention, AttentionWeights):
    """The baselines: one fused ``qkv`` split per head ``[q_h k_h v_h]``."""

    hook_q, hook_k, hook_v, hook_z = head_hooks("queries", "keys", "values", "per-head output before wo")
    hook_result = RESULT
    rotary = False

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg)
        self.interleaved = cfg.rope_style == "interleaved"  # rotary pairs (2i, 2i+1), else (i, i + d/2)
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=False)
        self.wo = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=False)

    def forward(self, x: Tensor, positions: Tensor | None, rp: Tensor | None) -> Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, cfg.num_attention_heads, 3 * cfg.d_qk).chunk(3, dim=-1)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if self.rotary:
            turn = rope.rotate_interleaved if self.interleaved else rope.rotate_half_split
            q, k = (self.hook_rot_q(turn(q, positions, cfg.rope_theta)),
                    self.hook_rot_k(turn(k, positions, cfg.rope_theta)))
        z = self.hook_z(self.attend([(self.hook_logits_sem, q, k, False)], v, rp))
        return result_heads(self, z, self.wo)

    @property
    def tl_n_heads(self) -> int:
        return self.cfg.num_attention_heads

    def tl_projections(self):
        """The fused ``qkv`` rows ``[q_h k_h v_h]`` per head, as three Linear-like views of its weight."""
        return (*per_head_split(self.qkv.weight, None, self.cfg.num_attention_heads), self.wo)


class RotaryAttention(SingleStreamAttention):
    """The rope baseline: queries and keys turned by positions ``offset + 0..n-1`` in the config's ``rope_style``."""

    hook_q, hook_k, hook_v, hook_z = head_hooks("queries (before rotation)", "keys (before rotation)", "values",
                                                "per-head output before wo")
    hook_rot_q = Hook("[batch, pos, head, d_head]", "queries rotated by positions offset+0..offset+n-1")
    hook_rot_k = Hook("[batch, pos, head, d_head]", "rotated keys")
    rotary = True


class TwoStreamAttention(EncoderAttention):
    """DSTG: AP and semantic streams with their own q, k (``d_qk`` each) and values; logits AP + semantic (+ RP)."""

    hook_q_ap, hook_k_ap, hook_v_ap, hook_z_ap = head_hooks("AP queries", "AP keys", "AP values",
                                                            "per-head AP output before wo_pos", d="d_qk",
                                                            d_v="pos_size/head")
    hook_q_sem, hook_k_sem, hook_v_sem, hook_z_sem = head_hooks("semantic queries", "semantic keys", "semantic values",
                                                                "per-head semantic output before wo_sem", d="d_qk",
                                                                d_v="hidden_size/head")
    hook_logits_ap = Hook("[batch, head, q, k]",
                          "AP logit q_ap.k_ap/sqrt(d_qk); 0 on [CLS]/[SEP] rows and columns when they "
                          "have thetas")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities (one softmax for both value streams)")

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg)
        h, dqk = cfg.num_attention_heads, cfg.d_qk
        self.qkv_pos = nn.Linear(cfg.pos_size, 2 * h * dqk + cfg.pos_size, bias=False)
        self.qkv_sem = nn.Linear(cfg.hidden_size, 2 * h * dqk + cfg.hidden_size, bias=False)
        self.wo_pos = nn.Linear(cfg.pos_size, cfg.pos_size, bias=False)
        self.wo_sem = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=False)

    def forward(self, x: Tensor, positions: Tensor | None, rp: Tensor | None) -> Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        h, dqk, p = cfg.num_attention_heads, cfg.d_qk, cfg.pos_size
        q_ap, k_ap, v_ap = self.qkv_pos(x[..., :p]).split([h * dqk, h * dqk, p], dim=-1)
        q_sem, k_sem, v_sem = self.qkv_sem(x[..., p:]).split([h * dqk, h * dqk, cfg.hidden_size], dim=-1)
        q_ap, k_ap = self.hook_q_ap(q_ap.view(b, n, h, dqk)), self.hook_k_ap(k_ap.view(b, n, h, dqk))
        q_sem, k_sem = self.hook_q_sem(q_sem.view(b, n, h, dqk)), self.hook_k_sem(k_sem.view(b, n, h, dqk))
        v_ap, v_sem = self.hook_v_ap(v_ap.view(b, n, h, -1)), self.hook_v_sem(v_sem.view(b, n, h, -1))
        parts = [(self.hook_logits_ap, q_ap, k_ap, cfg.untie_cls), (self.hook_logits_sem, q_sem, k_sem, False)]
        z_ap, z_sem = self.attend(parts, torch.cat([v_ap, v_sem], -1), rp).split([p // h, cfg.hidden_size // h], dim=-1)
        z_ap, z_sem = self.hook_z_ap(z_ap), self.hook_z_sem(z_sem)
        return torch.cat([self.wo_pos(z_ap.reshape(b, n, -1)), self.wo_sem(z_sem.reshape(b, n, -1))], dim=-1)


# ---- blocks --------------------------------------------------------------------------------------------


class EncoderBlock(BlockHooks):
    """Norm -> attention -> residual -> norm -> SwiGLU -> residual; ``residual="normalized"`` adds each output to
    the normalised input instead of the raw one."""

    hook_attn_in = Hook("[batch, pos, d_model]", "normalised attention input; with residual='normalized' the attention "
                        "output is added to this, not to the raw residual")
    hook_mlp_in = Hook("[batch, pos, d_model]", "normalised FFN input (the FFN base with residual='normalized')")
    hook_mlp_out = Hook("[batch, pos, d_model]", "SwiGLU output added to the residual")
    two_streams = False

    def __init__(self, cfg: EncoderConfig, attention: EncoderAttention):
        super().__init__()
        self.cfg = cfg
        self.normalized = cfg.residual == "normalized"
        self.attn = attention
        self.ffn = SwiGLUFFN(cfg.d_model, cfg.intermediate_size)
        self.mlp = MLPHooks({"gate_in": self.ffn.w12, "out": self.ffn.w3})
        # the subclasses add ln1 / ln2 once their norms exist

    def forward(self, x: Tensor, positions: Tensor | None, rp: Tensor | None) -> Tensor:
        x = self.hook_resid_pre(x)
        a = self.hook_attn_in(self.ln1(x))
        h = self.hook_resid_mid((a if self.normalized else x) + self.hook_attn_out(self.attn(a, positions, rp)))
        m = self.hook_mlp_in(self.ln2(h))
        out = (m if self.normalized else h) + self.hook_mlp_out(self.ffn(m, self.mlp))
        if self.two_streams:  # each stream hooked before they are joined again, so edits propagate
            p = self.cfg.pos_size
            out = torch.cat([self.hook_resid_ap(out[..., :p]), self.hook_resid_sem(out[..., p:])], dim=-1)
        return self.hook_resid_post(out)


class NormOutputHooks(NormHooks):
    """DSTG's ``ln1`` / ``ln2``: the AP and semantic parts are normalised apart, so there is no one scale to hook."""

    hook_scale = None
    hook_normalized = Hook("[batch, pos, d_model]", "[AP | semantic], each stream normalised with its own scale and "
                           "weight: what the next sublayer reads")


class SingleStreamBlock(EncoderBlock):
    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg, RotaryAttention(cfg) if cfg.variant == "rope" else SingleStreamAttention(cfg))
        self.attention_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.ln1, self.ln2 = NormHooks(self.attention_norm), NormHooks(self.ffn_norm)


class TwoStreamBlock(EncoderBlock):
    """DSTG: the AP and semantic parts are normalised apart; both streams leaving the block are hooked."""

    hook_resid_pre = Hook("[batch, pos, d_model]", "residual entering layer l: [AP | semantic]")
    hook_attn_in = Hook("[batch, pos, d_model]",
                        "normalised attention input (AP and semantic parts normalised apart); with "
                        "residual='normalized' the attention output is added to this, not to the raw residual")
    hook_attn_out = Hook("[batch, pos, d_model]",
                         "attention output added to the residual: [wo_pos z_ap | wo_sem z_sem]")
    hook_mlp_out = Hook("[batch, pos, d_model]", "SwiGLU output added to the residual (the only place the streams mix)")
    hook_resid_ap = Hook("[batch, pos, pos_size]",
                         "AP stream leaving layer l (hooked before the concatenation, so edits "
                         "propagate)")
    hook_resid_sem = Hook("[batch, pos, hidden_size]", "semantic stream leaving layer l")
    two_streams = True

    def __init__(self, cfg: EncoderConfig):
        super().__init__(cfg, TwoStreamAttention(cfg))
        self.pos_attention_norm = RMSNorm(cfg.pos_size, cfg.norm_eps, style="llama")
        self.sem_attention_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.pos_ffn_norm = RMSNorm(cfg.pos_size, cfg.norm_eps, style="llama")
        self.sem_ffn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        self.ln1, self.ln2 = NormOutputHooks(self.attention_norm), NormOutputHooks(self.ffn_norm)

    def attention_norm(self, x: Tensor) -> Tensor:
        p = self.cfg.pos_size
        return torch.cat([self.pos_attention_norm(x[..., :p]), self.sem_attention_norm(x[..., p:])], dim=-1)

    def ffn_norm(self, x: Tensor) -> Tensor:
        p = self.cfg.pos_size
        return torch.cat([self.pos_ffn_norm(x[..., :p]), self.sem_ffn_norm(x[..., p:])], dim=-1)


# ---- the model -----------------------------------------------------------------------------------------


class EncoderModel(PosLensModel):
    """Token embedding (and the AP table where the variant has one) -> blocks -> final norm(s) -> MLM head."""

    family = "encoder"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    hook_embed_sem = Either(
        Hook("[batch, pos, hidden_size]", "token embeddings (encoder.weight rows): the semantic stream's input",
             when=lambda model: model.disentangled),
        Hook("[batch, pos, hidden_size]", "token embeddings (encoder.weight rows), before any positions are added"))
    hook_embed = Hook("[batch, pos, hidden_size]", "token embeddings under TransformerLens' name: hook_embed_sem's "
                      "tensor, after it (one stream)", when=lambda model: not model.disentangled)
    hook_embed_ap = Hook("[batch, pos, pos_size]", "AP embeddings, rows offset+1..offset+n of positional_embedding",
                         when=lambda model: model.disentangled)
    hook_pos_embed = Hook("[batch, pos, hidden_size]",
                          "position embeddings (rows offset+1..offset+n) added to the tokens",
                          when=lambda model: model.added_positions)
    hook_final = Hook("[batch, pos, hidden_size]", "final-normed residual (the MLM head's input)",
                      when=lambda model: not model.disentangled)
    hook_final_ap = Hook("[batch, pos, pos_size]", "final-normed AP stream (read by no head unless mlm_input='full')",
                         when=lambda model: model.disentangled)
    hook_final_sem = Hook("[batch, pos, hidden_size]", "final-normed semantic stream (the MLM head's input)",
                          when=lambda model: model.disentangled)

    def __init__(self, cfg: EncoderConfig, init_weights: bool = True):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.d_model
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_length
        self.variant = cfg.variant
        self.disentangled = cfg.disentangled  # [AP | semantic] streams
        self.added_positions = cfg.variant == "ap"  # learned positions added to the token embeddings
        self.rotary = cfg.variant == "rope"
        self.head_reads_full = cfg.mlm_input == "full"
        # what the MLM head reads
        self.head_hooks = ("hook_final_ap", "hook_final_sem") if cfg.disentangled else ("hook_final",)
        self.tied = cfg.mlm_head and cfg.tie_word_embeddings
        self._tokenizer = None

        self.encoder = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.positional_embedding = None
        if self.disentangled or self.added_positions:
            self.positional_embedding = nn.Embedding(cfg.max_length + 1,
                                                     cfg.pos_size if self.disentangled else cfg.hidden_size)
        shared = not cfg.rp_per_layer
        self.relative_pos_bias = (RelativePositionBias(cfg.num_attention_heads, cfg.max_length, cfg.num_buckets,
                                                       cfg.max_distance)
                                  if cfg.rp_bias and shared else None)
        self.cls_sep_override = SpecialTokenThetas(cfg.num_attention_heads) if cfg.untie_cls and shared else None
        block = TwoStreamBlock if self.disentangled else SingleStreamBlock
        self.blocks = nn.ModuleList([block(cfg) for _ in range(cfg.num_hidden_layers)])
        if self.disentangled:
            self.pos_layer_norm = RMSNorm(cfg.pos_size, cfg.norm_eps, style="llama")
            self.sem_layer_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
        else:
            self.layer_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, style="llama")
            self.ln_final = NormHooks(self.layer_norm)
        self.decoder = None
        if cfg.mlm_head:
            width = cfg.d_model if self.head_reads_full else cfg.hidden_size
            self.decoder = TiedDecoder(cfg.vocab_size) if self.tied else nn.Linear(width, cfg.vocab_size, bias=True)

        has = {Capability.AP_STREAM: self.positional_embedding is not None, Capability.ROTARY: self.rotary,
               Capability.LOGIT_COMPONENTS: self.disentangled or cfg.has_rp_component}  # the logit has parts
        self.capabilities = frozenset({Capability.HIDDEN_STATES, Capability.ATTENTION}
                                      | {c for c, on in has.items() if on})
        if init_weights:
            self.reset_parameters()
        self.setup()

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
        return f"encoder family, {self.cfg.describe()}"

    def tl_config(self) -> dict:
        c = self.cfg
        kind = {"disentangled": "disentangled (AP | semantic streams)", "ap": "standard", "rp": "relative (T5 bias)",
                "rope": "rotary"}[c.variant]
        return dict(d_head=c.d_qk, d_mlp=c.intermediate_size, act_fn="silu", gated_mlp=True, normalization_type="RMS",
                    positional_embedding_type=kind, original_architecture=f"DSTG encoder ({c.variant})")

    @property
    def W_E(self) -> Tensor:
        return self.encoder.weight


    def tl_weight_plan(self):
        """Single-stream pre-norm blocks: ``ln1`` folds into the fused ``qkv``, ``ln2`` into the fused ``[gate | up]``,
        the final norm into the MLM head (untied first). DSTG (two streams normalised apart) and
        ``residual='normalized'`` (each norm's output is added to the residual) keep their norms."""
        from interp.weight_processing import Norm, WeightPlan, layer_plan

        refuse = {} if self.decoder is not None else {"center_unembed": "this encoder has no MLM head"}
        head = self._untied_decoder if self.decoder is not None else None
        if self.disentangled:
            why = "DSTG's AP and semantic streams are normalised apart, each with its own scale and weight"
            refuse.update(fold_ln=why, center_writing_weights=why, fold_value_biases=why)
            return WeightPlan([], None, [], unembed=head, refuse=refuse)
        if self.cfg.residual == "normalized":
            refuse["fold_ln"] = ("residual='normalized' adds each norm's output to the residual, so its weight cannot "
                                 "move into the weights reading it")
            return WeightPlan([layer_plan(b, None, None, self.n_heads) for b in self.blocks], None, [],
                              unembed=head, refuse=refuse)
        layers = [layer_plan(b, Norm(b.attention_norm), Norm(b.ffn_norm), self.n_heads) for b in self.blocks]
        tables = [t.weight for t in (self.encoder, self.positional_embedding) if t is not None]
        return WeightPlan(layers, Norm(self.layer_norm), tables, unembed=head, refuse=refuse)

    @torch.no_grad()
    def _untied_decoder(self) -> nn.Linear:
        """The MLM head as its own ``nn.Linear`` (a tied head copies the token embeddings, which stay as they were)."""
        if self.tied:
            head = nn.Linear(self.cfg.hidden_size, self.cfg.vocab_size, device=self.encoder.weight.device,
                             dtype=self.encoder.weight.dtype)
            head.weight.copy_(self.encoder.weight)
            head.bias.copy_(self.decoder.bias)
            self.decoder, self.tied, self.cfg.tie_word_embeddings = head, False, False
        return self.decoder

    def tl_absent(self) -> dict[str, str]:
        out = super().tl_absent()
        if self.disentangled:
            out["hook_embed"] = "DSTG: the token embeddings are one of two streams, hook_embed_sem (beside " \
                                "hook_embed_ap)"
            two = "DSTG: two streams, hooked apart: blocks.{l}.attn.hook_{q,k,v,z}_ap and _sem"
            out.update({f"blocks.{{l}}.attn.hook_{n}": two for n in "qkvz"})
            out["blocks.{l}.attn.hook_result"] = "DSTG: two value streams with two output projections (wo_pos, wo_sem)"
            out.update({f"blocks.{{l}}.ln{i}.hook_scale": "DSTG: the AP and semantic parts are normalised apart, "
                                                         "with two scales" for i in (1, 2)})
            out.update({f"ln_final.hook_{h}": "DSTG: two final norms, hook_final_ap and hook_final_sem"
                        for h in ("scale", "normalized")})
            out["hook_pos_embed"] = "DSTG: the AP rows are their own stream, hook_embed_ap (not added)"
        return out

    @property
    def W_U(self) -> Tensor:
        if self.decoder is None:
            return super().W_U
        return (self.encoder.weight if self.tied else self.decoder.weight).T

    @property
    def b_U(self) -> Tensor:
        if self.decoder is None:
            return super().b_U
        return self.decoder.bias

    def reset_parameters(self, std: float = 0.02):
        normal_init(self, std, {RelativePositionBias: "relative_attention_bias", SpecialTokenThetas: "thetas"})

    @property
    def reads_special_tokens(self) -> bool:
        """Whether attention treats the first and last token as [CLS] / [SEP] (thetas, zeroed AP logits): indices 0
        and n-1, or in a padded batch each row's first and last real token."""
        cfg = self.cfg
        return bool(self.disentangled or cfg.untie_cls or cfg.rp_skip_special or cfg.rp_at_special)

    # -- inputs --------------------------------------------------------------------------------------------
    def check_tokens(self, tokens) -> Tensor:
        """Base checks, and no padding: one length per batch and no pad id anywhere."""
        if isinstance(tokens, (list, tuple)) and tokens and all(isinstance(t, (Sequence, Tensor)) for t in tokens):
            lengths = [len(t) for t in tokens]
            if len(set(lengths)) > 1:
                raise InputError(f"sequences in one batch must have the same length, got lengths {lengths}: this "
                                 "encoder takes unpadded sequences only ([SEP] is read at the last index); group them "
                                 "by length")
            tokens = torch.stack([torch.as_tensor(t) for t in tokens])
        tokens = super().check_tokens(tokens)
        real = padding.current_padding()
        pads = ((tokens == self.cfg.pad_token_id) & (real.to(tokens.device) if real is not None else True)).nonzero()
        if len(pads):
            row, pos = (int(i) for i in pads[0])
            raise InputError(f"pad id {self.cfg.pad_token_id} at batch row {row}, position {pos}: this encoder takes "
                             "unpadded sequences only ([CLS]/[SEP] are found at indices 0 and n-1, and pads would take "
                             "real positions); run sequences of different lengths separately")
        return tokens

    # -- forward -------------------------------------------------------------------------------------------
    def forward(self, tokens, position_offset=0, predict_at: Tensor | None = None) -> Tensor:
        """MLM logits ``[batch, pos, vocab]`` (without an MLM head: the final-normed residual
        ``[batch, pos, d_model]``).

        ``position_offset`` (int or ``[batch]``) shifts absolute positions: real tokens take AP rows
        ``k+1..k+n`` (rotary positions ``k..k+n-1`` in the rope baseline). ``predict_at`` (bool
        ``[batch, pos]``) applies the MLM head only there and returns ``[n_selected, vocab]`` (training).
        """
        tokens = self.check_tokens(tokens)
        b, n = tokens.shape
        offset = self.cfg.position_offsets(position_offset, b, n).to(tokens.device)
        padded = padding.position_ids(n, tokens.device)  # a padded batch: each row's real tokens from 0
        positions = offset[:, None] + (torch.arange(n, device=tokens.device) if padded is None else padded)
        x = self.tl_embedded(lambda: self.embedded(tokens, positions))
        rp = None if self.cfg.rp_per_layer else relative_logits(self.cfg, n, self.relative_pos_bias,
                                                                self.cls_sep_override, x)
        rope_positions = positions.float() if self.rotary else None
        for block in self.tl_blocks():
            x = block(x, rope_positions, rp)
        x = self.tl_final(x)
        if self.disentangled:
            p = self.cfg.pos_size
            ap = self.hook_final_ap(self.pos_layer_norm(x[..., :p]))
            sem = self.hook_final_sem(self.sem_layer_norm(x[..., p:]))
            final = torch.cat([ap, sem], dim=-1)
            head_in = final if self.head_reads_full else sem
        else:
            final = head_in = self.hook_final(self.ln_final(x))
        if self.decoder is None:
            return final
        if predict_at is not None:
            head_in = head_in[predict_at.to(head_in.device)]
        return self.head_logits(head_in)

    def embedded(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """The residual entering block 0: DSTG's ``[AP | semantic]`` rows, or the token rows (plus the AP rows where
        they are added)."""
        if self.disentangled:
            ap = self.hook_embed_ap(self.positional_embedding(positions + 1))
            return torch.cat([ap, self.hook_embed_sem(self.encoder(tokens))], dim=-1)
        if self.added_positions:
            rows = self.hook_pos_embed(self.positional_embedding(positions + 1))
            return self.hook_embed(self.hook_embed_sem(self.encoder(tokens))) + rows
        return self.hook_embed(self.hook_embed_sem(self.encoder(tokens)))

    # -- the MLM head alone (``final_hidden`` + ``head_logits``: losses in chunks) -----------------------------------
    @property
    def has_output_head(self) -> bool:
        return self.decoder is not None

    def head_logits(self, hidden: Tensor) -> Tensor:
        if self.decoder is None:
            return super().head_logits(hidden)
        return F.linear(hidden, self.encoder.weight, self.decoder.bias) if self.tied else self.decoder(hidden)

    def head_reads(self, captured: dict[str, Tensor]) -> Tensor:
        if not self.disentangled:
            return captured["hook_final"]
        sem = captured["hook_final_sem"]
        return torch.cat([captured["hook_final_ap"], sem], -1) if self.head_reads_full else sem

    # -- capabilities ----------------------------------------------------------------------------------------
    def residual_subspaces(self) -> dict[str, slice]:
        """HIDDEN_STATES: the whole stream, and DSTG's AP and semantic parts."""
        if not self.disentangled:
            return {"full": slice(0, self.d_model)}
        p = self.cfg.pos_size
        return {"full": slice(0, self.d_model), "ap": slice(0, p), "semantic": slice(p, self.d_model)}

    def ap_embedding_matrix(self) -> Tensor:
        """AP_STREAM: ``[max_length, width]``, the rows real positions 1..max_length use (row 0, the padding row, left
        out)."""
        return self.positional_embedding.weight[1:].detach()

    def ap_hook(self) -> str:
        return "hook_embed_ap" if self.disentangled else "hook_pos_embed"

    def logit_components(self) -> tuple[str, ...]:
        """LOGIT_COMPONENTS: names c of ``blocks.{l}.attn.hook_logits_{c}``; their sum is the score."""
        return ("ap",) * self.disentangled + ("sem",) + ("rp",) * self.cfg.has_rp_component

    def rotation(self, layer: int) -> rope.RotarySpec | None:
        """ROTARY: every layer of the rope baseline turns its queries and keys in the config's ``rope_style``."""
        if not self.rotary:
            return None
        return rope.RotarySpec(rope.inverse_frequencies(self.cfg.d_qk, self.cfg.rope_theta), self.cfg.rope_style)
