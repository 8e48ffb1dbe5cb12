"""LLaMA-style decoder (standard integer RoPE), hooked: real pretrained models as peers of the learned-position
families. Weights come from any Hugging Face LLaMA state dict; ``from_hf`` takes a loaded
``transformers`` model (SmolLM2-135M is read from its GGUF file by ``transformers``).

Pre-norm blocks (``x + attn(norm x)``, ``h + mlp(norm h)``), grouped-query attention, half-split RoPE,
SwiGLU, optionally tied embeddings. Every layer rotates by the integer positions 0..N-1, which
``blocks.{l}.attn.hook_positions`` reports like every other family does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from interp import padding, rope
from interp.attention import attend, current_kv_cache, hooked
from interp.base import PosLensModel
from interp.capabilities import Capability
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Hook, NormHooks, head_hooks
from interp.layers import RMSNorm, SwiGLU
from interp.tl import AttentionWeights, result_heads


@dataclass
class LlamaConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    head_dim: int | None = None
    rope_scaling: dict | None = None  # ``interp.rope`` frequency scaling (linear, llama3), None: plain RoPE
    attention_bias: bool = False  # biases on q, k, v and o projections
    mlp_bias: bool = False

    def __post_init__(self):
        self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple of num_key_value_heads "
                             f"{self.num_key_value_heads}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class LlamaAttention(AttentionHooks, AttentionWeights):
    hook_q, hook_k, hook_v, hook_z = head_hooks("queries before rotation", "keys before rotation (grouped-query heads)",
                                                "values", "per-head attention output before o_proj", kv_head=True)
    hook_positions = Hook("[batch, head, pos]", "integer positions 0..N-1 (padded rows: real tokens from 0)")
    hook_rot_q = Hook("[batch, pos, head, d_head]", "queries after rotation")
    hook_rot_k = Hook("[batch, pos, kv_head, d_head]", "keys after rotation")
    hook_attn_scores = Hook("[batch, head, q, k]", "scaled, causally masked logits")
    hook_result = RESULT

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tl_n_heads = cfg.num_attention_heads
        h, kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, h * d, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, kv * d, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, kv * d, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * d, cfg.hidden_size, bias=cfg.attention_bias)

    def forward(self, x: Tensor) -> Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        q = self.hook_q(self.q_proj(x).view(b, n, cfg.num_attention_heads, cfg.head_dim))
        k = self.hook_k(self.k_proj(x).view(b, n, cfg.num_key_value_heads, cfg.head_dim))
        v = self.hook_v(self.v_proj(x).view(b, n, cfg.num_key_value_heads, cfg.head_dim))
        cache = current_kv_cache()
        start = cache.past(self) if cache is not None else 0
        rep = cfg.num_attention_heads // cfg.num_key_value_heads
        if hooked(self.hook_positions) or padding.current_padding() is not None:  # padded: real tokens from 0
            pos = padding.positions(n, start, x.device)[:, None].float()
            pos = self.hook_positions(pos.expand(b, cfg.num_attention_heads, n))
            q = rope.rotate_half_split(q, pos, cfg.rope_theta, cfg.rope_scaling)
            k = rope.rotate_half_split(k, pos[:, ::rep], cfg.rope_theta, cfg.rope_scaling)
        else:  # the integer positions, unedited: cos / sin from the cached table (the same numbers)
            q = rope.rotate_half_split_range(q, start, cfg.rope_theta, cfg.rope_scaling)
            k = rope.rotate_half_split_range(k, start, cfg.rope_theta, cfg.rope_scaling)
        q, k = self.hook_rot_q(q), self.hook_rot_k(k)
        if cache is not None:
            k, v = cache.append(self, k, v)
        z = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                   hook_scores=self.hook_attn_scores,
                   hook_pattern=self.hook_pattern,
                   bias=cache.visible(self, n, k.shape[1]) if cache is not None else None)
        return result_heads(self, self.hook_z(z.transpose(1, 2)), self.o_proj)

    def tl_projections(self):
        return self.q_proj, self.k_proj, self.v_proj, self.o_proj


class LlamaBlock(BlockHooks):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, style="llama")
        self.attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, style="llama")
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.ln1, self.ln2 = NormHooks(self.input_layernorm), NormHooks(self.post_attention_layernorm)

    def forward(self, x: Tensor) -> Tensor:
        x = self.hook_resid_pre(x)
        h = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln1(x))))
        return self.hook_resid_post(h + self.hook_mlp_out(self.mlp(self.ln2(h))))


class LlamaTransformer(PosLensModel):
    family = "llama"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    supports_kv_cache = True
    hook_embed = Hook("[batch, pos, d_model]", "token embeddings")
    hook_final = Hook("[batch, pos, d_model]", "final-normed residual")

    def __init__(self, cfg: LlamaConfig, tokenizer=None):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_position_embeddings
        self.tokenizer = tokenizer
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = nn.ModuleList([LlamaBlock(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, style="llama")
        self.ln_final = NormHooks(self.norm)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.capabilities = frozenset({Capability.POSITIONS, Capability.ROTARY, Capability.ATTENTION,
                                       Capability.HIDDEN_STATES, Capability.CAUSAL_LM})
        self.setup()

    def describe(self) -> str:
        scaled = (f", {self.cfg.rope_scaling['rope_type']} scaling x{self.cfg.rope_scaling['factor']:g}"
                  if self.cfg.rope_scaling else "")
        return f"llama family, integer RoPE (theta {self.cfg.rope_theta:g}{scaled}), {self.n_layers} layers"

    def forward(self, tokens) -> Tensor:
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
                    original_architecture="LlamaForCausalLM")

    @property
    def W_U(self) -> Tensor:
        return (self.lm_head.weight if self.lm_head is not None else self.embed_tokens.weight).T

    @property
    def W_E(self) -> Tensor:
        return self.embed_tokens.weight

    def tl_weight_plan(self):
        """Pre-norm blocks: each RMSNorm's weight folds into the q, k, v or gate, up projections reading it."""
        from interp.weight_processing import Norm, WeightPlan, layer_plan, untie_head

        layers = [layer_plan(b, Norm(b.input_layernorm), Norm(b.post_attention_layernorm), self.n_heads)
                  for b in self.blocks]
        return WeightPlan(layers, Norm(self.norm), [self.embed_tokens.weight],
                          unembed=lambda: untie_head(self, self.embed_tokens))

    def rotation(self, layer: int) -> rope.RotarySpec:
        """Every layer turns the whole head by the integer positions, dim i paired with i + d/2."""
        return rope.RotarySpec(rope.inverse_frequencies(self.cfg.head_dim, self.cfg.rope_theta,
                                                        scaling=self.cfg.rope_scaling),
                               "half_split", rope_type=(self.cfg.rope_scaling or {}).get("rope_type", "default"))

    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}

    @classmethod
    def from_hf(cls, hf_model, tokenizer=None, *, allow_nonfinite: bool = False) -> LlamaTransformer:
        """A ``transformers`` LLaMA model's weights in this hooked decoder, through ``interp.load`` (its whole config
        audited; every key must map)."""
        import interp

        model = interp.load(hf_model, family="llama", allow_nonfinite=allow_nonfinite)
        model.tokenizer = tokenizer
        return model
