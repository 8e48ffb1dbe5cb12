"""Queries and keys weigh the low rotary frequencies (Barbero et al. §4, Fig. 3): the lowest / highest quarter norm
ratio per layer."""

from __future__ import annotations

import math

import pandas as pd

from poslens.known_results.claims import WRITTEN
from poslens.known_results.claims.rotary import contexts, window
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, method_revision, pct
from stats.intervals import interval
from stats.units import matrix

RULE = Rule(
    text="Barbero's statistic per layer, queries and keys apart: ratio = mean 2-norm of the lowest-frequency quarter "
         "of the bands / that of the highest-frequency quarter (mean over heads and tokens), with a 95% interval "
         "over contexts (`stats.intervals.interval`). Per model and for q and k separately: agrees when the interval "
         "lies above 1 in "
         "every layer (\"this seems to be true at each layer\"); differs when it lies at or below 1 in at least a "
         "quarter of the layers; otherwise inconclusive (the layers that fail are named)",
    written=WRITTEN,
    revisions=(Revision(
        on="2026-11-27", earlier="the lowest quarter's mean q + k norm exceeds the highest's (all layers pooled, "
                                 "point estimate)",
        earlier_verdict="SmolLM2 agrees (1.92x), Gemma 3 agrees (2.60x)",
        why="the pooled q + k ratio hid that Gemma 3's queries prefer the highest quarter in 8 of 18 layers "
            "(review, row 8); the paper's figure is per layer and shows queries and keys apart"),
        method_revision("a 95% bootstrap interval over contexts",
                        "SmolLM2 queries inconclusive (27 of 30 layers above 1, 3 at or below), keys inconclusive "
                        "(29 and 1); Gemma 3 queries differs (10 and 8), keys agrees (18 and 0)")))


def _bands(r: Results, m: str) -> pd.DataFrame:
    d = r.model("rope-frequencies", m, part="bands")
    # band 0 turns fastest in every layer; layers of another rotary base (Gemma 3's global ones) share the band index
    per_band = d.groupby("band")[["q_norm", "k_norm", "poslens_logit_share"]].mean()
    return per_band.sort_index(ascending=False)  # lowest frequency first


def _quarters(r: Results, m: str):
    b = _bands(r, m)
    q = max(1, len(b) // 4)
    return b.iloc[:q], b.iloc[-q:], len(b)


def _layer_ratios(r: Results, m: str) -> dict[str, list[tuple[int, object]]]:
    """Per layer, for q and k apart, the lowest / highest quarter norm ratio: with per-context values its 95% bootstrap
    interval over contexts (the mean of each context's ratio), else the point estimate from the pooled bands (None)."""
    d = r.model("rope-frequencies", m)
    out: dict[str, list] = {"q": [], "k": []}
    units = r.units("rope-frequencies")
    if units is not None and ((units["model"] == m) & (units["measure"] == "q_norm")).any():
        layers = sorted(set(units[(units["model"] == m) & (units["measure"] == "q_norm")]["layer"].astype(int)))
        for x in ("q", "k"):
            norms = matrix(units, f"{x}_norm", by=("layer", "quarter"), model=m)  # quarters sorted: highest, lowest
            out[x] = [(layer, interval(norms[:, i, 1] / norms[:, i, 0])) for i, layer in enumerate(layers)]
        return out
    bands = d[d["part"] == "bands"]
    for layer, g in bands.groupby("layer"):
        per_band = g.groupby("band")[["q_norm", "k_norm"]].mean().sort_index()
        q = max(1, len(per_band) // 4)
        for x in ("q", "k"):
            out[x].append((int(layer), float(per_band[f"{x}_norm"].iloc[-q:].mean()
                                             / per_band[f"{x}_norm"].iloc[:q].mean())))
    return out


def _estimate(v) -> float:
    return v if isinstance(v, float) else v.estimate


def measure(r: Results, m: str) -> str:
    ratios = _layer_ratios(r, m)
    low, high, n = _quarters(r, m)
    parts = []
    for x, name in (("q", "queries"), ("k", "keys")):
        est = [_estimate(v) for _, v in ratios[x]]
        above = [layer for layer, v in ratios[x] if (v > 1 if isinstance(v, float) else v.lo > 1)]
        below = [layer for layer, v in ratios[x] if (v <= 1 if isinstance(v, float) else v.hi <= 1)]
        units = ratios[x][0][1]
        how = ("point estimates, no per-context values kept" if isinstance(units, float)
               else f"95% {units.short} intervals over n = {units.n} contexts")
        parts.append(f"{name}: lowest / highest quarter norm {min(est):.2f}-{max(est):.2f}x over {len(est)} layers "
                     f"(median {sorted(est)[len(est) // 2]:.2f}; the layers' estimates, descriptive); interval above 1 "
                     f"in {len(above)} layers, at or below 1 in {len(below)}"
                     + (f" (layers {', '.join(map(str, below))})" if below else "") + f" ({how})")
    return (f"{n} bands, per layer. " + "; ".join(parts) + f". poslens' own logit share (pooled over contexts, "
            f"descriptive): lowest quarter {pct(low.poslens_logit_share.sum())}, highest "
            f"{pct(high.poslens_logit_share.sum())}")


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        ratios = _layer_ratios(r, m)
        says = []
        for x, name in (("q", "queries"), ("k", "keys")):
            vals = [v for _, v in ratios[x]]
            if any(isinstance(v, float) for v in vals):
                says.append(f"{name} inconclusive (no per-context values)")
                continue
            says.append(f"{name} {_layer_verdict(ratios[x])}")
        out.append(f"{LABELS[m]}: " + ", ".join(says))
    return "; ".join(out)


def _layer_verdict(ratios: list) -> str:
    """The rule on one model's q (or k) layers, saying what it found: how many layers' intervals lie above 1, how
    many wholly at or below (named), how many undecided; "inconclusive" names why when every layer is decided."""
    above = [layer for layer, v in ratios if v.lo > 1]
    below = [layer for layer, v in ratios if v.hi <= 1]
    open_ = len(ratios) - len(above) - len(below)
    found = (f"{len(above)} of {len(ratios)} layers above 1, {len(below)} wholly at or below"
             + (f" (layers {', '.join(map(str, below))})" if below else "")
             + (f", {open_} undecided" if open_ else ""))
    if not below and not open_:
        return f"agrees ({found})"
    if len(below) >= len(ratios) / 4:
        return f"differs ({found})"
    if open_:
        return f"inconclusive at n = {ratios[0][1].n} contexts ({found})"
    return (f"inconclusive with every layer decided ({found}; differs needs {math.ceil(len(ratios) / 4)}: more "
            f"contexts would not change it)")


ROW = Claim(
    finding="rotary bands: queries and keys weigh the low frequencies",
    source="Barbero et al., ICLR 2025, Round and Round We Go",
    quote="Gemma greatly prefers to use the lowest frequencies of RoPE, which we suspect are used to carry "
          "semantic information",
    where="abstract; §4, Fig. 3 (mean q / k 2-norm per frequency chunk, per layer, Gemma 7B; \"this seems to be "
          "true at each layer\"); Llama 3.1 8B in the appendix",
    paper="figure only: Gemma 7B, the mean 2-norm of each 2-d chunk of q and k over 10 Shakespeare quotes and the "
          "16 heads of each layer; no percentages",
    protocol=Protocol(
        "the same statistic (`q_norm`, `k_norm`: each band's 2-norm, mean over tokens and heads) on {n} Wikipedia "
        "windows of {length} tokens, per layer and per context, queries and keys apart; each layer's bands ordered "
        "by its own frequencies and quarters compared, with 95% intervals over contexts. Gemma 3 differs from Gemma "
        "7B: two rotary bases (local layers 10k, global layers 1M) and "
        "QK-norm on queries and keys. The logit share beside it is poslens' own metric",
        lambda r: dict(n=contexts(r), length=window(r)), cited=("2", "95", "3", "7", "10", "1")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
