"""Sinks fall with the evaluation length (Gu et al., Fig. 3): Sink_1 at each length run, Gemma 3 judged on its global
layers where the length passes its sliding window."""

from __future__ import annotations

from poslens.known_results.claims.sinks import (
    GU_START,
    GU_T,
    SINKS_WRITTEN,
    condition,
    condition_name,
    sequences,
    sink_rate,
    sink_units,
)
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Revision, Rule, difference, shown
from stats.intervals import judge

RULE = Rule("Gu-comparable condition, text, ε = 0.3: agrees when the bootstrap interval of Sink_1 at T = 64 "
            "minus Sink_1 at the longest length run (independent sequences at each length) lies above 0, "
            "differs when it lies at or below 0; where the longest length exceeds Gemma 3's sliding window (512 "
            "keys), Gemma is judged on its global layers only, at T <= 512 on every layer; each step's fall "
            "is shown with its interval, not judged", SINKS_WRITTEN,
            (Revision("2026-11-27", "the rate at the longest length below the rate at the shortest, all layers, "
                      "either start condition",
                      "\"agrees: Sink_1 falls with T in both models\" (Gemma's fall was its sliding layers "
                      "losing token 0 past 512)", "the review: the verdict measured Gemma's sliding window"),))


def _global_layers(r: Results, m: str, length: int = GU_T):
    d = condition(r, m, "text", GU_START[m], length)
    if d is None or "key_window" not in d:
        return None
    return sorted(set(d[d.key_window == 0].layer))


def _lengths(r: Results, m: str) -> list[int]:
    d = r.model("sink-rate", m, estimator="gu", input="text")
    return sorted(set(d[d.start_token == GU_START[m]].length))


def measure(r: Results, m: str) -> str:
    start = GU_START[m]
    cells = [f"T = {t}: {shown(sink_rate(r, m, 'text', start, t))}" for t in _lengths(r, m)]
    out = f"Sink_1 (text, {condition_name(r, m, start)}): " + ", ".join(cells)
    layers = _global_layers(r, m)
    if layers is not None and len(layers) < len(set(r.model("sink-rate", m).layer)):
        out += (f"; its global layers ({', '.join(map(str, layers))}) only: "
                + ", ".join(f"T = {t}: {shown(sink_rate(r, m, 'text', start, t, layers))}" for t in _lengths(r, m)))
    steps = _steps(r, m)
    if steps:
        out += "; the fall per step: " + ", ".join(f"{a}->{b} {iv.format('{:+.1f}', 100, ' pp')}"
                                                   for (a, b), iv in steps)
    return out


def _judged_layers(r: Results, m: str):
    """Gemma 3's sliding layers cannot see token 0 past 512 keys: where the longest length run exceeds a layer's
    window, its fall is judged on the global layers; at lengths within every window, on every layer."""
    d = condition(r, m, "text", GU_START[m])
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
        ua, ub = (condition(r, m, "text", start, t) for t in (a, b))
        if layers is not None:
            ua, ub = ua[ua.layer.isin(layers)], ub[ub.layer.isin(layers)]
        xa, xb = sink_units(r, ua), sink_units(r, ub)
        if xa is None or xb is None:
            continue
        out.append(((a, b), difference(xa.mean(axis=1), xb.mean(axis=1))))
    return out


def protocol_facts(r: Results) -> dict:
    """The lengths the kept run read, each with its sequences (its CSV), and Gemma 3's sliding and global layers."""
    lengths = sorted(set().union(*(_lengths(r, m) for m in PRETRAINED)))
    said = " and ".join(f"T = {t} ({sequences(r, length=t)} sequences)" for t in lengths)
    d = condition(r, "gemma3-270m", "text", GU_START["gemma3-270m"])
    windows = {} if d is None or "key_window" not in d else d.groupby("layer")["key_window"].first().to_dict()
    sliding = [layer for layer, w in windows.items() if w > 0]
    return dict(lengths=said, sliding=len(sliding), window=max(windows.values(), default="?"),
                globals=", ".join(str(layer) for layer, w in windows.items() if w == 0) or "none")


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        start, layers, ts = GU_START[m], _judged_layers(r, m), _lengths(r, m)
        if len(ts) < 2:
            out.append(f"{LABELS[m]}: not run at two lengths")
            continue
        ua, ub = (condition(r, m, "text", start, t) for t in (ts[0], ts[-1]))
        if layers is not None:
            ua, ub = ua[ua.layer.isin(layers)], ub[ub.layer.isin(layers)]
        xa, xb = sink_units(r, ua), sink_units(r, ub)
        where = f" on its global layers {', '.join(map(str, layers))}" if layers is not None else ""
        if xa is None or xb is None:
            out.append(f"{LABELS[m]}: inconclusive (no interval){where}")
            continue
        fall = difference(xa.mean(axis=1), xb.mean(axis=1))
        out.append(f"{LABELS[m]}: {judge(fall, above=0.0)}{where} (T = {ts[0]} -> {ts[-1]}: "
                   f"{fall.format('{:+.1f}', 100, ' pp')})")
    return "; ".join(out)


ROW = Claim(
    finding="sinks and evaluation length", source="Gu et al., ICLR 2025",
    quote="Sink_1^ε (averaged on 100 sequences) tends to decrease with larger token lengths T",
    where="Fig. 3",
    paper="curves only (GPT2-XL, LLaMA2-7B, LLaMA3-8B, all full attention); the reason they fix T = 64. "
          "(Barbero et al., COLM 2025, vary the *training* context length of models they pretrain: not testable "
          "on fixed checkpoints, and not tested here)",
    protocol=Protocol(
        "Gu's estimator, every query row, on the Gu-comparable condition: {lengths} (Gu: 100 sequences at every "
        "T). Gemma 3's {sliding} sliding layers see only {window} keys, so past row {window} they could not reach "
        "token 0 whatever the model learned: at T <= {window} every layer is read, its global layers ({globals}) "
        "shown apart", protocol_facts, cited=("100", "0")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
