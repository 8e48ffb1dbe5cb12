"""Model families as plug-ins: each a folder of its own (its model, its reading and writing of checkpoints) that
declares one ``Family`` record, registered with one line in ``MODULES``.

A record says:

- ``name``: the family (``model.family``, ``poslens.json``'s ``"family"``, ``load(..., family=)``);
- ``layouts``: the checkpoint layouts it reads besides poslens directories, each a ``Layout`` that recognises a
  checkpoint (``matches``: a ``Checkpoint``'s path, config or loaded torch object) and reads it; ``fallback`` layouts
  (the generic Hugging Face family) are asked after every other;
- ``hf_model_types``: the ``model_type``s of ``config.json`` its layouts claim (for the error that names them);
- ``build`` / ``export``: a poslens directory's config and state dict to a model and back (``save`` instead, for a
  family that writes its own layout);
- ``examples``: tiny instances, one per model class (the README's hook tables and the family-wide tests).

``interp.load`` asks the registered families and names none. A family's modules import only their own names and the
shared machinery (``interp.base``, ``interp.hooks``, ``interp.loading``'s readers and errors).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

MODULES = (  # one line per family, in the order their layouts are asked
    "interp.families.increments",
    "interp.families.repo",
    "interp.families.encoder",
    "interp.families.llama",
    "interp.families.bert",
    "interp.families.hf",
)


@dataclass(frozen=True)
class Layout:
    """A checkpoint layout a family reads: ``name``, ``matches(checkpoint)`` and ``read(checkpoint, place)`` (``place``:
    the placement the caller asked for; a reader that places the weights itself clears it).

    ``kind`` (``directory``, ``torch file``, ``gguf file``) and ``expects`` (what a checkpoint of it holds) are what the
    error for an unreadable checkpoint lists; ``format(checkpoint, model)`` is what provenance records (default: the
    name); ``placement`` names what ``read`` takes: ``device`` and ``dtype`` always, ``device_map`` and ``max_memory``
    where it can split the weights across devices while reading. ``declines(checkpoint)`` says why the layout does not
    take a checkpoint of the kind it reads (a llama directory whose rope_type the llama family does not implement):
    provenance records it beside the family that read the checkpoint, and ``load(family=)`` asking for this family
    gets it as the error."""

    name: str
    matches: Callable
    read: Callable
    kind: str = "directory"
    expects: str = ""
    format: Callable | None = None
    fallback: bool = False
    placement: tuple[str, ...] = ("device", "dtype")
    declines: Callable | None = None  # (checkpoint) -> why a checkpoint of its kind is left to another family, or None

    def recorded(self, checkpoint, model) -> str:
        return self.format(checkpoint, model) if self.format is not None else self.name


@dataclass(frozen=True)
class Family:
    name: str
    layouts: tuple[Layout, ...] = ()
    build: Callable | None = None  # (config dict, state dict, where) -> model, from a poslens directory
    export: Callable | None = None  # model -> (config dict, state dict), into a poslens directory
    save: Callable | None = None  # (model, directory, overwrite) -> directory, for a family that writes its own layout
    hf_model_types: tuple[str, ...] = ()
    examples: Callable | None = None  # () -> [tiny model, one per model class]


_REGISTRY: dict[str, Family] = {}
_ORIGIN: dict[str, str] = {}  # family name -> the module that registered it


def register(family: Family) -> Family:
    """Add a family (a module of ``MODULES``, or a plug-in of the user's) under its name."""
    if not family.name:
        raise ValueError("a family needs a name")
    _REGISTRY[family.name] = family
    _ORIGIN[family.name] = sys._getframe(1).f_globals.get("__name__", "")
    return family


def families() -> list[Family]:
    """Every registered family, in ``MODULES`` order (whatever order they were imported in), then plug-ins in the order
    they were registered: the order their layouts are asked."""
    for module in MODULES:
        importlib.import_module(module)
    rank = {m: i for i, m in enumerate(MODULES)}
    order = list(_REGISTRY)
    return [_REGISTRY[n] for n in sorted(order, key=lambda n: (rank.get(_ORIGIN[n], len(rank)), order.index(n)))]


def get(name: str, where: str = "") -> Family:
    from interp.loading.errors import CheckpointError

    families()
    if name not in _REGISTRY:
        raise CheckpointError(f"{where + ': ' if where else ''}unknown model family '{name}' "
                              f"(known: {sorted(_REGISTRY)})")
    return _REGISTRY[name]


def layouts() -> list[tuple[Family, Layout]]:
    """Every family's layouts, fallbacks last."""
    pairs = [(f, layout) for f in families() for layout in f.layouts]
    return [p for p in pairs if not p[1].fallback] + [p for p in pairs if p[1].fallback]
