"""Compact Markdown tables of each result, for ``SUMMARY.md`` beside the report (and for pasting into notes)."""

from __future__ import annotations

import pandas as pd


def markdown(df: pd.DataFrame, digits: int = 3) -> str:
    def cell(v):
        if isinstance(v, float):
            return "" if v != v else f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{v:.{digits}f}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |\n| " + " | ".join("---" for _ in df.columns) + " |\n"
    return head + "\n".join("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))


def compact(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The few columns and rows of a result that a reader needs first (the analysis' own ``summary``)."""
    from analyses import get

    analysis = get(name)
    return analysis.summary(df) if analysis.summary is not None else df.head(20)


def summary(done) -> str:
    parts = ["# poslens results\n"]
    from analyses import get

    for step, result in done:
        analysis = get(step.analysis)
        parts.append(f"## {analysis.name}\n\n{analysis.headline(result.table) if analysis.headline else ''}\n")
        parts.append(markdown(compact(analysis.name, result.table)) + "\n")
    return "\n".join(parts)
