"""What ``poslens analyze`` prints when a run ends: a few lines, not the table.

The first line is the analysis' own headline (``@analysis(..., headline=...)``: a function of its table, declared in
its module beside the function); an analysis that declares none gets ``default`` (its size and models). Then one line
per file written, each CSV's size beside it (the units file, ``NAME.units.csv``, its own).
"""

from __future__ import annotations

from pathlib import Path


def default(table) -> str:
    """For an analysis without a headline of its own: rows, models and the first columns."""
    models = list(dict.fromkeys(table["model"])) if "model" in table else []
    shown = ", ".join(map(str, list(table.columns)[:6])) + (", ..." if len(table.columns) > 6 else "")
    over = f" over {len(models)} model{'s' if len(models) != 1 else ''}" if models else ""
    return f"{len(table)} rows{over} (columns: {shown})"


def lines(spec, result) -> list[str]:
    """The headline, then where each file is."""
    table = result.table
    models = list(dict.fromkeys(map(str, table["model"]))) if "model" in table else []
    try:
        said = spec.headline(table) if spec.headline is not None else default(table)
    except Exception as err:  # a headline must not hide a finished run's files
        said = f"{default(table)} (its headline failed: {type(err).__name__}: {err})"
    out = [f"{spec.name}{' on ' + ', '.join(models) if models else ''}: {said}"]
    for path in result.files:
        path = Path(path)
        units = path.name.endswith(".units.csv")
        kind = "units" if units else {".csv": "table", ".json": "provenance"}.get(path.suffix, "figure")
        written = result.units if units else table
        size = f" ({len(written)} rows x {len(written.columns)} columns)" if path.suffix == ".csv" else ""
        out.append(f"  {kind + ':':<12}{path}{size}")
    return out
