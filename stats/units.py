"""Reading unit-level values back (``NAME.units.csv``, written beside ``NAME.csv`` by an analysis that declares
``analyses.units.Units``): columns ``model``, ``measure``, the condition's keys, ``unit``, ``value``. Figures and the
known-results table read them here, without the analysis' code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def read(csv) -> pd.DataFrame | None:
    """``NAME.units.csv`` beside ``NAME.csv`` (plain or gzipped), read as written; None where there is none."""
    from pathlib import Path

    import pandas as pd

    csv = Path(csv)
    stem = csv.name.removesuffix(".gz").removesuffix(".csv")
    for name in (f"{stem}.units.csv", f"{stem}.units.csv.gz"):
        if (csv.parent / name).is_file():
            return pd.read_csv(csv.parent / name, keep_default_na=False, na_values=[""])
    return None


def matrix(units: pd.DataFrame, measure: str, by: tuple[str, ...] = (), **where) -> np.ndarray:
    """``[unit, *by]`` array of one ``measure`` in the condition ``where`` (every key not in ``by`` fixed by it), units
    in their order and ``by`` sorted. A condition whose units do not cover every combination of ``by`` is an error."""
    import numpy as np

    d = units[units["measure"] == measure]
    for key, value in where.items():
        d = d[d[key] == value]
    if d.empty:
        raise KeyError(f"no unit values of {measure} with {where}")
    d = d.sort_values(["unit", *by], kind="stable")
    n = d["unit"].nunique()
    sizes = [d[b].nunique() for b in by]
    if len(d) != n * int(np.prod(sizes, dtype=int)):
        raise ValueError(f"{measure} with {where}: {len(d)} values are not {n} units x {' x '.join(map(str, sizes))} "
                         f"({', '.join(by)}): narrow the condition")
    return d["value"].to_numpy(dtype=float).reshape(n, *sizes)
