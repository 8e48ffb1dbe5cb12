"""Tiny random Hugging Face checkpoints of many architectures, written with transformers itself."""

from __future__ import annotations

import torch
import transformers as T

VOCAB, POSITIONS = 300, 512  # the byte tokenizer's ids fit; wiki contexts of a few hundred tokens fit
_DECODER = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=POSITIONS, pad_token_id=0,
                bos_token_id=1, eos_token_id=2)
CONFIGS = {
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, _DECODER),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, _DECODER),
    "mistral": (T.MistralConfig, T.MistralForCausalLM, _DECODER),
    "gemma2": (T.Gemma2Config, T.Gemma2ForCausalLM, {**_DECODER, "head_dim": 16}),
    "olmo2": (T.Olmo2Config, T.Olmo2ForCausalLM, _DECODER),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, _DECODER),
    "gpt2": (T.GPT2Config, T.GPT2LMHeadModel, dict(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB,
                                                   n_positions=POSITIONS)),
    "gpt_neox": (T.GPTNeoXConfig, T.GPTNeoXForCausalLM, {k: v for k, v in _DECODER.items()
                                                         if k != "num_key_value_heads"}),
    "opt": (T.OPTConfig, T.OPTForCausalLM, dict(hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                                                num_attention_heads=4, vocab_size=VOCAB,
                                                max_position_embeddings=POSITIONS, word_embed_proj_dim=64,
                                                pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "bert": (T.BertConfig, T.BertModel, {k: v for k, v in _DECODER.items()
                                         if k not in ("num_key_value_heads", "bos_token_id", "eos_token_id")}),
    "bert-mlm": (T.BertConfig, T.BertForMaskedLM, {k: v for k, v in _DECODER.items()
                                                   if k not in ("num_key_value_heads", "bos_token_id",
                                                                "eos_token_id")}),
}
ROTARY = {"llama", "qwen2", "mistral", "gemma2", "olmo2", "phi3", "gpt_neox"}
LEARNED = {"gpt2", "opt", "bert", "bert-mlm"}


def tiny_hf(kind: str, seed: int = 0, **overrides):
    """A random transformers model of this architecture (2 layers, d 64), weights spread enough to matter."""
    config_cls, model_cls, kwargs = CONFIGS[kind]
    torch.manual_seed(seed)
    return spread_weights(model_cls(config_cls(**{**kwargs, **overrides})))


def spread_weights(model):
    """Every matrix redrawn, N(0, 1) for embeddings and N(0, 0.3) for the rest (seeded by the caller), so that a
    random model's attention is far from uniform and its layers matter; the model, in eval mode."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3 if "embed" not in name and "wte" not in name and "wpe" not in name else 1.0)
    return model.eval()


def write_tiny_hf(kind: str, directory, seed: int = 0, **overrides):
    """Save a tiny model as a Hugging Face directory (no tokenizer files); returns the transformers model."""
    model = tiny_hf(kind, seed, **overrides)
    model.save_pretrained(directory)
    return model


def reference(kind: str, directory):
    """The same checkpoint read back by transformers with its eager attention: the independent reference."""
    _, model_cls, _ = CONFIGS[kind]
    return model_cls.from_pretrained(directory, attn_implementation="eager", dtype=torch.float32).eval()
