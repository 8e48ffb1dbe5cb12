"""The sink sits where pretraining fixes a token (Gu et al. Table 10, §5; Xiao et al. §3.1): SmolLM2's Sink_1 with its
document separator ``<|endoftext|>`` first, Gemma 3's Sink_2 with ``<bos>`` moved second."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_T,
    SINK_FLOOR,
    SINKS_WRITTEN,
    combined,
    condition,
    sink_rate,
    start_text,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, shown, verdict_of

# the nearest thing to a fixed first token that a model pretrained without a BOS has: the separator before each of its
# pretraining documents, put first by sink-rate's separator-first condition (SmolLM2: <|endoftext|>, id 0)
SEPARATOR = {"smollm2": "<|endoftext|>"}
SEPARATOR_WRITTEN = ("2026-11-29 (issue 45: SmolLM2's half), before the judged run that puts `<|endoftext|>` first "
                     "(bench.steps had run that condition for its time only)")

RULE = Rule(f"T = 64, ε = 0.3, text, intervals over sequences. SmolLM2 (pretrained with no BOS, its documents "
            f"joined by `<|endoftext|>`: the token its pretraining puts before every document, the nearest thing it "
            f"has to a fixed first token; Gu §5 / Xiao §3.1 predict a sink on it): agrees when Sink_1's interval "
            f"with `<|endoftext|>` first (sink-rate's separator-first condition) lies above {SINK_FLOOR:.0%}; "
            f"differs when it lies below {SINK_FLOOR:.0%} (no sink on the token its pretraining fixes); Sink_1 with "
            f"an ordinary token first is shown beside it, not judged. Gemma 3 (`<bos>` second): agrees when "
            f"Sink_2's interval lies above {SINK_FLOOR:.0%} and Sink_1's below {SINK_FLOOR:.0%}; differs when "
            "either lies on the wrong side",
            f"{SEPARATOR_WRITTEN}; Gemma 3's half on {SINKS_WRITTEN}",
            (Revision("2026-11-27", "Gemma: Sink_1 with `<bos>` above 30% and without it under a tenth of that; "
                      "SmolLM2: \"the paper makes no prediction\"",
                      "\"agrees for Gemma 3 (pretrained with its BOS first): its sink needs the BOS; SmolLM2 "
                      "sinks on whatever comes first (69.1% / 73.7%); ... the paper makes no prediction for "
                      "it\" (16 sequences, no intervals)",
                      "the review: Gu §5 and Xiao §3.1 do predict SmolLM2's sink, and removing the BOS tests "
                      "\"needs the BOS\", not \"the sink sits where the fixed token sits\""),
             Revision("2026-11-29", f"SmolLM2 (no start token): agrees when Sink_1's interval lies above "
                      f"{SINK_FLOOR:.0%}",
                      "\"SmolLM2-135M-Instruct (Q4_1): agrees (predicted by Gu §5 / Xiao §3.1: a sink on whatever "
                      "comes first)\" (Sink_1 with an ordinary token first 75.0% [73.7, 76.2], n = 100)",
                      "the review of issue 45: SmolLM2's half read Sink_1 with no start token, the number the "
                      "Gu-comparable text cell of \"attention sinks in pretrained LMs\" already judges, and never "
                      "put `<|endoftext|>` (id 0, its document separator, the nearest thing it has to a fixed first "
                      "token) first")))


def separator_rate(r: Results, m: str):
    """Sink_1 at T = 64 on text with ``m``'s document separator first (sink-rate's separator-first condition), or None
    where the run did not put it first."""
    return sink_rate(r, m, "separator-first", True) if m in SEPARATOR else None


def _separator_text(r: Results, m: str) -> str:
    """The separator as the run wrote it (the CSV's ``separator_text``), else as the rule names it."""
    d = condition(r, m, "separator-first", True)
    return f"`{d['separator_text'].iloc[0]}`" if d is not None and "separator_text" in d else f"`{SEPARATOR[m]}`"


def _separator_cell(r: Results, m: str) -> str:
    rate = separator_rate(r, m)
    said = f" {shown(rate)}" if rate is not None else ": separator-first not run"
    return f"{_separator_text(r, m)} first (the token before each pretraining document){said}"


def _start_cells(r: Results, m: str) -> list[str]:
    """Sink_1 with the start token first, and with it second (Sink_2 beside); none for a model without one."""
    if condition(r, m, "text", True) is None:
        return []
    second = condition(r, m, "start-second", True)
    two = sink_rate(r, m, "start-second", True, second=True)
    moved = (f"start token second (one ordinary token first): Sink_1 {shown(sink_rate(r, m, 'start-second', True))}, "
             f"Sink_2 {shown(two)}" if second is not None else "start token second: not run")
    return [f"{start_text(r, m)} first {shown(sink_rate(r, m, 'text', True))}", moved]


def measure(r: Results, m: str) -> str:
    """Sink_1 on text with each first token the run tried: the separator first (beside an ordinary token first) for a
    model judged on it, else the start token first (beside an ordinary token first), then the start token second."""
    start = _start_cells(r, m)
    if not start and m not in SEPARATOR:
        return "no start token: only the first ordinary token can be tested"
    ordinary = f"an ordinary token first {shown(sink_rate(r, m, 'text', False))}"
    cells = [_separator_cell(r, m), ordinary, *start] if m in SEPARATOR else [start[0], ordinary, start[1]]
    return f"Sink_1 at T = {GU_T} (text): " + "; ".join(cells)


def _smollm2_verdict(r: Results) -> str:
    sep = separator_rate(r, "smollm2")
    said = verdict_of(sep, above=SINK_FLOOR) if sep is not None else "inconclusive: separator-first not run"
    return (f"{LABELS['smollm2']}: {said} (predicted by Gu §5 / Xiao §3.1: a sink on the token its pretraining puts "
            f"before every document, {_separator_text(r, 'smollm2')}: Sink_1 above {SINK_FLOOR:.0%} with it first)")


def verdict(r: Results) -> str:
    one = sink_rate(r, "gemma3-270m", "start-second", True)
    two = sink_rate(r, "gemma3-270m", "start-second", True, second=True)
    parts = [verdict_of(two, above=SINK_FLOOR), verdict_of(one, below=SINK_FLOOR)]
    gemma = combined(parts)
    return (f"{_smollm2_verdict(r)}; {LABELS['gemma3-270m']}: {gemma} (predicted: the sink follows `<bos>` to "
            f"position 2, Sink_2 above {SINK_FLOOR:.0%} and Sink_1 below)")


def _count(r: Results, m: str, inp: str, start: bool) -> str:
    d = condition(r, m, inp, start)
    return "?" if d is None else str(int(d["n_docs"].iloc[0]))


def _separator_protocol(r: Results) -> str:
    d = condition(r, "smollm2", "separator-first", True)
    if d is None:
        return "`<|endoftext|>` first, then its text (sink-rate's separator-first condition; not run in this run)"
    return (f"{_separator_text(r, 'smollm2')} first, then its text (sink-rate's separator-first condition, "
            f"{int(d['n_docs'].iloc[0])} sequences)")


ROW = Claim(
    finding="the sink sits where pretraining fixes a token", source="Gu et al., ICLR 2025; Xiao et al., ICLR 2024",
    quote="[with a token fixed at the second position in pretraining] Sink_1 0.00%, Sink_2 69.03%",
    where="Table 10 (App. D); §5 \"Randomness in data distribution\"; Xiao §3.1",
    paper="a model pretrained with a fixed token at position 2 sinks there and not on the first (Sink_1 0.00%, "
          "Sink_2 69.03%); with the first token re-sampled at random the model still sinks on it (Sink_1 27.03%, "
          "§5), and Xiao §3.1 calls Llama-2's first token \"a mostly random token\": a model pretrained without a "
          "fixed first token is predicted to sink on whatever comes first",
    protocol=Protocol(
        "no pretraining is varied; T = {t}. SmolLM2 (pretrained with no BOS; `<|endoftext|>` separates its documents, "
        "the nearest thing it has to a fixed first token): {separator}, judged against Gu §5 / Xiao §3.1's "
        "prediction, beside its text with an ordinary token first ({ordinary} sequences; whether every pretraining "
        "document follows the separator is not verified). Gemma 3 (its tokenizer adds `<bos>`; pretrained with it "
        "first, which is circumstantial): `<bos>` moved to position 2 at inference, one ordinary token before it "
        "({second} sequences), Sink_2 = share of heads with α_2 > ε (α_2 = mean over rows 2..T of A_{{t,2}}). This "
        "tests whether the sink follows the token pretraining fixed; Table 10 moves it in pretraining instead",
        lambda r: dict(t=GU_T, separator=_separator_protocol(r), ordinary=_count(r, "smollm2", "text", False),
                       second=_count(r, "gemma3-270m", "start-second", True)),
        cited=("5", "3.1", "2", "2", "2", "2", "10")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
