"""A tiny LLaMA GGUF file written with the ``gguf`` package: 2 layers, d_model 32, a byte-level BPE vocabulary of the
256 byte symbols plus four merges, float32 tensors drawn from ``seed``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

D_MODEL, D_FF, LAYERS, HEADS, KV_HEADS, CONTEXT = 32, 64, 2, 4, 2, 128


def write_tiny_gguf(path, seed: int = 0) -> Path:
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    merges = ["h e", "l l", "he ll", "Ġ t"]
    tokens = list(bytes_to_unicode().values()) + ["he", "ll", "hell", "Ġt", "<|endoftext|>"]
    kv = KV_HEADS * D_MODEL // HEADS
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(D_MODEL)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(D_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(D_MODEL // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 1) + [3])
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)

    def weight(name, shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    weight("token_embd.weight", (len(tokens), D_MODEL))
    w.add_tensor("output_norm.weight", np.ones(D_MODEL, np.float32))
    for layer in range(LAYERS):
        w.add_tensor(f"blk.{layer}.attn_norm.weight", np.ones(D_MODEL, np.float32))
        w.add_tensor(f"blk.{layer}.ffn_norm.weight", np.ones(D_MODEL, np.float32))
        weight(f"blk.{layer}.attn_q.weight", (D_MODEL, D_MODEL))
        weight(f"blk.{layer}.attn_k.weight", (kv, D_MODEL))
        weight(f"blk.{layer}.attn_v.weight", (kv, D_MODEL))
        weight(f"blk.{layer}.attn_output.weight", (D_MODEL, D_MODEL))
        weight(f"blk.{layer}.ffn_gate.weight", (D_FF, D_MODEL))
        weight(f"blk.{layer}.ffn_up.weight", (D_FF, D_MODEL))
        weight(f"blk.{layer}.ffn_down.weight", (D_MODEL, D_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
