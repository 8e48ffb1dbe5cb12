"""No table is written with a number computed from NaN as if it were real.

An analysis declares the numeric columns that may hold NaN *with a meaning* (a statistic that is undefined
for that row, a field that does not apply) with ``@may_be_nan(column="what NaN means here")``; a name with
``*`` covers the columns it matches (``fnmatch``: columns named after an option's values). Before any file is
written, ``check_table`` refuses a table with NaN or infinity in any other numeric column, naming the column
and the rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def may_be_nan(**meanings: str):
    """Declare the columns of an analysis' table in which NaN is a legitimate value, and what it means."""
    def mark(fn):
        fn.nan_columns = {**getattr(fn, "nan_columns", {}), **meanings}
        return fn
    return mark


def nan_columns(function) -> dict[str, str]:
    return dict(getattr(function, "nan_columns", {}))


def check_table(table: pd.DataFrame, analysis: str, allowed: dict[str, str]) -> None:
    """Raise ``ValueError`` naming the first numeric column with NaN / inf that ``allowed`` does not list."""
    from fnmatch import fnmatchcase

    import numpy as np

    for column in table.select_dtypes(include="number").columns:
        values = table[column].to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(values)
        if column in allowed or any("*" in name and fnmatchcase(column, name) for name in allowed):
            bad &= ~np.isnan(values)  # the declared meaning covers NaN, never infinity
        if bad.any():
            rows = np.flatnonzero(bad)
            where = ", ".join(_describe(table.iloc[r]) for r in rows[:5]) + (" ..." if len(rows) > 5 else "")
            raise ValueError(f"{analysis}: column '{column}' holds NaN/inf in {len(rows)} of {len(table)} rows "
                             f"({where}); a number computed from NaN is not written as a result (check the weights, "
                             "hooks and inputs)")


def _describe(row: pd.Series) -> str:
    import pandas as pd

    keys = [k for k in row.index if not pd.api.types.is_float(row[k])][:3]
    return f"row {row.name}" + (": " + " ".join(f"{k}={row[k]}" for k in keys) if keys else "")


def integer_columns(table: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Columns of whole numbers that are missing on some rows (a table of two parts) kept as integers, not floats:
    layer 2 is written ``2``, and a missing one is an empty field."""
    for column in columns:
        if column in table:
            table[column] = table[column].astype("Int64")
    return table
