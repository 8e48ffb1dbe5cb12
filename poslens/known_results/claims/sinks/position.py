"""The sink sits where pretraining fixes a token (Gu et al. Table 10, §5; Xiao et al. §3.1): Sink_1 without a start
token, Sink_2 with ``<bos>`` moved second."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_T,
    SINK_FLOOR,
    SINKS_WRITTEN,
    combined,
    condition,
    sequences,
    sink_rate,
    start_conditions,
    start_text,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, shown, verdict_of

RULE = Rule(f"T = 64, ε = 0.3, text, intervals over sequences. SmolLM2 (no start token): agrees when Sink_1's "
            f"interval lies above {SINK_FLOOR:.0%}. Gemma 3 (`<bos>` second): agrees when Sink_2's interval "
            f"lies above {SINK_FLOOR:.0%} and Sink_1's below {SINK_FLOOR:.0%}; differs when either lies on "
            "the wrong side", SINKS_WRITTEN,
            (Revision("2026-11-27", "Gemma: Sink_1 with `<bos>` above 30% and without it under a tenth of that; "
                      "SmolLM2: \"the paper makes no prediction\"",
                      "\"agrees for Gemma 3 (pretrained with its BOS first): its sink needs the BOS; SmolLM2 "
                      "sinks on whatever comes first (69.1% / 73.7%); ... the paper makes no prediction for "
                      "it\" (16 sequences, no intervals)",
                      "the review: Gu §5 and Xiao §3.1 do predict SmolLM2's sink, and removing the BOS tests "
                      "\"needs the BOS\", not \"the sink sits where the fixed token sits\""),))


def measure(r: Results, m: str) -> str:
    starts = start_conditions(r, m)
    if len(starts) < 2:
        return "no start token: only the first ordinary token can be tested"
    second = condition(r, m, "start-second", True)
    two = sink_rate(r, m, "start-second", True, second=True)
    moved = (f"; start token second (one ordinary token first): Sink_1 {shown(sink_rate(r, m, 'start-second', True))}, "
             f"Sink_2 {shown(two)}" if second is not None else "; start token second: not run")
    return (f"Sink_1 at T = {GU_T} (text): {start_text(r, m)} first {shown(sink_rate(r, m, 'text', True))}; an "
            f"ordinary token first {shown(sink_rate(r, m, 'text', False))}" + moved)


def verdict(r: Results) -> str:
    smol = verdict_of(sink_rate(r, "smollm2", "text", False), above=SINK_FLOOR)
    one = sink_rate(r, "gemma3-270m", "start-second", True)
    two = sink_rate(r, "gemma3-270m", "start-second", True, second=True)
    parts = [verdict_of(two, above=SINK_FLOOR), verdict_of(one, below=SINK_FLOOR)]
    gemma = combined(parts)
    return (f"{LABELS['smollm2']}: {smol} (predicted by Gu §5 / Xiao §3.1: a sink on whatever comes first); "
            f"{LABELS['gemma3-270m']}: {gemma} (predicted: the sink follows `<bos>` to position 2, Sink_2 above "
            f"{SINK_FLOOR:.0%} and Sink_1 below)")


ROW = Claim(
    finding="the sink sits where pretraining fixes a token", source="Gu et al., ICLR 2025; Xiao et al., ICLR 2024",
    quote="[with a token fixed at the second position in pretraining] Sink_1 0.00%, Sink_2 69.03%",
    where="Table 10 (App. D); §5 \"Randomness in data distribution\"; Xiao §3.1",
    paper="a model pretrained with a fixed token at position 2 sinks there and not on the first (Sink_1 0.00%, "
          "Sink_2 69.03%); with the first token re-sampled at random the model still sinks on it (Sink_1 27.03%, "
          "§5), and Xiao §3.1 calls Llama-2's first token \"a mostly random token\": a model pretrained without a "
          "fixed first token is predicted to sink on whatever comes first",
    protocol=Protocol(
        "no pretraining is varied; T = {t}, {n} sequences per condition. SmolLM2: its text with no start token (the "
        "first token is ordinary), judged against Gu §5 / Xiao §3.1's prediction (whether its pretraining chunks "
        "start at arbitrary tokens is not verified). Gemma 3 (its tokenizer adds `<bos>`; pretrained with it first, "
        "which is circumstantial): `<bos>` moved to position 2 at inference, one ordinary token before it, Sink_2 = "
        "share of heads with α_2 > ε (α_2 = mean over rows 2..T of A_{{t,2}}). This tests whether the sink follows "
        "the token pretraining fixed; Table 10 moves it in pretraining instead",
        lambda r: dict(t=GU_T, n=sequences(r, "start-second", start=dict.fromkeys(PRETRAINED, True))),
        cited=("5", "3.1", "2", "2", "2", "2", "10")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
