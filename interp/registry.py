"""Models loadable by name, as data: each entry says where its weights are (a ``Source``), never how to load them.

Sources are a path (the checkpoints bundled with poslens), a file inside an installed package plus its
format (``interp.packaged``), or a Hugging Face hub id. ``interp.load(name)`` resolves the entry and reads
the source once, like any other path. Listing reads only ``poslens.json`` files and static data: no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from interp.packaged import PACKAGED
from interp.packages import installed

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
        out.append(Entry(directory.name, meta["family"], "bundled", desc, meta.get("n_params"), Source("path", str(directory))))
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
