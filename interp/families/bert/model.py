"""BERT encoder (learned absolute positions), hooked: real pretrained encoders as peers of the
disentangled family. Weights come from a ``transformers`` BertModel (all-MiniLM-L6-v2 ships as a package).

Post-LayerNorm blocks: ``h = LN(x + attn(x))``, ``out = LN(h + ffn(h))``; embeddings are
``LN(word + position + token_type_0)``. The learned position table is the absolute-position (AP) matrix
that ``ap_embedding_matrix()`` hands to the AP-spectrum analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp import padding
from interp.attention import attend
from interp.base import InputError, PosLensModel
from interp.capabilities import Capability
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Hook, MLPHooks, NormHooks, head_hooks
from interp.tl import AttentionWeights, result_heads


@dataclass
class BertConfig:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class BertAttention(AttentionHooks, AttentionWeights):
    hook_q, hook_k, hook_v, hook_z = head_hooks("queries", "keys",
                                                "values", "per-head attention output before the dense projection")
    hook_attn_scores = Hook("[batch, head, q, k]", "scaled logits (bidirectional, unmasked)")
    hook_result = RESULT

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.tl_n_heads = cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        shape = (b, n, self.cfg.num_attention_heads, self.cfg.head_dim)
        q = self.hook_q(self.query(x).view(shape))
        k = self.hook_k(self.key(x).view(shape))
        v = self.hook_v(self.value(x).view(shape))
        z = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=False,
                   hook_scores=self.hook_attn_scores, hook_pattern=self.hook_pattern,
                   scale=1.0 / math.sqrt(self.cfg.head_dim))
        return result_heads(self, self.hook_z(z.transpose(1, 2)), self.dense)

    def tl_projections(self):
        return self.query, self.key, self.value, self.dense


class BertBlock(BlockHooks):
    hook_attn_out = Hook("[batch, pos, d_model]", "attention output added before attn_norm")
    hook_resid_mid = Hook("[batch, pos, d_model]", "LayerNorm(x + attention)")
    hook_mlp_out = Hook("[batch, pos, d_model]", "feed-forward output added before ffn_norm")
    hook_resid_post = Hook("[batch, pos, d_model]", "residual leaving layer l (post-LayerNorm)")

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attn = BertAttention(cfg)
        self.attn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.ffn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        # post-LN, named as TransformerLens' BERT names them: ln1 after attention, ln2 after the MLP
        self.ln1, self.ln2 = NormHooks(self.attn_norm), NormHooks(self.ffn_norm)
        self.mlp = MLPHooks({"in": self.intermediate, "out": self.output})

    def forward(self, x: Tensor) -> Tensor:
        x = self.hook_resid_pre(x)
        h = self.hook_resid_mid(self.ln1(x + self.hook_attn_out(self.attn(x))))
        hidden = self.mlp.hook_post(F.gelu(self.mlp.hook_pre(self.intermediate(h))))
        return self.hook_resid_post(self.ln2(h + self.hook_mlp_out(self.output(hidden))))


class BertEncoder(PosLensModel):
    family = "bert"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    hook_embed = Hook("[batch, pos, d_model]", "word embeddings")
    hook_pos_embed = Hook("[batch, pos, d_model]", "learned absolute-position embeddings (rows 0..N-1)")
    hook_embed_out = Hook("[batch, pos, d_model]", "LayerNorm(word + position + token type 0)")

    def __init__(self, cfg: BertConfig, tokenizer=None):
        super().__init__()
        self.cfg = cfg
        self.n_layers, self.n_heads, self.d_model = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
        self.d_vocab, self.max_seq_len = cfg.vocab_size, cfg.max_position_embeddings
        self.tokenizer = tokenizer
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.embed_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.blocks = nn.ModuleList([BertBlock(cfg) for _ in range(cfg.num_hidden_layers)])
        self.capabilities = frozenset({Capability.HIDDEN_STATES, Capability.ATTENTION, Capability.AP_STREAM})
        self.setup()

    def tl_config(self) -> dict:
        c = self.cfg
        return dict(d_head=c.head_dim, d_mlp=c.intermediate_size, act_fn="gelu", normalization_type="LN",
                    positional_embedding_type="standard", original_architecture="BertModel")

    def tl_weight_plan(self):
        """Post-LayerNorm: only the value biases are processed."""
        from interp.weight_processing import WeightPlan, layer_plan

        post = ("BERT is post-LayerNorm: each norm acts on the residual itself, so no weight reading it can absorb "
                "it")
        return WeightPlan([layer_plan(b, None, None, self.n_heads) for b in self.blocks], None, [],
                          refuse={"fold_ln": post, "center_writing_weights": post,
                                  "center_unembed": "the bert family has no output head"})

    @property
    def W_E(self) -> Tensor:
        return self.word_embeddings.weight

    @property
    def W_pos(self) -> Tensor:
        return self.position_embeddings.weight

    def tl_absent(self) -> dict[str, str]:
        final = "post-LN: no final norm (each layer's ln2 is the last thing it does)"
        return {**super().tl_absent(), "ln_final.hook_scale": final, "ln_final.hook_normalized": final}

    def describe(self) -> str:
        return f"bert family, learned absolute positions, {self.n_layers} layers x {self.d_model}"

    def forward(self, tokens) -> Tensor:
        """Last hidden state ``[batch, pos, d_model]`` (this encoder has no language-model head)."""
        tokens = self.check_tokens(tokens)
        n = tokens.shape[1]
        pos = padding.position_ids(n, tokens.device)  # a padded batch: each row's real tokens from 0
        pos = torch.arange(n, device=tokens.device)[None].expand(tokens.shape[0], -1) if pos is None else pos
        x = self.tl_embedded(lambda: self.embedded(tokens, pos))
        for block in self.tl_blocks():
            x = block(x)
        return self.tl_final(x)

    def embedded(self, tokens: Tensor, pos: Tensor) -> Tensor:
        """The residual entering block 0: token, position and token-type rows, normed."""
        x = self.hook_embed(self.tl_token_rows(tokens, self.word_embeddings)) + self.hook_pos_embed(
            self.position_embeddings(pos))
        return self.hook_embed_out(self.embed_norm(x + self.token_type_embeddings.weight[0]))

    def check_tokens(self, tokens) -> Tensor:
        tokens = super().check_tokens(tokens)
        real = padding.current_padding()
        if ((tokens == 0) & (real.to(tokens.device) if real is not None else True)).any():
            raise InputError("token id 0 ([PAD]) in the input: run unpadded sequences, one length per batch")
        return tokens

    def tl_filler_id(self) -> int:
        return 1  # not [PAD] (0), which check_tokens refuses

    def ap_embedding_matrix(self) -> Tensor:
        """The learned absolute-position table ``[max_position_embeddings, d_model]``."""
        return self.position_embeddings.weight.detach()

    def ap_hook(self) -> str:
        return "hook_pos_embed"

    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}

    @classmethod
    def from_hf(cls, hf_model, tokenizer=None, *, allow_nonfinite: bool = False) -> BertEncoder:
        """A transformers BertModel's weights in this hooked encoder, through ``interp.load`` (config audited, every key
        mapped; the pooler is not used and not loaded)."""
        import interp

        model = interp.load(hf_model, family="bert", allow_nonfinite=allow_nonfinite)
        model.tokenizer = tokenizer
        return model
