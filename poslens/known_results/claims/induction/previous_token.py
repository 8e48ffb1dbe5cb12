"""Previous-token heads exist (Olsson et al. 2022): the best head's previous-token score on Wikipedia text."""

from __future__ import annotations

from poslens.known_results.claims import WRITTEN
from poslens.known_results.claims.induction import PREVIOUS_CUT, best_head, judged, overall
from poslens.known_results.models import LABELS, PRETRAINED
from poslens.known_results.types import Claim, Protocol, Results, Rule, head, method_revision, per_model

RULE = Rule(
    text=f"Olsson's previous-token score on training-like text (Wikipedia windows), per model the best head's mean "
         f"with its 95% interval over sequences (`stats.intervals.interval`). Agrees when, in both models, the "
         f"interval lies above "
         f"{PREVIOUS_CUT} (poslens' cut: the paper gives none); differs when a model's interval lies at or below it; "
         f"otherwise inconclusive. The same score on repeated random tokens is shown beside it, not judged",
    written=WRITTEN,
    revisions=(method_revision("the best head's mean with its 95% bootstrap interval over sequences",
                               "agrees (existence): SmolLM2-135M agrees; Gemma 3 270M agrees"),))


def measure(r: Results, m: str) -> str:
    d = r.model("induction", m)
    parts = []
    if "wiki_previous_token_score" in d:
        best, iv = best_head(r, m, "wiki_previous_token_score", "wiki_previous")
        parts.append(f"on Wikipedia text (Olsson's condition): best {head(best)} "
                     + (f"{best.wiki_previous_token_score:.2f} (descriptive)" if iv is None else iv.format("{:.2f}")))
    best, iv = best_head(r, m, "previous_token_score", "previous")
    parts.append(f"on repeated random tokens: best {head(best)} "
                 + (f"{best.previous_token_score:.2f} (descriptive)" if iv is None else iv.format("{:.2f}")))
    return "; ".join(parts)


def protocol_facts(r: Results) -> dict:
    """The kept run's window length (twice the repeat's half, as ``analyses.induction`` reads them) and sequences."""
    d = {m: r.model("induction", m) for m in PRETRAINED}
    column = {m: "n_wiki" if "n_wiki" in x else "n_docs" for m, x in d.items()}
    return dict(window=per_model({m: 2 * int(x.half.iloc[0]) for m, x in d.items()}),
                n=per_model({m: int(x[column[m]].iloc[0]) for m, x in d.items()}), cut=PREVIOUS_CUT)


def verdict(r: Results) -> str:
    if not all("wiki_previous_token_score" in r.model("induction", m) for m in PRETRAINED):
        return "inconclusive: the kept run has no previous-token score on text, the condition the rule reads"
    per = judged(r, "wiki_previous_token_score", "wiki_previous", PREVIOUS_CUT)
    return f"{overall(per)} (existence): " + "; ".join(f"{LABELS[m]} {v}" for m, v in per.items())


ROW = Claim(
    finding="previous-token heads", source="Olsson et al. 2022",
    quote="[the induction circuit's first head] copies information from the previous token",
    where="§ Key Concepts, Induction Heads, and the Introduction (the claim); the score: the appendix's head "
          "activation evaluators",
    paper="the previous-token score is defined in the appendix's head activation evaluators: on \"an example "
          "from the training distribution\", the mean attention from token i to token i-1; no per-model numbers",
    protocol=Protocol("the same score on English Wikipedia windows of {window} tokens after the start token "
                      "(training-like text; judged) and on the repeated random tokens of the induction row (shown), "
                      "{n} sequences each, 95% intervals over sequences; the {cut} cut is poslens'",
                      protocol_facts, cited=("95",)),
    models=PRETRAINED, measure=measure, verdict=verdict, rule=RULE)
