"""Models loadable by name: checkpoints bundled with poslens and real models installed from packages."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BUNDLED_DIR = Path(__file__).parent / "checkpoints"


@dataclass(frozen=True)
class Entry:
    name: str
    family: str
    origin: str  # "bundled" or "package <pip name>"
    description: str
    loader: Callable[[], object]
    available: Callable[[], bool]
    n_params: Callable[[], int | None]

    def load(self):
        if not self.available():
            raise FileNotFoundError(f"model '{self.name}' is not available here: {self.origin} is missing")
        return self.loader()


def _bundled_entries() -> list[Entry]:
    out = []
    for meta_path in sorted(BUNDLED_DIR.glob("*/poslens.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        directory = meta_path.parent

        def loader(d=directory):
            from interp.loading import load

            model = load(d)
            model.model_name = d.name
            return model

        training = directory / "training.json"
        desc = meta.get("description", "")
        if training.exists():
            record = json.loads(training.read_text(encoding="utf-8"))
            desc = desc or record.get("description", "")
        out.append(Entry(directory.name, meta["family"], "bundled", desc, loader, lambda: True, lambda m=meta: m.get("n_params")))
    return out


_EXTRA: list[Entry] = []


def register(entry: Entry) -> None:
    """Add a named model (used by the package-backed adapters)."""
    _EXTRA[:] = [e for e in _EXTRA if e.name != entry.name] + [entry]


def entries() -> list[Entry]:
    from interp import packaged

    return _bundled_entries() + packaged.entries() + list(_EXTRA)


def lookup(name: str) -> Entry | None:
    return next((e for e in entries() if e.name == name), None)


def names_hint() -> str:
    names = [e.name for e in entries()]
    return "known names: " + (", ".join(names) if names else "none bundled")
