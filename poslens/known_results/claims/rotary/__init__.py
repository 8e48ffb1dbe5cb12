"""Rotary bands (Barbero et al., ICLR 2025, Round and Round We Go): rows that read ``rope-frequencies``, and its
per-context values."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.types import Results


def per_context(r: Results, m: str, measure: str, length: int) -> pd.DataFrame | None:
    """``[context, condition]`` values of one rope-frequencies measure at one length; None where the run kept no
    per-context values."""
    units = r.units("rope-frequencies")
    if units is None:
        return None
    u = units[(units["model"] == m) & (units["measure"] == measure) & (units["length"] == length)]
    return None if u.empty else u.pivot_table(index="unit", columns="condition", values="value")
