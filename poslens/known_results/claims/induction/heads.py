"""Induction heads exist (Olsson et al. 2022): the best head's prefix-matching score on repeated random tokens."""

from __future__ import annotations

from poslens.known_results.claims import WRITTEN
from poslens.known_results.claims.induction import INDUCTION_CUT, best_head, judged, overall, sequence_values
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Rule, head, method_revision, per_model
from stats.intervals import interval, share_above

RULE = Rule(
    text=f"per model, the head with the highest mean prefix-matching score on repeated random tokens; its 95% "
         f"interval over sequences (`stats.intervals.interval`). Agrees when, in both models, "
         f"the interval lies above {INDUCTION_CUT} (poslens' cut: the paper gives none); differs when a model's "
         f"interval lies at or below it; otherwise inconclusive at n = the sequences",
    written=WRITTEN,
    revisions=(method_revision("a 95% percentile bootstrap interval over sequences (10,000 resamples, seed 0)",
                               "agrees (existence): SmolLM2-135M agrees; Gemma 3 270M agrees"),))


def _count(r: Results, m: str) -> str:
    """The heads whose mean score passes the cut, with simultaneous bounds over sequences where they were kept."""
    d = r.model("induction", m)
    n = int((d["induction_score"] >= INDUCTION_CUT).sum())
    values = sequence_values(r, m, "induction")
    if values is None:
        return f"{n} of {len(d)} heads >= {INDUCTION_CUT} (descriptive: no per-sequence values)"
    iv = share_above(values.T, INDUCTION_CUT)
    return (f"{n} of {len(d)} heads >= {INDUCTION_CUT} (between {round(iv.lo * len(d))} and {round(iv.hi * len(d))}: "
            f"simultaneous t bounds over n = {iv.n} sequences)")


def measure(r: Results, m: str) -> str:
    d = r.model("induction", m)
    best, iv = best_head(r, m, "induction_score", "induction")
    score = (f"{best.induction_score:.2f} (descriptive)" if iv is None else iv.format("{:.2f}"))
    out = f"best prefix-matching score {head(best)} {score}; {_count(r, m)}"
    first = sequence_values(r, m, "first_copy_loss", by=())
    second = sequence_values(r, m, "second_copy_loss", by=())
    if first is None or second is None:
        return (out + f"; loss on the repeat {d.first_copy_loss.iloc[0]:.2f} -> {d.second_copy_loss.iloc[0]:.2f} nats "
                      f"(descriptive)")
    return (out + f"; loss on the first copy {interval(first[0]).format('{:.2f}', unit=' nats/token')}, on the "
            f"second {interval(second[0]).format('{:.2f}', unit=' nats/token')}")


def protocol_facts(r: Results) -> dict:
    """The kept run's repeat length and sequences (its CSV), the cut, and the models."""
    d = {m: r.model("induction", m) for m in PRETRAINED}
    return dict(half=per_model({m: int(x.half.iloc[0]) for m, x in d.items()}),
                n=per_model({m: int(x.n_docs.iloc[0]) for m, x in d.items()}), cut=INDUCTION_CUT,
                models=" and ".join(LABELS[m] for m in PRETRAINED))


def verdict(r: Results) -> str:
    per = judged(r, "induction_score", "induction", INDUCTION_CUT)
    return (f"{overall(per)} (existence): " + "; ".join(f"{LABELS[m]} {v}" for m, v in per.items())
            + ". The best head is chosen on the sequences it is judged on")


ROW = Claim(
    finding="induction heads", source="Olsson et al. 2022, In-context Learning and Induction Heads",
    quote="[prefix matching:] the average fraction of a head's attention weight given to the token … where "
          "the prefix matches the present context -- on random, synthetic data",
    where="Key Concepts, Formal definition (prefix matching and copying); the quoted words are from the Model "
          "Analysis Table's captions",
    paper="per-head scores in figures only (no table); induction heads found in every model from 2 layers up",
    protocol=Protocol(
        "Olsson's evaluator (App., head activation evaluators): 25 random tokens repeated 4 times after a BOS, 10 "
        "examples. poslens follows TransformerLens: {half} random ordinary tokens repeated once after the start "
        "token, {n} sequences; score = mean attention from the second copy to the token after the first occurrence, "
        "with a 95% interval over sequences. Copying is not scored per head; the loss on the repeat is the model's. "
        "The {cut} cut is poslens'. Models: {models}, 4-bit GGUFs de-quantised",
        protocol_facts, cited=("25", "4", "10", "95", "4")),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
