"""The analyses poslens runs by name: what each computes, its options and its figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from interp.base import Capability


@dataclass(frozen=True)
class Option:
    name: str
    type: Callable = str
    default: object = None
    help: str = ""
    multiple: bool = False
    choices: tuple | None = None


@dataclass(frozen=True)
class Analysis:
    name: str
    function: Callable  # (model, **options) -> pandas.DataFrame, one model at a time
    figure: str  # module of figures/
    summary: str  # what the figure shows, in one sentence (for the report)
    needs: tuple[Capability, ...] = ()
    options: tuple[Option, ...] = ()
    seeded: bool = False  # takes ``seed=``
    convert: dict[str, Callable] = field(default_factory=dict)  # CLI value -> function argument
    headline: Callable | None = None  # (table) -> one sentence on what this result shows


_REGISTRY: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    _REGISTRY[analysis.name] = analysis
    return analysis


def get(name: str) -> Analysis:
    if name not in _REGISTRY:
        raise KeyError(f"unknown analysis '{name}' (known: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]


def all_analyses() -> list[Analysis]:
    return list(_REGISTRY.values())
