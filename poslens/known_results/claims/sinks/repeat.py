"""No sink on one repeated token in rotary models (Gu et al., Table 1's repeat column)."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_T,
    SINKS_WRITTEN,
    condition,
    condition_name,
    sequences,
    sink_rate,
    sink_units,
    start_conditions,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Rule, shown, verdict_of
from stats.intervals import binomial

GU_REPEAT = {"GPT2-XL": 62.28, "Mistral-7B": 0.00, "LLaMA2-7B": 0.00, "LLaMA3-8B": 0.00}
REPEAT_CEILING = 0.05  # "no sink on one repeated token": Sink_1's interval below 5% (Gu: 0.00% for rotary models)


RULE = Rule(f"T = 64, ε = 0.3, no start token: agrees when Sink_1's interval lies below {REPEAT_CEILING:.0%} "
            f"(Gu: 0.00% for rotary models), differs when it lies above", SINKS_WRITTEN)


def _repeat_cell(r: Results, m: str, start: bool) -> str:
    out = f"{condition_name(r, m, start)} {shown(sink_rate(r, m, 'repeat', start))}"
    units = sink_units(r, condition(r, m, "repeat", start))
    if units is not None and not units.any():  # a bootstrap of zeros is [0, 0]: bound the sequences instead
        none = binomial(0, len(units))
        out += (f" (no sink head in any of the {len(units)} sequences; the share of sequences with one: exact "
                f"binomial [0, {100 * none.hi:.1f}%])")
    return out


def measure(r: Results, m: str) -> str:
    cells = [_repeat_cell(r, m, s) for s in start_conditions(r, m) if condition(r, m, "repeat", s) is not None]
    return f"Sink_1 at T = {GU_T} on one repeated token: " + ("; ".join(cells) if cells else "not run")


def verdict(r: Results) -> str:
    return "; ".join(f"{LABELS[m]}: {verdict_of(sink_rate(r, m, 'repeat', False), below=REPEAT_CEILING)}"
                     for m in PRETRAINED)


ROW = Claim(
    finding="no sink on one repeated token in rotary models", source="Gu et al., ICLR 2025",
    quote="[Table 1, \"repeat\" column: Sink_1^ε on a single token repeated]",
    where="Table 1 (repeat column); §3.3, Prop. 4 / Table 7",
    paper="repeat: " + ", ".join(f"{k} {v:.2f}%" for k, v in GU_REPEAT.items())
          + " (the rotary models have none; GPT2-XL's learned absolute positions give its first token a sink)",
    protocol=Protocol("one random ordinary token (one per sequence, {n} sequences) repeated T = {t} times, no start "
                      "token (with a start token first the first token is no longer a repeat: shown beside it, not "
                      "judged)", lambda r: dict(t=GU_T, n=sequences(r, "repeat", start=dict.fromkeys(PRETRAINED,
                                                                                                   False)))),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
