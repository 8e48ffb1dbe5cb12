"""Retrieval heads (Wu et al. 2024): rows that read ``retrieval-heads``' Wu scores, and the induction heads they
overlap."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.claims.induction import INDUCTION_CUT
from poslens.known_results.types import Results

THRESHOLD = 0.1


def wu_rows(r: Results, m: str, length: int | None = None) -> pd.DataFrame:
    """The rows of Wu's score and masking, at ``length`` tokens where given (else every length run)."""
    return r.model("retrieval-heads", m, score="wu", masking="query", **({} if length is None else {"length": length}))


def lengths(r: Results, m: str) -> list[int]:
    """The prompt lengths the kept run scored ``m`` at (the heads ranked and masked anew at each)."""
    return sorted(set(wu_rows(r, m)["length"].astype(int)))


def unit_where(r: Results, length: int) -> dict:
    """The ``stats.units.matrix`` condition of one length: none for units kept before they carried a length."""
    units = r.units("retrieval-heads")
    return {"length": length} if units is not None and "length" in units and units["length"].notna().any() else {}


def induction_heads(r: Results, m: str) -> set[tuple[int, int]]:
    try:
        d = r.model("induction", m)
    except (FileNotFoundError, ValueError):
        return set()
    d = d[d["induction_score"] >= INDUCTION_CUT]
    return {(int(a), int(b)) for a, b in zip(d["layer"], d["head"])}
