"""Positional heads are built from the highest rotary frequencies (Barbero et al., abstract and §5): the previous-token
heads' mass with the highest or the lowest quarter removed."""

from __future__ import annotations

from poslens.known_results.claims.rotary import contexts, per_context, window
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Rule, method_revision
from stats.intervals import interval

RULE = Rule(
    text="at the shorter length (512 tokens), per context: the mean previous-token mass of the model's positional "
         "heads (previous-token mass >= 0.5 unablated, else the 3 highest) with the highest quarter of every "
         "layer's bands removed, and with the lowest quarter removed (the control), each with a 95% interval "
         "over contexts (`stats.intervals.interval`). Agrees when the interval with the highest quarter removed lies "
         "below half the "
         "unablated mass and the interval with the lowest quarter removed lies above half; differs when the "
         "interval with the highest quarter removed lies at or above half; otherwise inconclusive",
    written="2026-11-27 in commit 9f7b42d, before the run that judges it (an earlier run, 4 "
            "contexts with no per-context values, had shown the direction: 0.61 -> 0.04 and 0.62 -> 0.03)",
    revisions=(method_revision("each with a 95% bootstrap interval over contexts",
                               "SmolLM2 agrees (highest removed [0.04, 0.05], lowest removed [0.62, 0.64]); Gemma 3 "
                               "agrees ([0.03, 0.03], [0.54, 0.55])"),))


def _short_length(r: Results, m: str) -> int:
    return int(r.model("rope-frequencies", m, part="effects")["length"].iloc[0])


def _short(r: Results) -> int:
    return min(_short_length(r, m) for m in PRETRAINED)


def _positional_units(r: Results, m: str):
    """Per context at the shorter length: the positional heads' mass unablated, without the highest and without the
    lowest quarter; None where the kept run has no per-context values."""
    return per_context(r, m, "positional_heads", _short_length(r, m))


def measure(r: Results, m: str) -> str:
    per = _positional_units(r, m)
    n = int(r.model("rope-frequencies", m, part="effects")["n_positional_heads"].iloc[0])
    if per is None:
        return "no per-context values kept"
    return (f"{n} positional head{'s' if n != 1 else ''}; previous-token mass at {_short_length(r, m)} tokens: "
            f"unablated {interval(per['none'].to_numpy()).format('{:.2f}')}; highest quarter removed "
            f"{interval(per['zero-highest'].to_numpy()).format('{:.2f}')}; lowest quarter removed "
            f"{interval(per['zero-lowest'].to_numpy()).format('{:.2f}')}")


def verdict(r: Results) -> str:
    out = []
    for m in PRETRAINED:
        per = _positional_units(r, m)
        if per is None:
            out.append(f"{LABELS[m]}: inconclusive (no per-context values)")
            continue
        half = float(per["none"].mean()) / 2
        high, low = interval(per["zero-highest"].to_numpy()), interval(per["zero-lowest"].to_numpy())
        if high.hi < half and low.lo > half:
            say = "agrees"
        elif high.lo >= half:
            say = "differs"
        else:
            say = f"inconclusive at n = {high.n} contexts"
        out.append(f"{LABELS[m]}: {say} (half the unablated mean mass {half:.2f}, the rule's cut; highest removed "
                   f"[{high.lo:.2f}, {high.hi:.2f}], lowest removed [{low.lo:.2f}, {low.hi:.2f}] ({high.short}, "
                   f"n = {high.n}))")
    return "; ".join(out)


ROW = Claim(
    finding="positional heads are built from the highest rotary frequencies",
    source="Barbero et al., ICLR 2025, Round and Round We Go",
    quote="Gemma learns to use RoPE to construct robust 'positional' attention patterns, by exploiting the "
          "highest frequencies",
    where="abstract; §5, Fig. 4 (Gemma 7B, layer 1: heads 5, diagonal, and 8, previous-token)",
    paper="figure only: the positional heads of Gemma 7B put their query and key norm in the highest "
          "frequencies; no ablation of a trained model",
    protocol=Protocol(
             "an ablation the paper does not run: in the trained weights, the highest (or, as a control, the "
             "lowest) quarter of every layer's rotary bands removed from queries and keys "
             "(`rope-frequencies`, conditions zero-highest / zero-lowest), and the previous-token mass of the "
             "heads that are previous-token heads unablated read on Wikipedia windows of {length} tokens, {n} "
             "contexts, with 95% intervals over contexts. Previous-token heads stand for Barbero's "
             "'positional' patterns (their head 8)",
             lambda r: dict(n=contexts(r, "positional_heads", _short(r)), length=window(r, "effects")),
             cited=("95", "8")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
