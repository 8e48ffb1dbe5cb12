"""Retrieval heads (Wu et al. 2024): rows that read ``retrieval-heads``' Wu scores, and the induction heads they
overlap."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.claims.induction import INDUCTION_CUT
from poslens.known_results.types import Results

THRESHOLD = 0.1


def wu_rows(r: Results, m: str) -> pd.DataFrame:
    return r.model("retrieval-heads", m, score="wu", masking="query")


def induction_heads(r: Results, m: str) -> set[tuple[int, int]]:
    try:
        d = r.model("induction", m)
    except (FileNotFoundError, ValueError):
        return set()
    d = d[d["induction_score"] >= INDUCTION_CUT]
    return {(int(a), int(b)) for a, b in zip(d["layer"], d["head"])}
