"""Sinks above the bottom two layers (Xiao et al., StreamingLLM §3.1): Sink_1 of layers 0-1 against the layers above."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_RULE,
    GU_START,
    GU_T,
    SINKS_WRITTEN,
    combined,
    condition,
    condition_name,
    sequences,
    sink_rate,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, shown, verdict_of

DEPTH_CUT = 0.5  # Xiao's "consistently focuses": most heads of a layer sink; "local": most do not


RULE = Rule(f"two-sided, on {GU_RULE}: agrees when the interval of Sink_1 over layers 0-1 lies below "
            f"{DEPTH_CUT:.0%} and the interval over the layers above lies above {DEPTH_CUT:.0%}; differs when "
            "either lies on the wrong side; the count of layers above whose own interval clears 50% is shown",
            SINKS_WRITTEN,
            (Revision("2026-11-27", "every layer above the bottom two has at least half its heads sinking "
                      "(per-head means, the higher start condition)",
                      "\"SmolLM2-135M differs: 24 of 28 layers above the bottom two have most heads sinking; "
                      "Gemma 3 270M differs: 13 of 16 layers ...\" (16 sequences, no intervals)",
                      "the review: the rule tested half the claim (not that the bottom two are local)"),))


def _depth_parts(r: Results, m: str):
    """(bottom two layers' Sink_1, the layers above's Sink_1, each layer above's verdict against DEPTH_CUT)."""
    d = condition(r, m, "text", GU_START[m])
    bottom = sink_rate(r, m, "text", GU_START[m], layers=(0, 1))
    rest_layers = sorted(set(d.layer) - {0, 1})
    rest = sink_rate(r, m, "text", GU_START[m], layers=rest_layers)
    per_layer = {layer: verdict_of(sink_rate(r, m, "text", GU_START[m], layers=(layer,)), above=DEPTH_CUT)
                 for layer in rest_layers}
    return bottom, rest, per_layer


def measure(r: Results, m: str) -> str:
    bottom, rest, per_layer = _depth_parts(r, m)
    above = [layer for layer, v in per_layer.items() if v == "agrees"]
    below = [layer for layer, v in per_layer.items() if v == "differs"]
    return (f"T = {GU_T}, text, {condition_name(r, m, GU_START[m])}: layers 0-1 {shown(bottom)} sink heads; layers 2-"
            f"{max(per_layer)} {shown(rest)}; of the {len(per_layer)} layers above, {len(above)} have most heads "
            f"sinking (interval above 50%), {len(below)} most not (below: "
            f"{', '.join(map(str, below)) or 'none'}), {len(per_layer) - len(above) - len(below)} inconclusive")


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        bottom, rest, _ = _depth_parts(r, m)
        parts = [verdict_of(bottom, below=DEPTH_CUT), verdict_of(rest, above=DEPTH_CUT)]
        outcome = combined(parts)
        out.append(f"{LABELS[m]}: {outcome} (bottom two layers: {parts[0]}; the layers above: {parts[1]})")
    return "; ".join(out)


ROW = Claim(
    finding="sinks above the bottom layers", source="Xiao et al., ICLR 2024, StreamingLLM",
    quote="beyond the bottom two layers, the model consistently focuses on the initial tokens across all layers "
          "and heads",
    where="§3.1, Fig. 2 (Llama-2-7B; layers 0-1 local)",
    paper="attention maps of Llama-2-7B (256 sentences of 16 tokens); no per-layer numbers",
    protocol=Protocol(
        "per-layer share of Gu sink heads at T = {t} (text, the Gu-comparable condition, {n} sequences): Xiao "
        "shows attention maps, not a sink metric; \"local\" read as most heads not sinking. (Barbero et al., "
        "COLM 2025, compare models of different depth, not layers of one model)",
        lambda r: dict(t=GU_T, n=sequences(r)), cited=("2025",)),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
