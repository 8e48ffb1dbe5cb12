"""Tiny random Hugging Face checkpoints of many architectures, written with transformers itself: the architectures of
``CONFIGS`` (d 64), Llama and BERT directories of the poslens families' example sizes (``Family.examples()``), and
Gemma 3 with its two kinds of layer."""

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
    return _written(directory, seed, lambda: tiny_hf(kind, seed, **overrides))


def eager(model_cls, directory):
    """The checkpoint in ``directory`` read back by transformers with its eager attention, in float32: the independent
    reference."""
    return model_cls.from_pretrained(directory, attn_implementation="eager", dtype=torch.float32).eval()


def reference(kind: str, directory):
    return eager(CONFIGS[kind][1], directory)


def reread(model, directory):
    """``model`` saved to ``directory`` and read back by transformers (``eager``)."""
    model.save_pretrained(directory)
    return eager(type(model), directory)


EXAMPLE_SIZES = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "vocab_size", "max_position_embeddings")


def example_sizes(family: str) -> dict:
    """The sizes of ``family``'s tiny example (``Family.examples()``) in the config it exports, which transformers
    reads (the llama and bert families): a transformers checkpoint of that size is declared by the family alone."""
    from interp.families import get

    config = get(family).export(get(family).examples()[0])[0]
    sizes = {k: config[k] for k in EXAMPLE_SIZES if k in config}
    assert len(sizes) >= len(EXAMPLE_SIZES) - 1, (family, config)  # never transformers' defaults (billions of weights)
    return sizes


def _written(directory, seed: int, build):
    """``build()`` from ``seed``, saved by transformers to ``directory``; the transformers model, in eval mode."""
    torch.manual_seed(seed)
    hf = build().eval()
    hf.save_pretrained(directory)
    return hf


def tiny_hf_llama(directory, seed: int = 0, **overrides):
    """A random LlamaForCausalLM of the llama family's example size (untied head), written (``_written``)."""
    config = T.LlamaConfig(**{**example_sizes("llama"), "tie_word_embeddings": False, **overrides})
    return _written(directory, seed, lambda: T.LlamaForCausalLM(config))


def tiny_hf_bert(directory, seed: int = 0, **overrides):
    """A random BertModel (with its pooler) of the bert family's example size, written (``_written``)."""
    config = T.BertConfig(**{**example_sizes("bert"), **overrides})
    return _written(directory, seed, lambda: T.BertModel(config, add_pooling_layer=True))


def gemma3_config(sliding: int, full_rope: dict, **overrides) -> dict:
    """Gemma 3's layout in small, as ``Gemma3TextConfig`` keywords: ``sliding`` sliding layers (plain RoPE, theta 1e4;
    6 keys unless ``overrides`` say otherwise) then one global layer rotated by ``full_rope``, one key head of 16."""
    return {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": sliding + 1, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 16, "query_pre_attn_scalar": 16, "vocab_size": VOCAB,
            "max_position_embeddings": POSITIONS, "sliding_window": 6,
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                "full_attention": full_rope},
            "layer_types": ["sliding_attention"] * sliding + ["full_attention"], "pad_token_id": 0, "bos_token_id": 2,
            "eos_token_id": 1, **overrides}


def tiny_gemma3(sliding: int, full_rope: dict, seed: int = 0, **overrides):
    """A random Gemma3ForCausalLM of ``gemma3_config``, weights spread (``spread_weights``)."""
    config = T.Gemma3TextConfig(**gemma3_config(sliding, full_rope, **overrides))
    torch.manual_seed(seed)
    return spread_weights(T.Gemma3ForCausalLM(config))


def saved_gemma3(directory):
    """``(transformers model, poslens model)`` of Gemma 3's layout in small: three sliding layers (6 keys, theta 1e4)
    to one global layer (theta 1e6, linear scaling by 8), one key head, saved to ``directory`` and loaded back."""
    from interp import load

    hf = tiny_gemma3(3, {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6})
    hf.save_pretrained(directory)
    return hf, load(directory)
