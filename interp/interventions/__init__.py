"""Interventions: named edits of a forward pass, each a set of forward hooks usable in ``run_with_hooks``.

    from interp import interventions
    iv = interventions.MaskHeads({(3, 1), (7, 0)})          # any registered intervention
    logits = model.run_with_hooks(tokens, fwd_hooks=iv.fwd_hooks(model))
    with interventions.applied(model, iv):                   # the same, recorded in the model's provenance
        logits = model(tokens)

The registered interventions, each with its fields, what it edits and the capabilities it needs, are the table
``interp.intervention_docs.markdown()`` reads off this registry (README.md carries it, and a test keeps the two equal).

An intervention is a frozen dataclass: its fields are its whole description, so ``record()`` (what provenance
stores) is the intervention's name plus its fields. ``fwd_hooks(model)`` checks the model has what it needs
(a layer, a head) and raises ``ValueError`` naming the field and value before any forward; a model without the
capability it needs is refused by ``interp.capabilities.require`` (a ``CapabilityError`` naming the intervention).
An intervention may also have a ``condition(model)``: a context in which the model's own attention applies the edit
without hooks (``KeyWindow``: a key window ``interp.attention.attend`` applies per chunk of query rows, at any length);
``applied`` enters it instead of the hooks. Each intervention lives in its own module and registers itself with
``@register``; the module is named once in ``MODULES`` (one line), and ``registered()`` / ``get(name)`` find it by its
name. Beside its fields it declares what the documentation and the tests read off it:

- its docstring, whose first paragraph says what it edits (the README table's row);
- ``needs``: the capabilities it refuses a model without (a test checks it refuses exactly those);
- ``example``: the keyword arguments of a small instance (the README's call, and the instance the tests iterate).

``register`` checks them when the module is imported, naming the intervention.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
from typing import Callable, ClassVar

from interp.capabilities import Capability

MODULES: tuple[str, ...] = (
    "interp.interventions.heads",
    "interp.interventions.queries",
    "interp.interventions.rotary",
    "interp.interventions.window",
    "interp.interventions.positions",
    "interp.interventions.ap",
)

REGISTRY: dict[str, type[Intervention]] = {}


@dataclasses.dataclass(frozen=True)
class Intervention:
    name: ClassVar[str] = ""
    needs: ClassVar[tuple[Capability, ...]] = ()  # capabilities a model must have (a CapabilityError otherwise)
    example: ClassVar[dict | None] = None  # keyword arguments of a small instance, for the README and the tests

    def fwd_hooks(self, model) -> list[tuple[str, Callable]]:
        raise NotImplementedError

    def condition(self, model) -> contextlib.AbstractContextManager | None:
        """A context in which the model's own attention applies the edit (no hooks), checked against ``model`` as
        ``fwd_hooks`` is; None (the default) where the edit is its hooks. ``applied`` prefers it."""
        return None

    def record(self) -> dict:
        fields = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"intervention": self.name, **fields}


def _plain(value):
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _indices(values, n: int, what: str, model, who: str) -> list[int]:
    if values is None:
        return list(range(n))
    bad = [v for v in values if not 0 <= v < n]
    if bad:
        raise ValueError(f"{who} {what}s: {bad[0]} is not a {what} of {model.model_name} (0..{n - 1})")
    return sorted(set(values))


def layers_of(model, layers, who: str) -> list[int]:
    """The layers an intervention edits: ``layers`` (checked against the model), or all of them when None."""
    return _indices(layers, model.n_layers, "layer", model, who)


def heads_of(model, heads, who: str) -> list[int]:
    """The query heads an intervention edits: ``heads`` (checked), or all of them when None."""
    return _indices(heads, model.n_heads, "head", model, who)


def as_tuple(value):
    """An intervention field's ints as a sorted tuple (None stays None), so that equal edits compare and record
    alike."""
    return None if value is None else tuple(sorted({int(v) for v in value}))


def register(cls: type[Intervention]) -> type[Intervention]:
    """Add ``cls`` (a frozen dataclass of ``Intervention``) to the registry, once its declarations are checked: a unique
    ``name``, a docstring of its own, ``needs`` of ``Capability`` members and an ``example`` it can be built from."""
    who = f"intervention {cls.__name__}"
    if not cls.name or cls.name in REGISTRY:
        raise ValueError(f"{who} needs a unique name, got {cls.name!r}")
    if not dataclasses.is_dataclass(cls) or not issubclass(cls, Intervention):
        raise TypeError(f"{who}: @register goes above @dataclasses.dataclass(frozen=True) on a subclass of "
                        "Intervention")
    if not written_doc(cls):
        raise ValueError(f"{who} ({cls.name!r}) needs a docstring: its first paragraph says what it edits "
                         "(the README's row)")
    if not isinstance(cls.needs, tuple) or not all(isinstance(c, Capability) for c in cls.needs):
        raise TypeError(f"{who} ({cls.name!r}): needs must be a tuple of interp.capabilities.Capability, "
                        f"got {cls.needs!r}")
    if not isinstance(cls.example, dict):
        raise TypeError(f"{who} ({cls.name!r}) needs an example: a dict of the keyword arguments of a small instance "
                        f"(fields: {', '.join(f.name for f in dataclasses.fields(cls)) or 'none'}), "
                        f"got {cls.example!r}")
    try:
        cls(**cls.example)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{who} ({cls.name!r}): its example {cls.example!r} does not build one: {err}") from None
    REGISTRY[cls.name] = cls
    return cls


def written_doc(cls) -> str:
    """``cls``'s own docstring, or "" where it has none (the signature ``dataclasses`` writes in its place)."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(cls.__name__ + "(") else inspect.cleandoc(doc)


def registered() -> dict[str, type[Intervention]]:
    """Every registered intervention by name, the modules of ``MODULES`` imported first (so a line added to it
    counts)."""
    _load()
    return dict(REGISTRY)


def get(name: str) -> type[Intervention]:
    known = registered()
    if name not in known:
        raise KeyError(f"unknown intervention '{name}' (known: {', '.join(sorted(known))})")
    return known[name]


@contextlib.contextmanager
def applied(model, *interventions: Intervention):
    """Apply the interventions for the duration of the block (each one's ``condition`` where it has one, else its
    hooks) and log their records on the model (``model.interventions_applied``, read by provenance), so a result says
    which edits produced it."""
    conditions = [iv.condition(model) for iv in interventions]
    hooks = [h for iv, c in zip(interventions, conditions) if c is None for h in iv.fwd_hooks(model)]
    log = model.__dict__.setdefault("interventions_applied", [])
    for iv in interventions:
        if iv.record() not in log:
            log.append(iv.record())
    with contextlib.ExitStack() as stack:
        for c in conditions:
            if c is not None:
                stack.enter_context(c)
        stack.enter_context(model.hooks(fwd_hooks=hooks))
        yield model


def _load() -> None:
    for module in MODULES:
        importlib.import_module(module)


_load()

from interp.interventions.ap import RemoveAPBands  # noqa: E402 (registered above; re-exported by name)
from interp.interventions.heads import MaskHeads  # noqa: E402
from interp.interventions.positions import ShiftPositions, ShufflePositions, StretchPositions  # noqa: E402
from interp.interventions.queries import MaskHeadQueries  # noqa: E402
from interp.interventions.rotary import RemoveRotaryBands, UnrotateRotaryBands  # noqa: E402
from interp.interventions.window import KeyWindow  # noqa: E402

__all__ = ["Intervention", "KeyWindow", "MaskHeadQueries", "MaskHeads", "REGISTRY", "RemoveAPBands",
           "RemoveRotaryBands", "ShiftPositions", "ShufflePositions", "StretchPositions", "UnrotateRotaryBands",
           "applied", "get", "register", "registered"]
