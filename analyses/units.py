"""Unit-level values: what a summary's interval is computed over (a sequence's sink indicator for a head, a prompt's
retrieval hits, a context's loss change), kept as a tidy long table beside the analysis' own (``NAME.units.csv``).

An analysis that keeps them declares it, ``@analysis(..., units=Units("sequence", keys=(...), measures={...}))``, and
its body returns ``Tables(table, units)``. The table's columns are fixed: ``model``, ``measure``, the declared ``keys``
(the condition a value belongs to; empty where a measure does not vary with one), ``unit`` (the unit's index within its
condition, in the order the analysis read them, or the id the declaration names, such as a token's stream position; a
unit has the same id under every condition, so values pair) and ``value``. Anything reads them back without the
analysis' code (``stats.units``: ``read`` the file, ``matrix(units, measure, **where)`` one condition's array).

Calling an analysis as a function gives its table alone; ``Analysis.tables(model, **options)``, ``analyses.run(...,
units=True)`` and ``poslens.analyze(..., units=True)`` give both, and ``poslens analyze`` writes both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pandas as pd


class Tables(NamedTuple):
    """An analysis' result: its table and its unit-level values (None where it keeps none)."""

    table: pd.DataFrame
    units: pd.DataFrame | None = None


@dataclass(frozen=True)
class Units:
    """The unit-level values an analysis keeps: each a ``measure`` of one ``of`` (a sequence, prompt, context or token)
    in one condition (``keys``)."""

    of: str
    keys: tuple[str, ...] = ()
    measures: dict[str, str] = field(default_factory=dict)  # measure -> what one value is

    @property
    def columns(self) -> tuple[str, ...]:
        return ("model", "measure", *self.keys, "unit", "value")

    def check(self, units, analysis: str) -> None:
        """``units`` has exactly the declared columns and measures (a programming error otherwise)."""
        if units is None:
            raise TypeError(f"analysis '{analysis}' declares units of {self.of} but returned none: return "
                            "Tables(table, units)")
        if tuple(units.columns) != self.columns:
            raise TypeError(f"analysis '{analysis}': its units have columns {list(units.columns)}, declared "
                            f"{list(self.columns)}")
        stray = sorted(set(units["measure"]) - set(self.measures))
        if stray:
            raise TypeError(f"analysis '{analysis}': undeclared unit measures {stray} (declared: "
                            f"{', '.join(self.measures)})")


def long(model: str, measure: str, values, dims: dict[str, object] | None = None, **fixed) -> pd.DataFrame:
    """Rows of one measure: ``values`` is ``[unit, *dims]`` (its first axis the units), ``dims`` names the other axes'
    key columns with their labels (``{"layer": range(L), "head": range(H)}``), ``fixed`` the keys constant over it."""
    import numpy as np
    import pandas as pd

    values = np.asarray(values, dtype=float)
    dims = dims or {}
    labels = [np.asarray(list(v)) for v in dims.values()]
    if values.shape[1:] != tuple(len(v) for v in labels):
        raise ValueError(f"{measure}: values of shape {values.shape} for dims {list(dims)} of "
                         f"{[len(v) for v in labels]}")
    grid = np.meshgrid(np.arange(values.shape[0]), *labels, indexing="ij")
    out = {"model": model, "measure": measure, **fixed}
    out |= {name: g.ravel() for name, g in zip(dims, grid[1:])}
    out |= {"unit": grid[0].ravel(), "value": values.ravel()}
    return pd.DataFrame(out)


def frame(declared: Units, parts: list) -> pd.DataFrame:
    """The parts (``long`` frames) as one table with the declared columns in order (a key a part lacks is empty)."""
    import pandas as pd

    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(declared.columns))
    for key in declared.columns:
        if key not in df:
            df[key] = pd.NA
    return df[list(declared.columns)]


def concat(results) -> Tables:
    """Tables of several models (each a ``Tables`` or a table alone) as one."""
    import pandas as pd

    results = [r if isinstance(r, Tables) else Tables(r) for r in results if r is not None]
    if not results:
        return Tables(pd.DataFrame())
    units = [r.units for r in results if r.units is not None]
    return Tables(pd.concat([r.table for r in results], ignore_index=True),
                  pd.concat(units, ignore_index=True) if units else None)
