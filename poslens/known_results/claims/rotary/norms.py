"""Queries and keys weigh the low rotary frequencies (Barbero et al. §4, Fig. 3): the lowest / highest quarter norm
ratio per layer."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.claims import WRITTEN
from poslens.known_results.models import NAMES, PRETRAINED
from poslens.known_results.types import Claim, Results, Revision, Rule, pct
from stats.intervals import bootstrap
from stats.units import matrix

RULE = Rule(
    text="Barbero's statistic per layer, queries and keys apart: ratio = mean 2-norm of the lowest-frequency quarter "
         "of the bands / that of the highest-frequency quarter (mean over heads and tokens), with a 95% bootstrap "
         "interval over contexts. Per model and for q and k separately: agrees when the interval lies above 1 in "
         "every layer (\"this seems to be true at each layer\"); differs when it lies at or below 1 in at least a "
         "quarter of the layers; otherwise inconclusive (the layers that fail are named)",
    written=WRITTEN,
    revisions=(Revision(
        on="2026-11-27", earlier="the lowest quarter's mean q + k norm exceeds the highest's (all layers pooled, "
                                 "point estimate)",
        earlier_verdict="SmolLM2 agrees (1.92x), Gemma 3 agrees (2.60x)",
        why="the pooled q + k ratio hid that Gemma 3's queries prefer the highest quarter in 8 of 18 layers "
            "(review, row 8); the paper's figure is per layer and shows queries and keys apart"),))


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
            out[x] = [(layer, bootstrap(norms[:, i, 1] / norms[:, i, 0])) for i, layer in enumerate(layers)]
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
               else f"95% intervals over {units.n} contexts")
        parts.append(f"{name}: lowest / highest quarter norm {min(est):.2f}-{max(est):.2f}x over {len(est)} layers "
                     f"(median {sorted(est)[len(est) // 2]:.2f}); above 1 in {len(above)} layers, at or below 1 in "
                     f"{len(below)}" + (f" (layers {', '.join(map(str, below))})" if below else "") + f" ({how})")
    return (f"{n} bands, per layer. " + "; ".join(parts) + f". poslens' own logit share: lowest quarter "
            f"{pct(low.poslens_logit_share.sum())}, highest {pct(high.poslens_logit_share.sum())}")


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
            below = sum(v.hi <= 1 for v in vals)
            says.append(f"{name} " + ("agrees" if all(v.lo > 1 for v in vals) else
                                      "differs" if below >= len(vals) / 4 else
                                      f"inconclusive at n = {vals[0].n} contexts")
                        + f" ({sum(v.lo > 1 for v in vals)} of {len(vals)} layers above 1, {below} at or below)")
        out.append(f"{NAMES[m]}: " + ", ".join(says))
    return "; ".join(out)


ROW = Claim(
    finding="rotary bands: queries and keys weigh the low frequencies",
    source="Barbero et al., ICLR 2025, Round and Round We Go",
    quote="Gemma greatly prefers to use the lowest frequencies of RoPE, which we suspect are used to carry "
          "semantic information",
    where="abstract; §4, Fig. 3 (mean q / k 2-norm per frequency chunk, per layer, Gemma 7B; \"this seems to be "
          "true at each layer\"); Llama 3.1 8B in the appendix",
    paper="figure only: Gemma 7B, the mean 2-norm of each 2-d chunk of q and k over 10 Shakespeare quotes and the "
          "16 heads of each layer; no percentages",
    protocol="the same statistic (`q_norm`, `k_norm`: each band's 2-norm, mean over tokens and heads) on "
             "Wikipedia windows of 512 tokens, per layer and per context, queries and keys apart; each layer's "
             "bands ordered by its own frequencies and quarters compared, with 95% bootstrap intervals over "
             "contexts. Gemma 3 differs from Gemma 7B: two rotary bases (local layers 10k, global layers 1M) and "
             "QK-norm on queries and keys. The logit share beside it is poslens' own metric",
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
