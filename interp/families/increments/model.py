"""Byte-level decoder with learned position increments (seed 001), hooked.

Faithful to the upstream ``SelectivePETransformer``: pre-norm blocks, SwiGLU, tied embeddings,
interleaved-pair RoPE. ``pos_encoding`` picks how positions are made:

- ``rope``: integer positions 0..N-1 (the baseline);
- ``selective_rope``: positions are the inclusive cumulative sum of learned increments delta, from
  one shared DeltaMLP reading the embeddings (softplus) or, with ``per_layer_delta``, one DeltaMLP per
  layer reading that layer's input residual through its own RMSNorm (``10 * sigmoid``);
  ``per_head_delta`` gives each head its own increment;
- ``pope`` / ``selective_pope``: the same positions through PoPE instead of a rotation.

Optional ``decay`` adds ALiBi or a learned forget gate to the scores, as upstream does.

Module names inside a block mirror upstream (``attn.wq``, ``ffn.w_gate``, ...); the loader maps
``layers.{i}`` to ``blocks.{i}`` and ``delta_mlps.{i}`` to ``blocks.{i}.delta_mlp``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp import padding, rope
from interp.attention import attend
from interp.base import PosLensModel
from interp.capabilities import Capability
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Hook, MLPHooks, NormHooks, head_hooks
from interp.layers import normal_init
from interp.tl import AttentionWeights, result_heads
from interp.tokenizers import ByteTokenizer

MAX_DELTA = 10.0  # upper bound of the per-layer increments, hard-coded upstream
SOFTPLUS_INV_ONE = 0.5413  # upstream's fc2 bias init: softplus(0.5413) ~ 1


@dataclass
class IncrementConfig:
    """Upstream ``SelectivePEModelConfig`` field for field, defaults included."""

    dim: int
    n_heads: int
    n_layers: int
    intermediate_dim: int
    vocab_size: int = 50257
    max_seq_len: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    dropout: float = 0.0
    pos_encoding: str = "rope"
    norm_type: str = "rmsnorm"
    activation: str = "swiglu"
    init_std: float | None = 0.02
    delta_hidden_dim: int | None = None
    per_layer_delta: bool = False
    per_head_delta: bool = False
    decay: str = "none"

    CHOICES = {
        "pos_encoding": ("rope", "pope", "selective_rope", "selective_pope"),
        "norm_type": ("rmsnorm", "layernorm"),
        "activation": ("swiglu", "gelu"),
        "decay": ("none", "alibi", "learned"),
    }

    def __post_init__(self):
        for field, allowed in self.CHOICES.items():
            if getattr(self, field) not in allowed:
                raise ValueError(f"config {field}={getattr(self, field)!r} is not one of {allowed}")
        if self.dim % self.n_heads:
            raise ValueError(f"config dim ({self.dim}) must be divisible by n_heads ({self.n_heads})")
        if self.head_dim % 2:
            raise ValueError(f"config head_dim ({self.head_dim}) must be even for rotary positions")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def effective_delta_hidden_dim(self) -> int:
        return self.delta_hidden_dim if self.delta_hidden_dim is not None else self.dim // 4

    @property
    def selective(self) -> bool:
        return self.pos_encoding.startswith("selective")

    def to_dict(self) -> dict:
        """The dict upstream saves as ``model_config`` (computed fields included)."""
        d = dataclasses.asdict(self)
        d["head_dim"] = self.head_dim
        d["effective_delta_hidden_dim"] = self.effective_delta_hidden_dim
        return d


def make_norm(cfg: IncrementConfig, dim: int | None = None, eps: float | None = ...) -> nn.Module:
    dim = dim or cfg.dim
    eps = cfg.norm_eps if eps is ... else eps
    if cfg.norm_type == "layernorm":
        return nn.LayerNorm(dim, eps=eps)
    return nn.RMSNorm(dim, eps=eps)


class DeltaMLP(nn.Module):
    """Per-token increments: Linear -> GELU -> Linear -> softplus, or (bounded) RMSNorm first and 10*sigmoid."""

    def __init__(self, dim: int, hidden: int, n_out: int, bounded: bool):
        super().__init__()
        self.bounded = bounded
        self.norm = nn.RMSNorm(dim) if bounded else None  # default eps: machine epsilon, as upstream
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, n_out)
        self.reset_bias()

    def reset_bias(self):
        """Start at delta = 1 everywhere: the model begins as integer-position RoPE."""
        nn.init.constant_(self.fc2.bias, math.log(1.0 / (MAX_DELTA - 1.0)) if self.bounded else SOFTPLUS_INV_ONE)

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, pos, dim]`` -> ``[batch, pos]`` (one output) or ``[batch, head, pos]``."""
        if self.norm is not None:
            x = self.norm(x)
        raw = self.fc2(F.gelu(self.fc1(x))).float()  # softplus / sigmoid in fp32, as upstream's CUDA autocast does
        delta = MAX_DELTA * torch.sigmoid(raw) if self.bounded else F.softplus(raw)
        return delta.squeeze(-1) if delta.shape[-1] == 1 else delta.transpose(1, 2)


def accumulated(steps: Tensor) -> Tensor:
    """The running sum of per-token ``steps`` (``[batch, pos]`` or ``[batch, head, pos]``) in fp32 (bf16 sums lose
    integer steps); a padding token's step counts for nothing (``interp.padding``)."""
    steps = steps.float()
    real = padding.real_tokens(steps.shape[-1], steps.device)
    if real is not None:
        steps = steps * (real if steps.dim() == 2 else real[:, None])
    return steps.cumsum(-1)


class ForgetMLP(nn.Module):
    """Learned per-head forget gate; its cumulative log-alpha is an additive decay bias."""

    def __init__(self, dim: int, hidden: int, n_heads: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, n_heads)
        nn.init.constant_(self.fc2.bias, 6.9)

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, head, q, k]`` bias ``A_q - A_k`` with ``A_t = sum_{s<=t} log alpha_s``."""
        cum = accumulated(F.logsigmoid(self.fc2(F.gelu(self.fc1(x)))).transpose(1, 2))
        return cum.unsqueeze(-1) - cum.unsqueeze(-2)


def alibi_bias(n_heads: int, n: int, device) -> Tensor:
    """``[batch or 1, head, q, k]``: minus each head's slope times the distance back to the key."""
    slopes = torch.tensor([(2.0 ** (-8.0 / n_heads)) ** (h + 1) for h in range(n_heads)], device=device)
    pos = padding.positions(n, device=device)  # [batch or 1, n]
    dist = (pos[:, None, :, None] - pos[:, None, None, :]).clamp(min=0).float()
    return -slopes[None, :, None, None] * dist


class Attention(AttentionHooks, AttentionWeights):
    hook_q, hook_k, hook_v, hook_z = head_hooks("queries before rotation", "keys before rotation",
                                                "values", "per-head attention output before wo")
    hook_positions = Hook("[batch, head, pos]", "positions each head rotates by (cumsum of delta, or 0..N-1)")
    hook_rot_q = Hook("[batch, pos, head, d_head]", "queries after rotation")
    hook_rot_k = Hook("[batch, pos, head, d_head]", "keys after rotation")
    hook_attn_scores = Hook("[batch, head, q, k]", "scaled, masked logits (-inf above the diagonal)")
    hook_result = RESULT

    def __init__(self, cfg: IncrementConfig):
        super().__init__()
        self.cfg = cfg
        self.tl_n_heads = cfg.n_heads
        d = cfg.n_heads * cfg.head_dim
        self.wq = nn.Linear(cfg.dim, d, bias=False)
        self.wk = nn.Linear(cfg.dim, d, bias=False)
        self.wv = nn.Linear(cfg.dim, d, bias=False)
        self.wo = nn.Linear(d, cfg.dim, bias=False)
        # PoPE places each pair at its position (magnitude, phase); RoPE rotates it
        self.polar = cfg.pos_encoding.endswith("pope")

    def forward(self, x: Tensor, positions: Tensor, bias: Tensor | None) -> Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        q = self.hook_q(self.wq(x).view(b, n, cfg.n_heads, cfg.head_dim))
        k = self.hook_k(self.wk(x).view(b, n, cfg.n_heads, cfg.head_dim))
        v = self.hook_v(self.wv(x).view(b, n, cfg.n_heads, cfg.head_dim))
        if positions.dim() == 2:
            positions = positions.unsqueeze(1).expand(b, cfg.n_heads, n)
        positions = self.hook_positions(positions)
        place = rope.polar_interleaved if self.polar else rope.rotate_interleaved
        q = self.hook_rot_q(place(q, positions, cfg.rope_theta))
        k = self.hook_rot_k(place(k, positions, cfg.rope_theta))
        z = attend(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, bias=bias,
            hook_scores=self.hook_attn_scores, hook_pattern=self.hook_pattern,
        )
        return result_heads(self, self.hook_z(z.transpose(1, 2)), self.wo)

    def tl_projections(self):
        return self.wq, self.wk, self.wv, self.wo


class FeedForward(nn.Module):
    def __init__(self, cfg: IncrementConfig):
        super().__init__()
        self.gated = cfg.activation == "swiglu"
        if self.gated:
            self.w_gate = nn.Linear(cfg.dim, cfg.intermediate_dim, bias=False)
        self.w_up = nn.Linear(cfg.dim, cfg.intermediate_dim, bias=False)
        self.w_down = nn.Linear(cfg.intermediate_dim, cfg.dim, bias=False)

    def forward(self, x: Tensor, hooks: MLPHooks) -> Tensor:
        """``hooks``: the block's ``mlp`` (TransformerLens' names for this ``ffn``'s hidden layer)."""
        if self.gated:
            return self.w_down(hooks.hook_post(F.silu(hooks.hook_pre(self.w_gate(x))) * self.w_up(x)))
        return self.w_down(hooks.hook_post(F.gelu(hooks.hook_pre(self.w_up(x)))))


class Block(BlockHooks):
    hook_delta = Hook("[batch, pos] or [batch, head, pos]", "layer l's increments (per-layer variant)",
                      when=lambda block: block.delta_mlp is not None)
    hook_mlp_out = Hook("[batch, pos, d_model]", "SwiGLU output added to the residual")

    def __init__(self, cfg: IncrementConfig):
        super().__init__()
        self.attn_norm = make_norm(cfg)
        self.attn = Attention(cfg)
        self.ffn_norm = make_norm(cfg)
        self.ffn = FeedForward(cfg)
        self.ln1, self.ln2 = NormHooks(self.attn_norm), NormHooks(self.ffn_norm)
        self.mlp = MLPHooks({"gate": getattr(self.ffn, "w_gate", None), "in": self.ffn.w_up, "out": self.ffn.w_down})
        self.delta_mlp = None
        if cfg.selective and cfg.per_layer_delta:
            n_out = cfg.n_heads if cfg.per_head_delta else 1
            self.delta_mlp = DeltaMLP(cfg.dim, cfg.effective_delta_hidden_dim, n_out, bounded=True)

    def forward(self, x: Tensor, positions: Tensor | None, bias: Tensor | None) -> Tensor:
        x = self.hook_resid_pre(x)
        if self.delta_mlp is not None:  # this layer's own increments
            positions = accumulated(self.hook_delta(self.delta_mlp(x)))
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln1(x), positions, bias)))
        return self.hook_resid_post(x + self.hook_mlp_out(self.ffn(self.ln2(x), self.mlp)))


class IncrementTransformer(PosLensModel):
    family = "increments"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    hook_embed = Hook("[batch, pos, d_model]", "token embeddings (the input of the shared DeltaMLP)")
    hook_delta = Hook("[batch, pos] or [batch, head, pos]",
                      "shared increments delta_t (gap from t-1 to t; shared variant)",
                      when=lambda model: model.delta_mlp is not None)
    hook_decay_bias = Hook("[batch, head, q, k]", "ALiBi or learned-decay score bias (decay models only)",
                           when=lambda model: model.cfg.decay != "none")
    hook_final = Hook("[batch, pos, d_model]", "final-normed residual (logits = this @ tok_emb.T)")

    def __init__(self, cfg: IncrementConfig, init_weights: bool = True):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.n_layers, cfg.n_heads, cfg.dim
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_seq_len
        self.tokenizer = ByteTokenizer() if cfg.vocab_size == ByteTokenizer.vocab_size else None
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.delta_mlp = None
        if cfg.selective and not cfg.per_layer_delta:
            n_out = cfg.n_heads if cfg.per_head_delta else 1
            self.delta_mlp = DeltaMLP(cfg.dim, cfg.effective_delta_hidden_dim, n_out, bounded=False)
        self.forget_mlp = ForgetMLP(cfg.dim, cfg.effective_delta_hidden_dim,
                                    cfg.n_heads) if cfg.decay == "learned" else None
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.final_norm = make_norm(cfg)
        self.ln_final = NormHooks(self.final_norm)
        self.lm_head = None  # the logits read tok_emb until weight processing unties them (process_weights_)
        self.integer_positions = not cfg.selective  # else increments: shared (delta_mlp) or each layer's own
        self.alibi = cfg.decay == "alibi"
        caps = {Capability.POSITIONS, Capability.ATTENTION, Capability.HIDDEN_STATES, Capability.CAUSAL_LM}
        if cfg.selective:
            caps.add(Capability.INCREMENTS)
        if not cfg.pos_encoding.endswith("pope"):
            caps.add(Capability.ROTARY)
        self.capabilities = frozenset(caps)
        if init_weights and cfg.init_std is not None:
            self.reset_parameters(cfg.init_std)
        self.setup()

    def describe(self) -> str:
        if not self.cfg.selective:
            return f"increments family, pos_encoding={self.cfg.pos_encoding}"
        kind = "per-layer" if self.cfg.per_layer_delta else "shared"
        return f"increments family, {kind}{' per-head' if self.cfg.per_head_delta else ''} {self.cfg.pos_encoding}"

    def reset_parameters(self, std: float):
        normal_init(self, std)
        for m in self.modules():
            if isinstance(m, DeltaMLP):
                m.reset_bias()
        if self.forget_mlp is not None:
            nn.init.constant_(self.forget_mlp.fc2.bias, 6.9)

    def forward(self, tokens) -> Tensor:
        """Next-token logits ``[batch, pos, vocab]`` for token ids ``[batch, pos]``."""
        tokens = self.check_tokens(tokens)
        rows = self.tl_token_rows(tokens, self.tok_emb)
        x = self.tl_embedded(lambda: self.hook_embed(rows))
        source = rows if self.tl_started() else x  # from a residual: the increments read the tokens' own rows
        b, n = x.shape[:2]
        positions = bias = None
        if self.delta_mlp is not None:
            positions = accumulated(self.hook_delta(self.delta_mlp(source)))
        elif self.integer_positions:
            positions = padding.positions(n, device=x.device).float().expand(b, n)
        if self.forget_mlp is not None:
            bias = self.hook_decay_bias(self.forget_mlp(source))
        elif self.alibi:
            bias = self.hook_decay_bias(alibi_bias(self.cfg.n_heads, n, x.device).expand(b, -1, -1, -1))
        for block in self.tl_blocks():
            x = block(x, positions, bias)
        return self.head_logits(self.hook_final(self.ln_final(self.tl_final(x))))

    def head_logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden) if self.lm_head is not None else F.linear(hidden, self.tok_emb.weight)

    def tl_config(self) -> dict:
        c = self.cfg
        rotary = not c.pos_encoding.endswith("pope")
        return dict(d_head=c.head_dim, d_mlp=c.intermediate_dim, act_fn="silu" if c.activation == "swiglu" else "gelu",
                    normalization_type="RMS" if c.norm_type == "rmsnorm" else "LN", gated_mlp=c.activation == "swiglu",
                    positional_embedding_type=("rotary" if rotary else "pope") + (" (learned increments)"
                                                                                 if c.selective else ""),
                    original_architecture="SelectivePETransformer")

    @property
    def W_U(self) -> Tensor:
        return (self.lm_head.weight if self.lm_head is not None else self.tok_emb.weight).T

    @property
    def W_E(self) -> Tensor:
        return self.tok_emb.weight

    @property
    def tl_blocks_read_tokens(self) -> bool:
        """The shared increments and the learned decay are read off the embeddings, not the residual."""
        return self.delta_mlp is not None or self.forget_mlp is not None

    def tl_weight_plan(self):
        """Pre-norm blocks (RMSNorm or LayerNorm); the increment and forget MLPs read the raw residual, so centring
        what writes into it is refused where they exist."""
        from interp.weight_processing import Norm, WeightPlan, layer_plan, untie_head

        centred = self.cfg.norm_type == "layernorm"
        layers = [layer_plan(b, Norm(b.attn_norm, centred), Norm(b.ffn_norm, centred), self.n_heads)
                  for b in self.blocks]
        raw = [name for name, m in (("delta_mlp", self.delta_mlp), ("forget_mlp", self.forget_mlp),
                                    ("blocks.{l}.delta_mlp", self.blocks[0].delta_mlp)) if m is not None]
        refuse = {"center_writing_weights": f"{', '.join(raw)} read the raw residual, which centring the weights "
                                            "writing into it would change"} if raw else {}
        return WeightPlan(layers, Norm(self.final_norm, centred), [self.tok_emb.weight],
                          unembed=lambda: untie_head(self, self.tok_emb), refuse=refuse)

    # -- capability: INCREMENTS ---------------------------------------------------------------
    def increment_sources(self) -> list[tuple[str, str]]:
        if not self.cfg.selective:
            return []
        if self.cfg.per_layer_delta:
            return [(f"L{i}", f"blocks.{i}.hook_delta") for i in range(self.n_layers)]
        return [("shared", "hook_delta")]

    @torch.no_grad()
    def context_free_increments(self) -> dict[str, Tensor]:
        """Increment of every vocabulary item from its embedding alone: ``{label: [vocab] or [vocab, head]}``."""
        if not self.cfg.selective:
            return {}
        mlp, label = (self.blocks[0].delta_mlp, "L0") if self.cfg.per_layer_delta else (self.delta_mlp, "shared")
        out = mlp(self.tok_emb.weight[None])[0]
        return {label: out.T if self.cfg.per_head_delta else out}

    # -- capability: ROTARY -------------------------------------------------------------------
    def rotation(self, layer: int) -> rope.RotarySpec | None:
        """Pairs (2i, 2i+1) turn by each head's position (PoPE places them instead: no rotation to describe)."""
        if self.cfg.pos_encoding.endswith("pope"):
            return None
        return rope.RotarySpec(rope.inverse_frequencies(self.cfg.head_dim, self.cfg.rope_theta), "interleaved")

    # -- capability: HIDDEN_STATES ------------------------------------------------------------
    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}
