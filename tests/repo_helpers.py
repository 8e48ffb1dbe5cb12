"""Tiny RePo-family models and an independent reference of the upstream RePo / OLMo-2 forward."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from interp.families.repo.model import RepoConfig, RepoTransformer
from tests.helpers import randomized


def tiny_repo(mode: str = "repo", seed: int = 0, **overrides) -> RepoTransformer:
    base = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, vocab_size=257,
                max_position_embeddings=1200, rope_theta=10000.0, tokenizer="bytes", position_mode=mode,
                start_layer=0 if mode == "rope" else 1)
    torch.manual_seed(seed)
    return randomized(RepoTransformer(RepoConfig(**{**base, **overrides})), f"tiny-{mode}", 0.2)


AUTHORS_PE_CONFIG = {  # PEConfig as the authors' code serialises it: every field, two misspelled twins included
    "dynamic_pe_mode": "swigluex_multihead", "dynamic_pe_start_layer": 1, "dynmaic_pe_start_layer": 1,
    "dynamic_pe_layer_ids": "", "dynmaic_pe_layer_ids": "", "dynamic_pe_init_pdrop": 0.8,
    "dynamic_pe_dropout_anneal_step": 2000, "model_type": ""}


def authors_olmo2_config(model: RepoTransformer) -> dict:
    """config.json as the authors' convert_olmo2_to_hf.py leaves it (their transformers 4.52.4 ``save_pretrained`` of an
    Olmo2Config with a nested PEConfig): every attribute Olmo2Config sets, the token ids and dtype it keeps, the
    bookkeeping; ``bos_token_id`` (None, a PretrainedConfig default) and ``_name_or_path`` (deleted there) are left
    out."""
    c = model.cfg
    return {"architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "eos_token_id": 256, "hidden_act": "silu", "hidden_size": c.hidden_size, "initializer_range": 0.02,
            "intermediate_size": c.intermediate_size,
            "max_position_embeddings": c.max_position_embeddings, "model_type": "olmo2",
            "num_attention_heads": c.num_attention_heads,
            "num_hidden_layers": c.num_hidden_layers, "num_key_value_heads": c.num_key_value_heads, "pad_token_id": 1,
            "pe_config": dict(AUTHORS_PE_CONFIG), "rms_norm_eps": c.rms_norm_eps, "rope_scaling": None,
            "rope_theta": c.rope_theta,
            "tie_word_embeddings": False, "torch_dtype": "float32", "transformers_version": "4.52.4", "use_cache": True,
            "vocab_size": c.vocab_size}


def _rms(x, w, eps=1e-6):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def reference_logits(state: dict, hf_config: dict, ids: torch.Tensor) -> torch.Tensor:
    """Upstream's patched Olmo2 forward, written from its description with cos/sin tables and rotate_half."""
    b, n = ids.shape
    d, h = hf_config["hidden_size"], hf_config["num_attention_heads"]
    hd = d // h
    pe = hf_config["pe_config"]
    mode = pe["dynamic_pe_mode"]
    start = pe["dynmaic_pe_start_layer"]
    inv = 1.0 / hf_config["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd)

    def cos_sin(pos):  # pos [..., n] -> [..., n, hd]
        emb = torch.cat([pos[..., None] * inv, pos[..., None] * inv], -1)
        return emb.cos(), emb.sin()

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2:], x[..., : hd // 2]], -1)

    x = state["model.embed_tokens.weight"][ids]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i in range(hf_config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        q = _rms(x @ state[p + "self_attn.q_proj.weight"].T, state[p + "self_attn.q_norm.weight"])
        k = _rms(x @ state[p + "self_attn.k_proj.weight"].T, state[p + "self_attn.k_norm.weight"])
        v = x @ state[p + "self_attn.v_proj.weight"].T
        q, k, v = (t.view(b, n, h, hd).transpose(1, 2) for t in (q, k, v))  # [b, h, n, hd]
        layer_mode = mode if i >= start else "none"
        if layer_mode == "swigluex_multihead":
            z = (F.silu(x @ state[p + "self_attn.gate_map.weight"].T)
                 * (x @ state[p + "self_attn.content_map.weight"].T)) @ state[p + "self_attn.final_map.weight"].T
            cos, sin = cos_sin(z.transpose(1, 2))  # [b, h, n, hd]
        else:
            cos, sin = cos_sin(torch.arange(n).float())
        if layer_mode != "nope":
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        scores = (q @ k.transpose(-1, -2)) / hd**0.5
        attn = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        o = attn.transpose(1, 2).reshape(b, n, d) @ state[p + "self_attn.o_proj.weight"].T
        x = x + _rms(o, state[p + "post_attention_layernorm.weight"])
        m = (F.silu(x @ state[p + "mlp.gate_proj.weight"].T)
             * (x @ state[p + "mlp.up_proj.weight"].T)) @ state[p + "mlp.down_proj.weight"].T
        x = x + _rms(m, state[p + "post_feedforward_layernorm.weight"])
    return _rms(x, state["model.norm.weight"]) @ state["lm_head.weight"].T
