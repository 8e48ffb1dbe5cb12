"""OLMo-2-style decoder with context re-positioning (RePo, seed 000), hooked.

The backbone is OLMo-2: post-norm blocks (``h = x + norm(attn(x)); out = h + norm(mlp(h))``), QK-norm
over the full q / k width before the head split, half-split (``rotate_half``) RoPE, SwiGLU, untied head.

``position_mode`` says what positions layers from ``start_layer`` on use (layers below always use integer
RoPE, 0..N-1):

- ``rope``: integer positions everywhere;
- ``nope``: no rotation at all;
- ``repo``: each token gets one real position per head,
  ``z = final_map(silu(gate_map(x)) * content_map(x))`` from the raw residual ``x`` entering the layer,
  used in R(z) on q and k (no bias, no clamp, no cumsum).

Module names follow the Hugging Face layout with ``model.layers.{i}`` -> ``blocks.{i}`` and
``self_attn`` -> ``attn``, so every upstream key maps one to one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp import padding, rope
from interp.attention import attend, current_kv_cache
from interp.base import PosLensModel
from interp.capabilities import Capability
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Hook, NormHooks, head_hooks
from interp.layers import RMSNorm, SwiGLU, normal_init, repeat_kv
from interp.tl import AttentionWeights, result_heads
from interp.tokenizers import ByteTokenizer

MODES = ("rope", "nope", "repo")


@dataclass
class RepoConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    vocab_size: int
    num_key_value_heads: int | None = None
    max_position_embeddings: int = 4096
    rope_theta: float = 500000.0
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    position_mode: str = "rope"
    start_layer: int = 0
    layer_ids: tuple[int, ...] | None = None  # layers (>= start_layer) that use the mode; None: all of them
    repo_dim: int | None = None  # width of p; upstream: hidden_size // 8
    tokenizer: str | None = None  # "bytes" for the bundled byte-level models
    rope_scaling: dict | None = None  # ``interp.rope`` frequency scaling (linear, llama3); None: plain RoPE
    training_only: dict | None = None  # upstream PEConfig fields that act only in training (recorded, never used here)

    def __post_init__(self):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.position_mode not in MODES:
            raise ValueError(f"position_mode {self.position_mode!r} is not one of {MODES}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.position_mode == "repo" and self.num_key_value_heads != self.num_attention_heads:
            raise ValueError("RePo assigns one position per head to q and k: it needs num_key_value_heads == "
                             "num_attention_heads")
        if self.layer_ids is not None:
            self.layer_ids = tuple(int(i) for i in self.layer_ids)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def repo_width(self) -> int:
        return self.repo_dim if self.repo_dim is not None else self.hidden_size // 8

    def mode_of(self, layer: int) -> str:
        """Position mode of one layer."""
        if self.position_mode == "rope" or layer < self.start_layer:
            return "rope"
        if self.layer_ids is not None and layer not in self.layer_ids:
            return "rope"
        return self.position_mode

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["layer_ids"] = list(self.layer_ids) if self.layer_ids is not None else None
        return d


class RepoAttention(AttentionHooks, AttentionWeights):
    hook_repo_p = Hook("[batch, pos, repo_dim]",
                       "RePo position representation silu(gate_map x) * content_map x (RePo layers)",
                       when=lambda attn: attn.learned)
    hook_q, hook_k, hook_v, hook_z = head_hooks("queries after QK-norm, before rotation",
                                                "keys after QK-norm, before rotation",
                                                "values", "per-head attention output before o_proj", kv_head=True)
    hook_positions = Hook("[batch, head, pos]", "position each head rotates by: z (RePo), 0..N-1 (RoPE), 0 (NoPE, no "
                                                "rotation)")
    hook_rot_q = Hook("[batch, pos, head, d_head]", "queries after rotation")
    hook_rot_k = Hook("[batch, pos, kv_head, d_head]", "keys after rotation")
    hook_attn_scores = Hook("[batch, head, q, k]", "scaled, causally masked logits")
    hook_result = RESULT

    def __init__(self, cfg: RepoConfig, layer: int):
        super().__init__()
        self.cfg, self.mode = cfg, cfg.mode_of(layer)
        self.tl_n_heads = cfg.num_attention_heads
        # positions z from the hidden state (RePo); else integers (RoPE) or none (NoPE)
        self.learned = self.mode == "repo"
        self.rotates = self.mode != "nope"
        h, kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, h * d, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, kv * d, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, kv * d, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * d, cfg.hidden_size, bias=cfg.attention_bias)
        self.q_norm = RMSNorm(h * d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(kv * d, cfg.rms_norm_eps)
        if self.learned:
            self.gate_map = nn.Linear(cfg.hidden_size, cfg.repo_width, bias=False)
            self.content_map = nn.Linear(cfg.hidden_size, cfg.repo_width, bias=False)
            self.final_map = nn.Linear(cfg.repo_width, h, bias=False)

    def positions(self, x: Tensor, start: int = 0) -> Tensor:
        """``[batch, head, pos]`` positions of the tokens in ``x``, the first of which is token ``start``."""
        b, n, _ = x.shape
        if self.learned:
            p = self.hook_repo_p(F.silu(self.gate_map(x)) * self.content_map(x))
            return self.final_map(p).transpose(1, 2).float()
        if not self.rotates:
            return torch.zeros(b, self.cfg.num_attention_heads, n, device=x.device)
        pos = padding.positions(n, start, x.device)[:, None]  # a padded batch: each row's real tokens from 0
        return pos.float().expand(b, self.cfg.num_attention_heads, n)

    def forward(self, x: Tensor) -> Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        q = self.hook_q(self.q_norm(self.q_proj(x)).view(b, n, cfg.num_attention_heads, cfg.head_dim))
        k = self.hook_k(self.k_norm(self.k_proj(x)).view(b, n, cfg.num_key_value_heads, cfg.head_dim))
        v = self.hook_v(self.v_proj(x).view(b, n, cfg.num_key_value_heads, cfg.head_dim))
        cache = current_kv_cache()
        positions = self.hook_positions(self.positions(x, cache.past(self) if cache is not None else 0))
        if self.rotates:
            k_pos = (positions if cfg.num_key_value_heads == cfg.num_attention_heads
                     else positions[:, : cfg.num_key_value_heads])
            q = rope.rotate_half_split(q, positions, cfg.rope_theta, cfg.rope_scaling)
            k = rope.rotate_half_split(k, k_pos, cfg.rope_theta, cfg.rope_scaling)
        q, k = self.hook_rot_q(q), self.hook_rot_k(k)
        if cache is not None:
            k, v = cache.append(self, k, v)
        rep = cfg.num_attention_heads // cfg.num_key_value_heads
        z = attend(q.transpose(1, 2), repeat_kv(k.transpose(1, 2), rep), repeat_kv(v.transpose(1, 2), rep), causal=True,
                   hook_scores=self.hook_attn_scores, hook_pattern=self.hook_pattern,
                   bias=cache.visible(self, n, k.shape[1]) if cache is not None else None)
        return result_heads(self, self.hook_z(z.transpose(1, 2)), self.o_proj)

    def tl_projections(self):
        return self.q_proj, self.k_proj, self.v_proj, self.o_proj


class RepoBlock(BlockHooks):
    hook_resid_pre = Hook("[batch, pos, d_model]", "residual entering layer l (RePo reads it raw)")
    hook_attn_out = Hook("[batch, pos, d_model]", "post_attention_layernorm(o_proj z), added to the residual")
    hook_mlp_out = Hook("[batch, pos, d_model]", "post_feedforward_layernorm(mlp h), added to the residual")

    def __init__(self, cfg: RepoConfig, layer: int):
        super().__init__()
        self.attn = RepoAttention(cfg, layer)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        # post-norm (OLMo-2): the norms act on the sublayers' outputs, TransformerLens' ln1_post / ln2_post
        self.ln1_post = NormHooks(self.post_attention_layernorm)
        self.ln2_post = NormHooks(self.post_feedforward_layernorm)

    def forward(self, x: Tensor) -> Tensor:
        x = self.hook_resid_pre(x)
        h = self.hook_resid_mid(x + self.hook_attn_out(self.ln1_post(self.attn(x))))
        return self.hook_resid_post(h + self.hook_mlp_out(self.ln2_post(self.mlp(h))))


class RepoTransformer(PosLensModel):
    family = "repo"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    supports_kv_cache = True
    hook_embed = Hook("[batch, pos, d_model]", "token embeddings")
    hook_final = Hook("[batch, pos, d_model]", "final-normed residual")

    def __init__(self, cfg: RepoConfig, init_weights: bool = True):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_position_embeddings
        self.tokenizer = ByteTokenizer() if cfg.tokenizer == "bytes" else None
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = nn.ModuleList([RepoBlock(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.ln_final = NormHooks(self.norm)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        caps = {Capability.POSITIONS, Capability.ATTENTION, Capability.HIDDEN_STATES, Capability.CAUSAL_LM}
        if any(cfg.mode_of(i) != "nope" for i in range(cfg.num_hidden_layers)):
            caps.add(Capability.ROTARY)
        self.capabilities = frozenset(caps)
        if init_weights:
            self.reset_parameters()
        self.setup()

    def describe(self) -> str:
        c = self.cfg
        if c.position_mode == "rope":
            return "repo family, integer RoPE in every layer"
        return (f"repo family, {c.position_mode} from layer {c.start_layer}"
                + (f" (layers {list(c.layer_ids)})" if c.layer_ids else ""))

    def reset_parameters(self, std: float = 0.02):
        normal_init(self, std)

    def forward(self, tokens) -> Tensor:
        """Next-token logits ``[batch, pos, vocab]``."""
        tokens = self.check_tokens(tokens)
        x = self.tl_embedded(lambda: self.hook_embed(self.tl_token_rows(tokens, self.embed_tokens)))
        for block in self.tl_blocks():
            x = block(x)
        return self.head_logits(self.hook_final(self.ln_final(self.tl_final(x))))

    def head_logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden) if self.lm_head is not None else F.linear(hidden, self.embed_tokens.weight)

    def tl_config(self) -> dict:
        c = self.cfg
        return dict(d_head=c.head_dim, d_mlp=c.intermediate_size, n_key_value_heads=c.num_key_value_heads,
                    act_fn="silu", normalization_type="RMS", positional_embedding_type="rotary", gated_mlp=True,
                    original_architecture="Olmo2ForCausalLM")

    @property
    def W_U(self) -> Tensor:
        return (self.lm_head.weight if self.lm_head is not None else self.embed_tokens.weight).T

    @property
    def W_E(self) -> Tensor:
        return self.embed_tokens.weight

    def tl_weight_plan(self):
        """Post-norm (OLMo-2): the norms act on the sublayers' outputs, so only the unembedding and ``b_V`` are
        processed."""
        from interp.weight_processing import WeightPlan, layer_plan, untie_head

        layers = [layer_plan(b, None, None, self.n_heads) for b in self.blocks]
        post = ("the repo family is post-norm (OLMo-2): its norms act on the attention and MLP outputs, not on what "
                "a weight reads, so there is no norm to fold (TransformerLens' logit lens applies the final norm with "
                "cache.apply_ln_to_stack and then W_U, which holds here unprocessed)")
        return WeightPlan(layers, None, [self.embed_tokens.weight], unembed=lambda: untie_head(self, self.embed_tokens),
                          refuse={"fold_ln": post})

    def tl_absent(self) -> dict[str, str]:
        post = "post-norm (OLMo-2): the norms act on the sublayers' outputs, hooked as blocks.{l}.ln1_post / ln2_post"
        return {**super().tl_absent(), **{f"blocks.{{l}}.ln{i}.hook_{h}": post for i in (1, 2)
                                          for h in ("scale", "normalized")}}

    def rotation(self, layer: int) -> rope.RotarySpec | None:
        """RoPE and RePo layers turn dim i with i + d/2 (by integer positions or by z); NoPE layers do not rotate."""
        if self.cfg.mode_of(layer) == "nope":
            return None
        return rope.RotarySpec(rope.inverse_frequencies(self.cfg.head_dim, self.cfg.rope_theta,
                                                        scaling=self.cfg.rope_scaling),
                               "half_split")

    def position_modes(self) -> list[str]:
        return [self.cfg.mode_of(i) for i in range(self.n_layers)]

    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}
