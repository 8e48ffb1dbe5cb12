"""Pretrained LMs have attention sinks (Gu et al., Table 1): Sink_1 at T = 64 on text and on random tokens."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_RULE,
    GU_START,
    GU_T,
    SINK_FLOOR,
    SINKS_WRITTEN,
    combined,
    condition_name,
    sequences,
    sink_rate,
    start_conditions,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, has_interval, shown, verdict_of

GU_TABLE1 = {"GPT2-XL": (77.00, 70.29), "Mistral-7B": (97.49, 75.21), "LLaMA2-7B": (92.47, 90.13),
             "LLaMA3-8B": (99.02, 91.23)}


RULE = Rule(f"on {GU_RULE}: agrees when Sink_1's interval lies above {SINK_FLOOR:.0%} on both natural text "
            "and random tokens, differs when either lies below; the comparison with GPT2-XL's 77.00% says "
            "\"comparable\" only when the interval covers it", SINKS_WRITTEN,
            (Revision("2026-11-27", "the higher rate over the start-token conditions placed within / below / "
                      "above Table 1's natural-text range, then \"sinks present in both\" appended",
                      "\"SmolLM2-135M below Table 1's natural-text range (77.00-99.02%); Gemma 3 270M below "
                      "Table 1's natural-text range (77.00-99.02%): sinks present in both\" (16 sequences, no "
                      "intervals)",
                      "the review: \"present\" was printed whatever the rates, and \"below\" sat within "
                      "sampling error"),))


def measure(r: Results, m: str) -> str:
    parts = []
    for start in start_conditions(r, m):
        cells = [f"{inp} {shown(sink_rate(r, m, inp, start))}" for inp in ("text", "random")]
        gu = " (Gu-comparable)" if GU_START.get(m) == start else ""
        parts.append(f"{condition_name(r, m, start)}{gu}: " + "; ".join(cells))
    return f"Sink_1 at T = {GU_T}: " + ". ".join(parts)


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        start = GU_START[m]
        text, rand = sink_rate(r, m, "text", start), sink_rate(r, m, "random", start)
        votes = [verdict_of(text, above=SINK_FLOOR), verdict_of(rand, above=SINK_FLOOR)]
        outcome = combined(votes)
        if text is not None and has_interval(text):
            gpt2 = GU_TABLE1["GPT2-XL"][0] / 100
            where = ("comparable to GPT2-XL's 77.00% (the interval covers it)" if text.lo <= gpt2 <= text.hi else
                     "below GPT2-XL's 77.00%" if text.hi < gpt2 else "above GPT2-XL's 77.00%")
        else:
            where = "not compared with GPT2-XL's 77.00% (no interval)"
        out.append(f"{LABELS[m]}: {outcome} (sinks present: Sink_1 above {SINK_FLOOR:.0%} on text and on random "
                   f"tokens); {where}")
    return "; ".join(out)


ROW = Claim(
    finding="attention sinks in pretrained LMs", source="Gu et al., ICLR 2025, When Attention Sink Emerges",
    quote="α_1 = 1/T Σ_t A_{t,1} … a head is a sink when α_1 > ε [ε = 0.3] … For fair comparisons, we need to "
          "fix T … e.g., T = 64",
    where="§3 (metric), Table 1 (Sink_1^ε at T = 64; Right: base vs chat), Fig. 4 (Left: small models)",
    paper="Table 1, natural / random tokens: " + ", ".join(f"{k} {a:.2f} / {b:.2f}%"
                                                           for k, (a, b) in GU_TABLE1.items())
          + ". Table 1 (Right): chat variants sink like their base models (LLaMA2-7B 92.47 base vs 92.88 chat). "
            "Fig. 4 (Left): sinks in small models too (Pythia-14M up, GPT-2-124M, OPT-125M; figure only)",
    protocol=Protocol(
        "Gu's estimator (`sink-rate --estimator gu`, the default): row 0 included, each sequence thresholded, "
        "then averaged, at T = {t} on {n} sequences per condition (theirs: 100). Their natural text is their probe "
        "set (the Pile); poslens' is English Wikipedia leads (their App. C.2: domain barely matters at ε = 0.3). The "
        "models are 135M / 270M parameters, nearer Fig. 4 (Left) than Table 1's 1.5B-8B; SmolLM2 is an "
        "Instruct model (Table 1 Right: tolerable) and both are 4-bit GGUFs (no paper covers that)",
        lambda r: dict(t=GU_T, n=sequences(r)), cited=("0", "100", "2", "0.3", "4", "135", "270", "1.5", "8", "1")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
