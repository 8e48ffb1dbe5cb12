"""The rows of the known-results table (``poslens.known_results``): one ``Claim`` per published claim, one
``Observation`` per finding of poslens' own. Quotes, places and numbers are the papers'; addresses and the authors'
code read are in ``shared/reference/known-results-papers.md`` of the steering repo."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.intervals import Interval, binomial, bootstrap, judge
from poslens.known_types import (
    LABELS,
    NAMES,
    Claim,
    Observation,
    Results,
    Revision,
    Rule,
    difference,
    has_interval,
    head,
    no_interval,
    pct,
    rate_interval,
    shown,
    verdict_of,
)

PRETRAINED = ("smollm2", "gemma3-270m")

# the table's header (``poslens.known_results.models_header``): what each model is, beyond its provenance, and why it
# matters for the rows; "" is the note under the models
MODEL_NOTES = {
    "smollm2": "The instruction-tuned variant, not the base model. Its start token `<|im_start|>` (id 1, the "
               "tokenizer's BOS) is the chat-turn opener, not a document start of pretraining: \"with its start "
               "token\" means with `<|im_start|>` prepended. Gu et al.'s code (`tokenizer(prompt)`) adds no BOS for "
               "this tokenizer, so its Gu-comparable cells are those without a start token.",
    "gemma3-270m": "The pretrained (base) model. Its tokenizer adds `<bos>` (id 2), as Gu et al.'s "
                   "`tokenizer(prompt)` would: its Gu-comparable cells are those with `<bos>` first. 15 of its 18 "
                   "layers attend within a sliding window of 512 keys; layers 5, 11 and 17 are global.",
    "": "Both are 4-bit GGUFs de-quantised to float32, which no paper covers: heads near a threshold are what "
        "quantisation can move. Using an Instruct model for SmolLM2 is a tolerable departure for the sink rows: Gu "
        "et al.'s Table 1 (Right) finds chat variants sink like their base models (e.g. LLaMA2-7B 92.47% base, "
        "92.88% chat), and Wu et al. find chat variants keep their retrieval heads; for the other rows it is "
        "untested.",
}


# -- induction and previous-token heads (Olsson et al. 2022) -------------------------------------------------------
INDUCTION_CUT = 0.4  # poslens' own: the paper gives no threshold


def _induction(r: Results, m: str) -> str:
    d = r.model("induction", m)
    best = d.loc[d["induction_score"].idxmax()]
    n = int((d["induction_score"] >= INDUCTION_CUT).sum())
    return (f"best prefix-matching score {head(best)} {best.induction_score:.2f}; {n} of {len(d)} heads "
            f">= {INDUCTION_CUT}; loss on the repeat {d.first_copy_loss.iloc[0]:.2f} "
            f"-> {d.second_copy_loss.iloc[0]:.2f} nats")


def _induction_verdict(r: Results) -> str:
    ok = all((r.model("induction", m)["induction_score"] >= INDUCTION_CUT).any() for m in PRETRAINED)
    return ("agrees (existence): both models have heads scoring >= 0.4" if ok
            else "does not reproduce: a model has no head scoring >= 0.4")


def _previous(r: Results, m: str) -> str:
    d = r.model("induction", m)
    best = d.loc[d["previous_token_score"].idxmax()]
    return f"best previous-token score {head(best)} {best.previous_token_score:.2f}"


def _previous_verdict(r: Results) -> str:
    ok = all(r.model("induction", m)["previous_token_score"].max() >= 0.5 for m in PRETRAINED)
    return ("agrees (existence only)" if ok
            else "does not reproduce: no head puts half its attention on the previous token")


CLAIMS: list[Claim] = [
    Claim(
        finding="induction heads", source="Olsson et al. 2022, In-context Learning and Induction Heads",
        quote="[prefix matching:] the average fraction of a head's attention weight given to the token … where "
              "the prefix matches the present context -- on random, synthetic data",
        where="§ Definitions (prefix matching; copying is the second property)",
        paper="per-head scores in figures only (no table); induction heads found in every model from 2 layers up",
        protocol="TransformerLens' protocol: random ordinary tokens repeated once, score = mean attention from "
                 "the second copy to the token after the first occurrence. Copying is not scored per head; the loss on "
                 "the repeat is the model's. The 0.4 cut is poslens'",
        models=PRETRAINED, measure=_induction, verdict=_induction_verdict),
    Claim(
        finding="previous-token heads", source="Olsson et al. 2022",
        quote="[the induction circuit's first head] copies information from the previous token",
        where="§ Mechanistic theory (the two-head induction circuit)",
        paper="no score defined; existence only",
        protocol="previous-token score = mean attention from each token to the one before it, on the same repeated "
                 "random tokens: poslens' own score",
        models=PRETRAINED, measure=_previous, verdict=_previous_verdict),
]


# -- attention sinks (Gu et al., ICLR 2025; Xiao et al., ICLR 2024) ------------------------------------------------
GU_TABLE1 = {"GPT2-XL": (77.00, 70.29), "Mistral-7B": (97.49, 75.21), "LLaMA2-7B": (92.47, 90.13),
             "LLaMA3-8B": (99.02, 91.23)}
GU_REPEAT = {"GPT2-XL": 62.28, "Mistral-7B": 0.00, "LLaMA2-7B": 0.00, "LLaMA3-8B": 0.00}
GU_T = 64
# Gu's code tokenizes with ``tokenizer(prompt)``: no BOS for SmolLM2's tokenizer, <bos> for Gemma's. These are the
# conditions their numbers are comparable with (review, cross-cutting 2)
GU_START = {"smollm2": False, "gemma3-270m": True}
SINK_FLOOR = 0.10  # "sinks present": Sink_1's interval above 10% (a shuffled-weight copy has < 5%: tests/acceptance)
REPEAT_CEILING = 0.05  # "no sink on one repeated token": Sink_1's interval below 5% (Gu: 0.00% for rotary models)
DEPTH_CUT = 0.5  # Xiao's "consistently focuses": most heads of a layer sink; "local": most do not
WRITTEN = "2026-11-27, before the 100-sequence run"


def _condition(r: Results, m: str, inp: str, start: bool, length: int = GU_T) -> pd.DataFrame | None:
    d = r["sink-rate"]
    d = d[(d.model == m) & (d.estimator == "gu") & (d.length == length) & (d.input == inp) & (d.start_token == start)]
    return None if d.empty else d


def _units(d: pd.DataFrame, second: bool = False):
    from analyses.sink_rate import sequence_rates

    return sequence_rates(d, "sink_2_by_sequence" if second else "sink_by_sequence")


def _rate(r: Results, m: str, inp: str, start: bool, length: int = GU_T, layers=None,
          second: bool = False) -> Interval | None:
    """Sink_1 (or Sink_2) of one condition, over ``layers`` (default all), with its bootstrap interval over
    sequences; no bounds where the CSV keeps per-head means only."""
    d = _condition(r, m, inp, start, length)
    if d is None:
        return None
    if layers is not None:
        d = d[d.layer.isin(list(layers))]
    units = _units(d, second)
    if units is None:
        column = "sink_2_share" if second else "sink_share"
        return None if column not in d else no_interval(d[column].mean(), int(d["n_docs"].iloc[0]))
    return rate_interval(units)


def _starts(r: Results, m: str) -> list[bool]:
    d = r.model("sink-rate", m)
    return sorted(set(d["start_token"]), reverse=True)


def _start_text(r: Results, m: str, analysis: str = "sink-rate") -> str:
    d = r.model(analysis, m)
    return f"`{d['start_text'].iloc[0]}`" if "start_text" in d else "its start token"


def _cond_name(r: Results, m: str, start: bool, analysis: str = "sink-rate") -> str:
    return f"{_start_text(r, m, analysis)} first" if start else "no start token"


def _table1(r: Results, m: str) -> str:
    parts = []
    for start in _starts(r, m):
        cells = [f"{inp} {shown(_rate(r, m, inp, start))}" for inp in ("text", "random")]
        gu = " (Gu-comparable)" if GU_START.get(m) == start else ""
        parts.append(f"{_cond_name(r, m, start)}{gu}: " + "; ".join(cells))
    return f"Sink_1 at T = {GU_T}: " + ". ".join(parts)


def _table1_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        start = GU_START[m]
        text, rand = _rate(r, m, "text", start), _rate(r, m, "random", start)
        votes = [verdict_of(text, above=SINK_FLOOR), verdict_of(rand, above=SINK_FLOOR)]
        verdict = ("agrees" if all(v == "agrees" for v in votes) else
                   "differs" if any(v == "differs" for v in votes) else next(v for v in votes if v != "agrees"))
        if text is not None and has_interval(text):
            gpt2 = GU_TABLE1["GPT2-XL"][0] / 100
            where = ("comparable to GPT2-XL's 77.00% (the interval covers it)" if text.lo <= gpt2 <= text.hi else
                     "below GPT2-XL's 77.00%" if text.hi < gpt2 else "above GPT2-XL's 77.00%")
        else:
            where = "not compared with GPT2-XL's 77.00% (no interval)"
        out.append(f"{LABELS[m]}: {verdict} (sinks present: Sink_1 above {SINK_FLOOR:.0%} on text and on random "
                   f"tokens); {where}")
    return "; ".join(out)


def _position(r: Results, m: str) -> str:
    starts = _starts(r, m)
    if len(starts) < 2:
        return "no start token: only the first ordinary token can be tested"
    second = _condition(r, m, "start-second", True)
    two = _rate(r, m, "start-second", True, second=True)
    moved = (f"; start token second (one ordinary token first): Sink_1 {shown(_rate(r, m, 'start-second', True))}, "
             f"Sink_2 {shown(two)}" if second is not None else "; start token second: not run")
    return (f"Sink_1 at T = {GU_T} (text): {_start_text(r, m)} first {shown(_rate(r, m, 'text', True))}; an ordinary "
            f"token first {shown(_rate(r, m, 'text', False))}" + moved)


def _position_verdict(r: Results) -> str:
    smol = verdict_of(_rate(r, "smollm2", "text", False), above=SINK_FLOOR)
    one = _rate(r, "gemma3-270m", "start-second", True)
    two = _rate(r, "gemma3-270m", "start-second", True, second=True)
    parts = [verdict_of(two, above=SINK_FLOOR), verdict_of(one, below=SINK_FLOOR)]
    gemma = ("agrees" if all(p == "agrees" for p in parts) else
             "differs" if any(p == "differs" for p in parts) else next(p for p in parts if p != "agrees"))
    return (f"{LABELS['smollm2']}: {smol} (predicted by Gu §5 / Xiao §3.1: a sink on whatever comes first); "
            f"{LABELS['gemma3-270m']}: {gemma} (predicted: the sink follows `<bos>` to position 2, Sink_2 above "
            f"{SINK_FLOOR:.0%} and Sink_1 below)")


def _global_layers(r: Results, m: str, length: int = GU_T):
    d = _condition(r, m, "text", GU_START[m], length)
    if d is None or "key_window" not in d:
        return None
    return sorted(set(d[d.key_window == 0].layer))


def _lengths(r: Results, m: str) -> list[int]:
    d = r.model("sink-rate", m, estimator="gu", input="text")
    return sorted(set(d[d.start_token == GU_START[m]].length))


def _lengths_row(r: Results, m: str) -> str:
    start = GU_START[m]
    cells = [f"T = {t}: {shown(_rate(r, m, 'text', start, t))}" for t in _lengths(r, m)]
    out = f"Sink_1 (text, {_cond_name(r, m, start)}): " + ", ".join(cells)
    layers = _global_layers(r, m)
    if layers is not None and len(layers) < len(set(r.model("sink-rate", m).layer)):
        out += (f"; its global layers ({', '.join(map(str, layers))}) only: "
                + ", ".join(f"T = {t}: {shown(_rate(r, m, 'text', start, t, layers))}" for t in _lengths(r, m)))
    steps = _steps(r, m)
    if steps:
        out += "; the fall per step: " + ", ".join(f"{a}->{b} {iv.format('{:+.1f}', 100, ' pp')}"
                                                   for (a, b), iv in steps)
    return out


def _judged_layers(r: Results, m: str):
    """Gemma 3's sliding layers cannot see token 0 past 512 keys: where the longest length run exceeds a layer's
    window, its fall is judged on the global layers; at lengths within every window, on every layer."""
    d = _condition(r, m, "text", GU_START[m])
    if d is None or "key_window" not in d:
        return None
    windows = [w for w in set(d.key_window) if w > 0]
    if not windows or max(_lengths(r, m)) <= min(windows):
        return None
    return _global_layers(r, m)


def _steps(r: Results, m: str):
    """Each length step's fall (earlier minus later Sink_1) with its interval, on the layers judged."""
    start, layers, out = GU_START[m], _judged_layers(r, m), []
    ts = _lengths(r, m)
    for a, b in zip(ts, ts[1:]):
        ua, ub = (_condition(r, m, "text", start, t) for t in (a, b))
        if layers is not None:
            ua, ub = ua[ua.layer.isin(layers)], ub[ub.layer.isin(layers)]
        xa, xb = _units(ua), _units(ub)
        if xa is None or xb is None:
            continue
        out.append(((a, b), difference(xa.mean(axis=1), xb.mean(axis=1))))
    return out


def _lengths_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        start, layers, ts = GU_START[m], _judged_layers(r, m), _lengths(r, m)
        if len(ts) < 2:
            out.append(f"{LABELS[m]}: not run at two lengths")
            continue
        ua, ub = (_condition(r, m, "text", start, t) for t in (ts[0], ts[-1]))
        if layers is not None:
            ua, ub = ua[ua.layer.isin(layers)], ub[ub.layer.isin(layers)]
        xa, xb = _units(ua), _units(ub)
        where = f" on its global layers {', '.join(map(str, layers))}" if layers is not None else ""
        if xa is None or xb is None:
            out.append(f"{LABELS[m]}: inconclusive (no interval){where}")
            continue
        fall = difference(xa.mean(axis=1), xb.mean(axis=1))
        out.append(f"{LABELS[m]}: {judge(fall, above=0.0)}{where} (T = {ts[0]} -> {ts[-1]}: "
                   f"{fall.format('{:+.1f}', 100, ' pp')})")
    return "; ".join(out)


def _depth_parts(r: Results, m: str):
    """(bottom two layers' Sink_1, the layers above's Sink_1, each layer above's verdict against DEPTH_CUT)."""
    d = _condition(r, m, "text", GU_START[m])
    bottom = _rate(r, m, "text", GU_START[m], layers=(0, 1))
    rest_layers = sorted(set(d.layer) - {0, 1})
    rest = _rate(r, m, "text", GU_START[m], layers=rest_layers)
    per_layer = {layer: verdict_of(_rate(r, m, "text", GU_START[m], layers=(layer,)), above=DEPTH_CUT)
                 for layer in rest_layers}
    return bottom, rest, per_layer


def _depth(r: Results, m: str) -> str:
    bottom, rest, per_layer = _depth_parts(r, m)
    above = [layer for layer, v in per_layer.items() if v == "agrees"]
    below = [layer for layer, v in per_layer.items() if v == "differs"]
    return (f"T = {GU_T}, text, {_cond_name(r, m, GU_START[m])}: layers 0-1 {shown(bottom)} sink heads; layers 2-"
            f"{max(per_layer)} {shown(rest)}; of the {len(per_layer)} layers above, {len(above)} have most heads "
            f"sinking (interval above 50%), {len(below)} most not (below: "
            f"{', '.join(map(str, below)) or 'none'}), {len(per_layer) - len(above) - len(below)} inconclusive")


def _depth_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        bottom, rest, _ = _depth_parts(r, m)
        parts = [verdict_of(bottom, below=DEPTH_CUT), verdict_of(rest, above=DEPTH_CUT)]
        verdict = ("agrees" if all(p == "agrees" for p in parts) else
                   "differs" if any(p == "differs" for p in parts) else next(p for p in parts if p != "agrees"))
        out.append(f"{LABELS[m]}: {verdict} (bottom two layers: {parts[0]}; the layers above: {parts[1]})")
    return "; ".join(out)


def _repeat_cell(r: Results, m: str, start: bool) -> str:
    out = f"{_cond_name(r, m, start)} {shown(_rate(r, m, 'repeat', start))}"
    units = _units(_condition(r, m, "repeat", start))
    if units is not None and not units.any():  # a bootstrap of zeros is [0, 0]: bound the sequences instead
        none = binomial(0, len(units))
        out += (f" (no sink head in any of the {len(units)} sequences; the share of sequences with one: exact "
                f"binomial [0, {100 * none.hi:.1f}%])")
    return out


def _repeat(r: Results, m: str) -> str:
    cells = [_repeat_cell(r, m, s) for s in _starts(r, m) if _condition(r, m, "repeat", s) is not None]
    return f"Sink_1 at T = {GU_T} on one repeated token: " + ("; ".join(cells) if cells else "not run")


def _repeat_verdict(r: Results) -> str:
    return "; ".join(f"{LABELS[m]}: {verdict_of(_rate(r, m, 'repeat', False), below=REPEAT_CEILING)}"
                     for m in PRETRAINED)


GU_RULE = ("the Gu-comparable condition of each model (their code's tokenizer(prompt): SmolLM2 with no start token, "
           "Gemma 3 with `<bos>` first), T = 64, ε = 0.3 (α_1 > ε per sequence), 95% bootstrap intervals over the "
           "sequences")

CLAIMS += [
    Claim(
        finding="attention sinks in pretrained LMs", source="Gu et al., ICLR 2025, When Attention Sink Emerges",
        quote="α_1 = 1/T Σ_t A_{t,1} … a head is a sink when α_1 > ε [ε = 0.3] … For fair comparisons, we need to "
              "fix T … e.g., T = 64",
        where="§3 (metric), Table 1 (Sink_1^ε at T = 64; Right: base vs chat), Fig. 4 (Left: small models)",
        paper="Table 1, natural / random tokens: " + ", ".join(f"{k} {a:.2f} / {b:.2f}%"
                                                               for k, (a, b) in GU_TABLE1.items())
              + ". Table 1 (Right): chat variants sink like their base models (LLaMA2-7B 92.47 base vs 92.88 chat). "
                "Fig. 4 (Left): sinks in small models too (Pythia-14M up, GPT-2-124M, OPT-125M; figure only)",
        protocol="Gu's estimator (`sink-rate --estimator gu`, the default): row 0 included, each sequence thresholded, "
                 "then averaged, on 100 sequences per condition as theirs. Their natural text is their probe set (the "
                 "Pile); poslens' is English Wikipedia leads (their App. C.2: domain barely matters at ε = 0.3). The "
                 "models are 135M / 270M parameters, nearer Fig. 4 (Left) than Table 1's 1.5B-8B; SmolLM2 is an "
                 "Instruct model (Table 1 Right: tolerable) and both are 4-bit GGUFs (no paper covers that)",
        models=PRETRAINED, measure=_table1, verdict=_table1_verdict,
        rule=Rule(f"on {GU_RULE}: agrees when Sink_1's interval lies above {SINK_FLOOR:.0%} on both natural text "
                  "and random tokens, differs when either lies below; the comparison with GPT2-XL's 77.00% says "
                  "\"comparable\" only when the interval covers it", WRITTEN,
                  (Revision("2026-11-27", "the higher rate over the start-token conditions placed within / below / "
                            "above Table 1's natural-text range, then \"sinks present in both\" appended",
                            "\"SmolLM2-135M below Table 1's natural-text range (77.00-99.02%); Gemma 3 270M below "
                            "Table 1's natural-text range (77.00-99.02%): sinks present in both\" (16 sequences, no "
                            "intervals)",
                            "the review: \"present\" was printed whatever the rates, and \"below\" sat within "
                            "sampling error"),))),
    Claim(
        finding="the sink sits where pretraining fixes a token", source="Gu et al., ICLR 2025; Xiao et al., ICLR 2024",
        quote="[with a token fixed at the second position in pretraining] Sink_1 0.00%, Sink_2 69.03%",
        where="Table 10 (App. D); §5 \"Randomness in data distribution\"; Xiao §3.1",
        paper="a model pretrained with a fixed token at position 2 sinks there and not on the first (Sink_1 0.00%, "
              "Sink_2 69.03%); with the first token re-sampled at random the model still sinks on it (Sink_1 27.03%, "
              "§5), and Xiao §3.1 calls Llama-2's first token \"a mostly random token\": a model pretrained without a "
              "fixed first token is predicted to sink on whatever comes first",
        protocol="no pretraining is varied. SmolLM2: its text with no start token (the first token is ordinary), "
                 "judged against Gu §5 / Xiao §3.1's prediction (whether its pretraining chunks start at arbitrary "
                 "tokens is not verified). Gemma 3 (its tokenizer adds `<bos>`; pretrained with it first, which is "
                 "circumstantial): `<bos>` moved to position 2 at inference, one ordinary token before it, Sink_2 = "
                 "share of heads with α_2 > ε (α_2 = mean over rows 2..T of A_{t,2}). This tests whether the sink "
                 "follows the token pretraining fixed; Table 10 moves it in pretraining instead",
        models=PRETRAINED, measure=_position, verdict=_position_verdict,
        rule=Rule(f"T = 64, ε = 0.3, text, intervals over sequences. SmolLM2 (no start token): agrees when Sink_1's "
                  f"interval lies above {SINK_FLOOR:.0%}. Gemma 3 (`<bos>` second): agrees when Sink_2's interval "
                  f"lies above {SINK_FLOOR:.0%} and Sink_1's below {SINK_FLOOR:.0%}; differs when either lies on "
                  "the wrong side", WRITTEN,
                  (Revision("2026-11-27", "Gemma: Sink_1 with `<bos>` above 30% and without it under a tenth of that; "
                            "SmolLM2: \"the paper makes no prediction\"",
                            "\"agrees for Gemma 3 (pretrained with its BOS first): its sink needs the BOS; SmolLM2 "
                            "sinks on whatever comes first (69.1% / 73.7%); ... the paper makes no prediction for "
                            "it\" (16 sequences, no intervals)",
                            "the review: Gu §5 and Xiao §3.1 do predict SmolLM2's sink, and removing the BOS tests "
                            "\"needs the BOS\", not \"the sink sits where the fixed token sits\""),))),
    Claim(
        finding="sinks and evaluation length", source="Gu et al., ICLR 2025",
        quote="Sink_1^ε (averaged on 100 sequences) tends to decrease with larger token lengths T",
        where="Fig. 3",
        paper="curves only (GPT2-XL, LLaMA2-7B, LLaMA3-8B, all full attention); the reason they fix T = 64. "
              "(Barbero et al., COLM 2025, vary the *training* context length of models they pretrain: not testable "
              "on fixed checkpoints, and not tested here)",
        protocol="Gu's estimator, every query row, on the Gu-comparable condition: T = 64 (100 sequences) and T = 256 "
                 "(50 sequences; Gu: 100 at every T). Gemma 3's 15 sliding layers see only 512 keys, so past row 512 "
                 "they could not reach token 0 whatever the model learned: at T <= 512 every layer is read, its "
                 "global layers (5, 11, 17) shown apart",
        models=PRETRAINED, measure=_lengths_row, verdict=_lengths_verdict,
        rule=Rule("Gu-comparable condition, text, ε = 0.3: agrees when the bootstrap interval of Sink_1 at T = 64 "
                  "minus Sink_1 at the longest length run (independent sequences at each length) lies above 0, "
                  "differs when it lies at or below 0; where the longest length exceeds Gemma 3's sliding window (512 "
                  "keys), Gemma is judged on its global layers only, at T <= 512 on every layer; each step's fall "
                  "is shown with its interval, not judged", WRITTEN,
                  (Revision("2026-11-27", "the rate at the longest length below the rate at the shortest, all layers, "
                            "either start condition",
                            "\"agrees: Sink_1 falls with T in both models\" (Gemma's fall was its sliding layers "
                            "losing token 0 past 512)", "the review: the verdict measured Gemma's sliding window"),))),
    Claim(
        finding="sinks above the bottom layers", source="Xiao et al., ICLR 2024, StreamingLLM",
        quote="beyond the bottom two layers, the model consistently focuses on the initial tokens across all layers "
              "and heads",
        where="§3.1, Fig. 2 (Llama-2-7B; layers 0-1 local)",
        paper="attention maps of Llama-2-7B (256 sentences of 16 tokens); no per-layer numbers",
        protocol="per-layer share of Gu sink heads at T = 64 (text, the Gu-comparable condition, 100 sequences): Xiao "
                 "shows attention maps, not a sink metric; \"local\" read as most heads not sinking. (Barbero et al., "
                 "COLM 2025, compare models of different depth, not layers of one model)",
        models=PRETRAINED, measure=_depth, verdict=_depth_verdict,
        rule=Rule(f"two-sided, on {GU_RULE}: agrees when the interval of Sink_1 over layers 0-1 lies below "
                  f"{DEPTH_CUT:.0%} and the interval over the layers above lies above {DEPTH_CUT:.0%}; differs when "
                  "either lies on the wrong side; the count of layers above whose own interval clears 50% is shown",
                  WRITTEN,
                  (Revision("2026-11-27", "every layer above the bottom two has at least half its heads sinking "
                            "(per-head means, the higher start condition)",
                            "\"SmolLM2-135M differs: 24 of 28 layers above the bottom two have most heads sinking; "
                            "Gemma 3 270M differs: 13 of 16 layers ...\" (16 sequences, no intervals)",
                            "the review: the rule tested half the claim (not that the bottom two are local)"),))),
    Claim(
        finding="no sink on one repeated token in rotary models", source="Gu et al., ICLR 2025",
        quote="[Table 1, \"repeat\" column: Sink_1^ε on a single token repeated]",
        where="Table 1 (repeat column); §3.3, Prop. 4 / Table 7",
        paper="repeat: " + ", ".join(f"{k} {v:.2f}%" for k, v in GU_REPEAT.items())
              + " (the rotary models have none; GPT2-XL's learned absolute positions give its first token a sink)",
        protocol="one random ordinary token (one per sequence, 100 sequences) repeated T = 64 times, no start token "
                 "(with a start token first the first token is no longer a repeat: shown beside it, not judged)",
        models=PRETRAINED, measure=_repeat, verdict=_repeat_verdict,
        rule=Rule(f"T = 64, ε = 0.3, no start token: agrees when Sink_1's interval lies below {REPEAT_CEILING:.0%} "
                  f"(Gu: 0.00% for rotary models), differs when it lies above", WRITTEN)),
]


# -- massive activations (Sun et al., COLM 2024) -------------------------------------------------------------------
MASSIVE_LOG10 = 3.0  # Sun et al.'s "10^3-10^5 times the median": the lower end


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


def _massive_row(r: Results, m: str) -> str:
    parts = []
    for start in (GU_START[m], not GU_START[m]):
        d = _massive(r, m, start)
        if d is None:
            continue
        logs, first, best = _massive_units(d)
        ratio = bootstrap(logs)
        dims = best["dim"].value_counts()
        parts.append(f"{_cond_name(r, m, start, 'massive-activations')}"
                     f"{' (Gu-comparable)' if start == GU_START[m] else ''}: top-1 / median "
                     f"over layers {int(d.layer.min())}-{int(d.layer.max())} 10^{ratio.estimate:.2f} "
                     f"[10^{ratio.lo:.2f}, 10^{ratio.hi:.2f}] (geometric mean over n = {ratio.n} sequences); at the "
                     f"first token in {shown(binomial(int(first.sum()), len(first)))}; dimension {int(dims.index[0])} "
                     f"in {dims.iloc[0]} of {len(best)}")
    return "; ".join(parts) or "not run"


def _massive_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        d = _massive(r, m, GU_START[m])
        if d is None:
            out.append(f"{LABELS[m]}: not run")
            continue
        logs, first, _ = _massive_units(d)
        parts = [judge(bootstrap(logs), above=MASSIVE_LOG10), judge(binomial(int(first.sum()), len(first)), above=0.5)]
        verdict = ("agrees" if all(p == "agrees" for p in parts) else
                   "differs" if any(p == "differs" for p in parts) else next(p for p in parts if p != "agrees"))
        out.append(f"{LABELS[m]}: {verdict} (size: {parts[0]}; at the first token: {parts[1]})")
    return "; ".join(out)


CLAIMS += [
    Claim(
        finding="massive activations at the first token", source="Sun et al., COLM 2024, Massive Activations in "
                                                                 "Large Language Models",
        quote="very few activations exhibit significantly larger values than others (e.g., 100,000 times larger)",
        where="abstract; §2 (locations: the starting token and delimiter tokens, middle layers), Fig. 1, Table 1; "
              "§4 (attention concentrates on their tokens)",
        paper="LLaMA2-7B: top-1 2622.0 vs median 0.2 in a middle layer (Table 1); in a few fixed dimensions, at the "
              "starting token (and in some models the first period or newline); ~10^3-10^5 x the median across the "
              "LLMs they study; they give the attention sink its bias (§4)",
        protocol="`massive-activations`: the residual stream leaving each layer (`hook_resid_post`), per sequence its "
                 "largest |activation| over positions and dimensions and the median |activation|, on 100 Wikipedia "
                 "windows of 64 tokens per start-token condition (Sun et al.: RedPajama samples); the middle third of "
                 "the layers read; intervals over sequences (bootstrap of the mean log10 ratio; exact binomial for "
                 "the share at the first token)",
        models=PRETRAINED, measure=_massive_row, verdict=_massive_verdict,
        rule=Rule("Gu-comparable condition, T = 64: per sequence the largest top-1 / median ratio over the middle "
                  "third of the layers; agrees when the interval of its geometric mean lies above "
                  f"10^{MASSIVE_LOG10:g} and the interval of the share of sequences whose largest activation sits at "
                  "the first token lies above 50%; differs when either lies below", WRITTEN)),
]

OBSERVATIONS: list[Observation] = []


def _ap_table(r: Results, m: str) -> str:
    d = r.model("ap-spectrum", m).drop_duplicates("component").set_index("component").sort_index()
    n = int(r.model("ap-spectrum", m)["position"].max()) + 1
    first = d.loc[1]
    period = 2 * n / first.dominant_bin if first.dominant_bin else float("inf")
    two = d.loc[2].cumulative
    near = "the entangled AP baseline's 23.4%" if abs(two - 0.234) < abs(two - 0.941) else "DSTG's 94.1%"
    return (f"first two components {pct(two)} of the variance (nearer {near}); the first's dominant DCT bin "
            f"{int(first.dominant_bin)} of {n} (a period of about {period:.1f} positions), "
            f"{pct(first.low_freq_power)} of its power in the 4 lowest bins; the "
            f"third {pct(d.loc[3].explained_variance)} of the variance with {pct(d.loc[3].low_freq_power)} in the "
            "lowest bins")


OBSERVATIONS += [
    Observation(
        finding="MiniLM's learned position table: variance in its leading components and their frequency",
        context="Wang & Chen (EMNLP 2020) ask whether pre-trained position embeddings encode absolute and relative "
                "position (regression probes) and how they affect tasks; they make no claim about the table's "
                "components. The DSTG seed reports 94.1% of its AP table's variance in 2 components against 23.4% for "
                "an entangled AP baseline",
        models=("minilm",), measure=_ap_table),
]


# -- StreamingLLM (Xiao et al., ICLR 2024) ---------------------------------------------------------------------------
def _stream(r: Results, m: str) -> pd.DataFrame:
    d = r.model("attention-window", m)
    return d[d["setting"] == "streaming"] if "setting" in d else d


def _loss(d: pd.DataFrame, condition: str, bucket: str) -> float | None:
    x = d[(d["condition"] == condition) & (d["bucket"] == bucket)]["loss"]
    return None if x.empty else float(x.iloc[0])


def _nats(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _span(d: pd.DataFrame) -> tuple[str, str]:
    """The bucket the verdict reads: past the trained length where the stream went there, else the whole stream."""
    past = "past the trained length"
    return (past, past) if (d["bucket"] == past).any() else ("all", "over the whole stream, inside the trained length")


def _streaming(r: Results, m: str) -> str:
    d = _stream(r, m)
    first = d.iloc[0]
    bucket, said = _span(d)
    cache = int(d["cache_size"].dropna().iloc[0]) if d["cache_size"].notna().any() else None
    return (f"{int(first.stream_tokens):,} tokens (trained {int(first.trained_length):,}), cache {cache}: loss {said} "
            f"dense {_nats(_loss(d, 'dense', bucket))}, window {_nats(_loss(d, 'window', bucket))}, + 1 sink "
            f"{_nats(_loss(d, 'window + 1 sink', bucket))}, + 4 sinks {_nats(_loss(d, 'window + 4 sinks', bucket))} "
            f"nats/token; on the tokens re-computed (one in {int(first.recompute_stride)}): re-computation "
            f"{_nats(_loss(d, 're-computation', 're-computed tokens'))}, + 4 sinks "
            f"{_nats(_loss(d, 'window + 4 sinks', 're-computed tokens'))}")


def _streaming_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        d = _stream(r, m)
        bucket, said = _span(d)
        window, sinks = _loss(d, "window", bucket), _loss(d, "window + 4 sinks", bucket)
        recomputed, sinks_re = (_loss(d, "re-computation", "re-computed tokens"),
                                _loss(d, "window + 4 sinks", "re-computed tokens"))
        if None in (window, sinks, recomputed, sinks_re):
            out.append(f"{NAMES[m]}: not run")
            continue
        recovers = window - sinks > 0.1 and abs(sinks_re - recomputed) < 0.1
        out.append(f"{NAMES[m]} {'agrees' if recovers else 'differs'} ({said}): sinks take the window's loss "
                   f"{window:.2f} -> {sinks:.2f}; re-computation {recomputed:.2f} vs {sinks_re:.2f} on its tokens")
    return "; ".join(out) + " (rule: sinks lower the window's loss by > 0.1 nats and come within 0.1 of re-computation)"


CLAIMS += [
    Claim(
        finding="window attention needs the first tokens (attention sinks)",
        source="Xiao et al., ICLR 2024, StreamingLLM",
        quote="keeping the KV of initial tokens will largely recover the performance of window attention",
        where="abstract; §3.2 (positions within the cache), Table 1, Table 2",
        paper="perplexity. Table 1 (Llama-2-13B, 65K tokens of PG19): window 0+1024 5158.07, 4+1020 5.40. Table "
              "2 (400K tokens; window / + 1 / + 4 initial tokens): Falcon-7B 17.90 / 12.12 / 12.12, MPT-7B 460.29 / "
              "14.99 / 14.99, Pythia-12B 21.62 / 11.95 / 12.09, Llama-2-7B 3359.95 / 11.88 / 9.59",
        protocol="the paper's setting (`attention-window --setting streaming`): one long text streamed past the "
                 "trained length through a rolling KV cache of sinks + recent tokens, positions re-indexed within "
                 "the cache, against dense attention and sliding-window re-computation; loss in nats/token (perplexity "
                 "= exp). Shorter streams than the paper's, and re-computation evaluated on every k-th token only",
        models=PRETRAINED, measure=_streaming, verdict=_streaming_verdict),
]


# -- rotary bands (Barbero et al., ICLR 2025) ------------------------------------------------------------------------
def _bands(r: Results, m: str) -> pd.DataFrame:
    d = r.model("rope-frequencies", m, part="bands")
    # band 0 turns fastest in every layer; layers of another rotary base (Gemma 3's global ones) share the band index
    per_band = d.groupby("band")[["q_norm", "k_norm", "poslens_logit_share"]].mean()
    return per_band.sort_index(ascending=False)  # lowest frequency first


def _quarters(r: Results, m: str):
    b = _bands(r, m)
    q = max(1, len(b) // 4)
    return b.iloc[:q], b.iloc[-q:], len(b)


def _norms(r: Results, m: str) -> str:
    low, high, n = _quarters(r, m)
    return (f"{n} bands; mean query / key norm in the lowest-frequency quarter {low.q_norm.mean():.2f} / "
            f"{low.k_norm.mean():.2f}, in the highest {high.q_norm.mean():.2f} / {high.k_norm.mean():.2f} (mean over "
            f"heads). poslens' own logit share: lowest quarter {pct(low.poslens_logit_share.sum())}, highest "
            f"{pct(high.poslens_logit_share.sum())}")


def _norms_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        low, high, _ = _quarters(r, m)
        ratio = (low.q_norm.mean() + low.k_norm.mean()) / (high.q_norm.mean() + high.k_norm.mean())
        out.append(f"{NAMES[m]} {'agrees' if ratio > 1 else 'differs'} (low / high norm {ratio:.2f}x)")
    return "; ".join(out) + " (rule: the lowest quarter's mean q + k norm exceeds the highest's)"


CLAIMS += [
    Claim(
        finding="rotary bands: queries and keys weigh the low frequencies",
        source="Barbero et al., ICLR 2025, Round and Round We Go",
        quote="Gemma greatly prefers to use the lowest frequencies of RoPE, which we suspect are used to carry "
              "semantic information",
        where="abstract; the Fig. of the mean q / k 2-norm per frequency chunk in Gemma 7B (Llama 3.1 8B in the "
              "appendix)",
        paper="figure only: Gemma 7B, the mean 2-norm of each 2-d chunk of q and k over 10 Shakespeare quotes and the "
              "16 heads of each layer; no percentages",
        protocol="the same statistic (`q_norm`, `k_norm`: each band's 2-norm, mean over tokens, contexts and heads) on "
                 "Wikipedia windows; quarters of the bands compared. The logit share beside it is poslens' own metric",
        models=PRETRAINED, measure=_norms, verdict=_norms_verdict),
]


def _ablation(r: Results, m: str) -> str:
    d = r.model("rope-frequencies", m, part="effects").set_index("condition")
    base = d.loc["none"]
    parts = []
    for cond, label in (("zero-highest", "highest quarter zeroed"), ("zero-lowest", "lowest zeroed"),
                        ("unrotate-lowest", "lowest unrotated (Barbero's 0.75-RoPE, applied post hoc)")):
        if cond in d.index:
            e = d.loc[cond]
            parts.append(f"{label}: loss {e.loss - base.loss:+.3f} nats, previous-token heads' mass "
                         f"{base.positional_heads:.2f} -> {e.positional_heads:.2f}")
    return "; ".join(parts)


OBSERVATIONS += [
    Observation(
        finding="rotary bands removed or unrotated in trained weights",
        context="Barbero et al. (ICLR 2025, Table 2) *train* Gemma 2B from scratch with p-RoPE, p the share of "
                "frequencies kept rotated (Wiki / FlanV2 perplexity: RoPE 4.4627 / 6.4429, 0.75-RoPE 4.4414 / 6.4422, "
                "0.25-RoPE 4.5302 / 6.5111, the highest 25% removed instead 4.4592 / 6.4683). They ablate no "
                "trained model: these edits of trained weights are poslens' own",
        models=PRETRAINED, measure=_ablation),
]


# -- retrieval heads (Wu et al. 2024) -----------------------------------------------------------------------------
WU_SHARES = {"Llama-2-7B-80K": 3.2, "Llama-2-13B-64K": 2.1, "Mistral-7B-v0.2": 4.2, "Mixtral": 6.2, "Qwen1.5-14B": 3.8,
             "Yi-6B-200K": 5.2}


def _wu(r: Results, m: str) -> pd.DataFrame:
    return r.model("retrieval-heads", m, score="wu", masking="query")


def _retrieval(r: Results, m: str) -> str:
    d = _wu(r, m)
    h = d[d.part == "heads"]
    best = h.loc[h.retrieval_score.idxmax()]
    n = int(h.is_retrieval.sum())
    return (f"{n} of {len(h)} heads ({pct(n / len(h))}) score > 0.1, best {head(best)} {best.retrieval_score:.2f}; "
            f"{int(h.n_counted.iloc[0])} of {int(h.n_scored.iloc[0])} prompts retrieved and counted")


def _retrieval_verdict(r: Results) -> str:
    low, high = min(WU_SHARES.values()), max(WU_SHARES.values())
    out = []
    for m in PRETRAINED:
        h = _wu(r, m)
        h = h[h.part == "heads"]
        share, one = 100 * h.is_retrieval.mean(), 100 / len(h)
        verdict = ("agrees" if low <= share <= high else
                   "within one head of the range" if low - one <= share <= high + one else "differs")
        out.append(f"{NAMES[m]} {share:.1f}% ({int(h.is_retrieval.sum())} of {len(h)} heads; the range is "
                   f"{low * len(h) / 100:.1f}-{high * len(h) / 100:.1f} heads): {verdict}")
    return "; ".join(out) + f" (rule: inside {low}-{high}%, the authors' released scores)"


def _masking(r: Results, m: str) -> str:
    d = _wu(r, m)
    d = d[d.part == "masking"]
    parts = []
    for (cond, k), g in d.groupby(["condition", "k"], sort=False):
        acc = ", ".join(f"{a:.2f}" for a in g.niah_accuracy)
        parts.append(f"{cond}{'' if cond == 'none' else f' {int(k)}'}: {acc}")
    return "NIAH accuracy (query masking; each random draw): " + "; ".join(parts)


def _masking_verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        d = _wu(r, m)
        n_retrieval = int(d[d.part == "heads"].is_retrieval.sum())
        d = d[d.part == "masking"]
        base = float(d[d.condition == "none"].niah_accuracy.iloc[0])
        top = d[d.condition == "top"].groupby("k").niah_accuracy.mean()
        rand = d[d.condition == "random"].groupby("k").niah_accuracy.mean()
        ks = [k for k in top.index if k >= n_retrieval]
        k = min(ks) if ks else max(top.index)
        top_hurts, random_spares = top[k] <= base / 2, rand[k] >= 0.75 * base
        out.append(f"{NAMES[m]} " + ("agrees" if top_hurts and random_spares else
                                       "partly: random heads hurt too" if top_hurts else "differs")
                   + f" (k = {int(k)}, {n_retrieval} heads score > 0.1: top {top[k]:.2f}, random {rand[k]:.2f}, "
                     f"none {base:.2f})")
    return "; ".join(out) + (" (rule: k = the number of retrieval heads, the paper's \"completely pruning\", or "
                             "the next k run; masking the top k at least halves NIAH accuracy and k random heads keep "
                             "75% of it)")


CLAIMS += [
    Claim(
        finding="retrieval heads are sparse", source="Wu et al. 2024, Retrieval Head Mechanistically Explains "
                                                     "Long-Context Factuality",
        quote="only about 3% to 6% of the attention heads have a retrieval score larger than 0.1",
        where="§2 (Fig. 3's \"less than 5%\" is for scores above 0.5)",
        paper=("share of heads > 0.1 in the authors' released head scores: "
               + ", ".join(f"{k} {v}%" for k, v in WU_SHARES.items())),
        protocol="Wu's score (`retrieval-heads --score wu`, the default): greedy generation, a hit when the generated "
                 "token is in the needle and the head's most attended key is that needle token, hits / needle tokens, "
                 "only prompts retrieved (ROUGE-1 recall > 0.5) counted; 7-digit needles in 512-token Wikipedia "
                 "haystacks rather than their 1K-100K+ sentence needles",
        models=PRETRAINED, measure=_retrieval, verdict=_retrieval_verdict),
    Claim(
        finding="retrieval heads are causal", source="Wu et al. 2024",
        quote="completely pruning retrieval heads leads to failure in retrieving relevant information and results in "
              "hallucination, while pruning random non-retrieval heads does not affect the model's retrieval ability",
        where="abstract, property (5); Fig. 1 (Llama-2-7B-80K)",
        paper="figures: needle-in-a-haystack scores with the top retrieval heads masked against random heads",
        protocol="Wu's masking (`--masking query`, the default): the head's query zeroed, so it attends uniformly; the "
                 "top-k heads by score against k random heads of the same layers, k = 2% and 5% of the heads; greedy "
                 "exact-match NIAH accuracy on other prompts",
        models=PRETRAINED, measure=_masking, verdict=_masking_verdict),
]
