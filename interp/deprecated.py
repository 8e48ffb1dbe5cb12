"""Old spellings that scripts written against an earlier poslens still use, kept until ``REMOVAL``.

Each one warns (``interp.deprecation.PoslensDeprecationWarning``, a ``DeprecationWarning``, naming the new spelling and
the removal date) and gives the same object, or, where the new spelling takes other arguments, the same behaviour:

- a module that moved keeps a file at its old path whose only content is ``moved(__name__, NEW, {...})``: importing
  it warns once, and every name of ``NEW`` is read through it (the same objects); the dict holds the names that did
  not move with it (a function that now takes a ``Checkpoint``, a constant that became a record);
- a name gone from a module that is still there is served by that module's ``__getattr__ = renamed(__name__, {...})``;
- a keyword is mapped where its function is (``poslens.run.run_analysis(static=)``, ``interp.parallel.session``'s
  shard keywords, ...), warning through ``keyword``.

A name that was removed with nothing to take its place is ``Removed``: asking for it raises ``RemovedError`` saying
what to use instead. README.md's "Deprecated names" lists every entry (tests/unit/interp/test_deprecated.py reads that
table and checks each row). Nothing here imports torch.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from interp.deprecation import PoslensDeprecationWarning

REMOVAL = "2027-05-24"


class RemovedError(ImportError):
    """A name that poslens removed with nothing in its place (an ``ImportError``, so ``from m import NAME`` shows
    why)."""


@dataclass(frozen=True)
class Alias:
    """``new``: the new spelling, as a user would write it; ``get()``: the object the old name gives (default: ``new``
    read as ``module.attribute``); ``submodule``: the name is a moved module's old path, whose import warns itself."""

    new: str
    get: Callable | None = None
    submodule: bool = False

    def value(self):
        if self.get is not None:
            return self.get()
        module, _, name = self.new.rpartition(".")
        return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Removed:
    """A name with no replacement; ``instead`` says what to do."""

    instead: str


def message(old: str, new: str) -> str:
    return f"{old} is deprecated: use {new} (the old spelling is removed on {REMOVAL})"


def warn(old: str, new: str, stacklevel: int = 2) -> None:
    warnings.warn(message(old, new), PoslensDeprecationWarning, stacklevel=stacklevel + 1)


def keyword(function: str, old: str, new: str, stacklevel: int = 2) -> None:
    """Warn that ``function(old=...)`` is now spelled ``new``."""
    warn(f"{function}({old}=)", new, stacklevel + 1)


def _lookup(module: str, table: dict, name: str, stacklevel: int):
    entry = table[name]
    if isinstance(entry, Removed):
        raise RemovedError(f"{module}.{name} was removed and has no replacement: {entry.instead}")
    if not entry.submodule:
        warn(f"{module}.{name}", entry.new, stacklevel + 1)
    return entry.value()


def renamed(module: str, table: dict[str, Alias | Removed]):
    """A module ``__getattr__`` serving the names of ``table`` (each access warns); any other name is an AttributeError,
    so the import system still finds the module's submodules."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return _lookup(module, table, name, 2)

    return __getattr__


def moved(old: str, new: str, table: dict[str, Alias | Removed] | None = None):
    """For the file left at a moved module's old path: warn once (at its import, pointing at the importing line) and
    return ``(__getattr__, __dir__)`` that read every name from ``new``, ``table``'s names first."""
    table = table or {}
    warn(old, new, stacklevel=3)  # this function, the shim's body, then the line that imported it

    def __getattr__(name: str):
        if name in table:
            return _lookup(old, table, name, 2)
        if name == "__all__":
            target = importlib.import_module(new)
            return [n for n in getattr(target, "__all__", dir(target)) if not n.startswith("_")] + \
                [n for n, entry in table.items() if isinstance(entry, Alias)]
        if name.startswith("__"):
            raise AttributeError(name)
        target = importlib.import_module(new)
        try:
            return getattr(target, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} (now {new!r}) has no attribute {name!r}") from None

    def __dir__():
        return sorted(set(dir(importlib.import_module(new))) | set(table))

    return __getattr__, __dir__
