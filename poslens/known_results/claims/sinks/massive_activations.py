"""Massive activations at the first token (Sun et al., COLM 2024): the largest top-1 / median ratio of the middle
layers, and where it sits."""

from __future__ import annotations

import numpy as np
import pandas as pd

from poslens.known_results.claims.sinks import GU_START, SINKS_WRITTEN, combined, condition_name
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Rule, per_model, shown
from stats.intervals import binomial, interval, judge

MASSIVE_LOG10 = 3.0  # Sun et al.'s "10^3-10^5 times the median": the lower end


RULE = Rule("Gu-comparable condition, T = 64: per sequence the largest top-1 / median ratio over the middle "
            "third of the layers; agrees when the interval of its geometric mean lies above "
            f"10^{MASSIVE_LOG10:g} and the interval of the share of sequences whose largest activation sits at "
            "the first token lies above 50%; differs when either lies below", SINKS_WRITTEN)


def _massive(r: Results, m: str, start: bool) -> pd.DataFrame | None:
    try:
        d = r["massive-activations"]
    except FileNotFoundError:  # a run without this analysis: the row says "not run"
        return None
    d = d[(d.model == m) & (d.start_token == start) & (d["rank"] == 1)]
    if d.empty:
        return None
    n = int(d.n_layers.iloc[0])
    return d[(d.layer >= n // 3) & (d.layer < n - n // 3)]  # the middle third of the layers


def _massive_units(d: pd.DataFrame):
    """Per sequence, the largest top-1 ratio over the middle layers (log10) and whether it sits at the first token."""
    best = d.loc[d.groupby("sequence")["ratio"].idxmax()]
    return np.log10(best["ratio"].to_numpy()), best["first_token"].astype(bool).to_numpy(), best


def measure(r: Results, m: str) -> str:
    parts = []
    for start in (GU_START[m], not GU_START[m]):
        d = _massive(r, m, start)
        if d is None:
            continue
        logs, first, best = _massive_units(d)
        ratio = interval(logs)
        dims = best["dim"].value_counts()
        parts.append(f"{condition_name(r, m, start, 'massive-activations')}"
                     f"{' (Gu-comparable)' if start == GU_START[m] else ''}: top-1 / median "
                     f"over layers {int(d.layer.min())}-{int(d.layer.max())} 10^{ratio.estimate:.2f} "
                     f"[10^{ratio.lo:.2f}, 10^{ratio.hi:.2f}] ({ratio.short}; geometric mean over n = {ratio.n} "
                     f"sequences); at the "
                     f"first token in {shown(binomial(int(first.sum()), len(first)))}; dimension {int(dims.index[0])} "
                     f"in {shown(binomial(int(dims.iloc[0]), len(best)))} (the most frequent, chosen on these "
                     f"sequences)")
    return "; ".join(parts) or "not run"


def protocol_facts(r: Results) -> dict:
    """The kept run's windows and their length (its CSV), per model where they differ."""
    try:
        d = r["massive-activations"]
    except FileNotFoundError:
        return dict(n="no", length="?")
    first = {m: d[d.model == m].iloc[0] for m in PRETRAINED if (d.model == m).any()}
    return dict(n=per_model({m: int(x.n_docs) for m, x in first.items()}),
                length=per_model({m: int(x.length) for m, x in first.items()}))


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        d = _massive(r, m, GU_START[m])
        if d is None:
            out.append(f"{LABELS[m]}: not run")
            continue
        logs, first, _ = _massive_units(d)
        parts = [judge(interval(logs), above=MASSIVE_LOG10), judge(binomial(int(first.sum()), len(first)), above=0.5)]
        outcome = combined(parts)
        out.append(f"{LABELS[m]}: {outcome} (size: {parts[0]}; at the first token: {parts[1]})")
    return "; ".join(out)


ROW = Claim(
    finding="massive activations at the first token", source="Sun et al., COLM 2024, Massive Activations in "
                                                             "Large Language Models",
    quote="very few activations exhibit significantly larger values than others (e.g., 100,000 times larger)",
    where="abstract; §2 (locations: the starting token and delimiter tokens, middle layers), Fig. 1, Table 1; "
          "§4 (attention concentrates on their tokens)",
    paper="LLaMA2-7B: top-1 2622.0 vs median 0.2 in a middle layer (Table 1); in a few fixed dimensions, at the "
          "starting token (and in some models the first period or newline); ~10^3-10^5 x the median across the "
          "LLMs they study; they give the attention sink its bias (§4)",
    protocol=Protocol(
             "`massive-activations`: the residual stream leaving each layer (`hook_resid_post`), per sequence its "
             "largest |activation| over positions and dimensions and the median |activation|, on {n} Wikipedia "
             "windows of {length} tokens per start-token condition (Sun et al.: RedPajama samples); the middle third "
             "of the layers read; intervals over sequences (of the mean log10 ratio; exact binomial for the share at "
             "the first token)", protocol_facts, cited=("10",)),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
