"""Attention sinks (Gu et al., ICLR 2025; Xiao et al., ICLR 2024) and the massive activations behind them (Sun et al.,
COLM 2024): the Gu-comparable conditions, the thresholds, and the readers of ``sink-rate``'s CSV and units several
rows share."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.types import Results, no_interval, rate_interval
from stats.intervals import Interval
from stats.units import matrix

GU_T = 64
# Gu's code tokenizes with ``tokenizer(prompt)``: no BOS for SmolLM2's tokenizer, <bos> for Gemma's. These are the
# conditions their numbers are comparable with (review, cross-cutting 2)
GU_START = {"smollm2": False, "gemma3-270m": True}

SINK_FLOOR = 0.10  # "sinks present": Sink_1's interval above 10% (a shuffled-weight copy has < 5%: tests/acceptance)
SINKS_WRITTEN = "2026-11-27 in commit 17605e3 (massive activations: 464225d), before the 100-sequence runs"
GU_RULE = ("the Gu-comparable condition of each model (their code's tokenizer(prompt): SmolLM2 with no start token, "
           "Gemma 3 with `<bos>` first), T = 64, ε = 0.3 (α_1 > ε per sequence), 95% bootstrap intervals over the "
           "sequences")


def condition(r: Results, m: str, inp: str, start: bool, length: int = GU_T) -> pd.DataFrame | None:
    d = r["sink-rate"]
    d = d[(d.model == m) & (d.estimator == "gu") & (d.length == length) & (d.input == inp) & (d.start_token == start)]
    return None if d.empty else d


def sink_units(r: Results, d: pd.DataFrame | None, second: bool = False):
    """``[sequence, head]`` 0/1 sink indicators (Sink_2's with ``second``) of the rows ``d`` of one condition (one
    model, input, start token and length; any subset of its layers, every head of each): a row's mean is that
    sequence's rate. None where the run kept no unit values."""
    units = r.units("sink-rate")
    if units is None or d is None:
        return None
    c = d.iloc[0]
    x = matrix(units, "sink_2" if second else "sink", by=("layer", "head"), model=c["model"], input=c["input"],
               start_token=c["start_token"], length=c["length"])
    return x[:, sorted(set(d["layer"])), :].reshape(len(x), -1)


def sink_rate(r: Results, m: str, inp: str, start: bool, length: int = GU_T, layers=None,
              second: bool = False) -> Interval | None:
    """Sink_1 (or Sink_2) of one condition, over ``layers`` (default all), with its bootstrap interval over
    sequences; no bounds where the CSV keeps per-head means only."""
    d = condition(r, m, inp, start, length)
    if d is None:
        return None
    if layers is not None:
        d = d[d.layer.isin(list(layers))]
    units = sink_units(r, d, second)
    if units is None:
        column = "sink_2_share" if second else "sink_share"
        return None if column not in d else no_interval(d[column].mean(), int(d["n_docs"].iloc[0]))
    return rate_interval(units)


def sequences(r: Results, inp: str = "text", length: int = GU_T, start: dict | None = None) -> str:
    """The sequences the kept run read per condition (its CSV's ``n_docs``) on the Gu-comparable condition (or
    ``start``: a start-token choice per model), per model where they differ; "?" where a model has none."""
    from poslens.known_results.models import PRETRAINED
    from poslens.known_results.types import per_model

    out = {}
    for m in PRETRAINED:
        d = condition(r, m, inp, (start or GU_START)[m], length)
        out[m] = "?" if d is None else int(d["n_docs"].iloc[0])
    return per_model(out)


def start_conditions(r: Results, m: str) -> list[bool]:
    d = r.model("sink-rate", m)
    return sorted(set(d["start_token"]), reverse=True)


def start_text(r: Results, m: str, analysis: str = "sink-rate") -> str:
    d = r.model(analysis, m)
    return f"`{d['start_text'].iloc[0]}`" if "start_text" in d else "its start token"


def condition_name(r: Results, m: str, start: bool, analysis: str = "sink-rate") -> str:
    return f"{start_text(r, m, analysis)} first" if start else "no start token"


def combined(parts: list[str]) -> str:
    """The verdict of a rule's parts together: agrees when every part agrees, differs when any differs, else the first
    part that neither agrees nor differs (inconclusive, or why it was not judged)."""
    return ("agrees" if all(p == "agrees" for p in parts) else
            "differs" if any(p == "differs" for p in parts) else next(p for p in parts if p != "agrees"))
