"""Olsson et al. 2022's induction and previous-token heads (the ``induction`` CSV and its units): the cuts the rows
judge by, and the best head of a score with its interval over sequences."""

from __future__ import annotations

from poslens.known_results.models import PRETRAINED
from poslens.known_results.types import Results
from stats.intervals import interval, judge
from stats.units import matrix

INDUCTION_CUT = 0.4  # poslens' own: the paper gives no threshold
PREVIOUS_CUT = 0.5  # poslens' own: "half its attention on the previous token"


def sequence_values(r: Results, m: str, measure: str, by=("layer", "head")):
    """``[head (the table's row order), sequence]`` values of one induction measure (``[1, sequence]`` for a loss,
    ``by=()``), or None where the run kept no unit values."""
    units = r.units("induction")
    if units is None or not (units["measure"] == measure).any():
        return None
    x = matrix(units, measure, by=by, model=m)
    return x.reshape(len(x), -1).T


def best_head(r: Results, m: str, score: str, measure: str):
    """The head with the highest mean ``score``, and its interval over sequences (None without unit values)."""
    d = r.model("induction", m).sort_values(["layer", "head"])
    if score not in d:
        return None, None
    i = d[score].to_numpy().argmax()
    best = d.iloc[i]
    values = sequence_values(r, m, measure)
    return best, (None if values is None else interval(values[i]))


def judged(r: Results, score: str, units: str, cut: float) -> dict[str, str]:
    out = {}
    for m in PRETRAINED:
        _, iv = best_head(r, m, score, units)
        out[m] = ("inconclusive: no per-sequence values kept (means only)" if iv is None
                  else judge(iv, above=cut))
    return out


def overall(per_model: dict[str, str]) -> str:
    verdicts = list(per_model.values())
    if all(v == "agrees" for v in verdicts):
        return "agrees"
    if any(v == "differs" for v in verdicts):
        return "differs"
    return "inconclusive"
