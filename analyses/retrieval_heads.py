"""Retrieval heads (Wu et al., 2024, "Retrieval Head Mechanistically Explains Long-Context Factuality"): the few heads that
copy the needle, and what masking them does to needle retrieval against masking as many random heads.

Protocol:

1. Scores, on ``n_docs`` NIAH prompts of ``length`` tokens with the gold answer fed in (head-profiles' statistic,
   ``head_profiles.needle_scores``): a head's retrieval score is the share of the answer's tokens found in the needle
   whose producing row's most attended key is that same token in the needle. Wu et al. call a head with a score above
   0.1 (``threshold``) a retrieval head and find fewer than 5% of heads are.
2. Masking, on ``n_samples`` other NIAH prompts (another seed): the top k heads by score masked
   (``interventions.MaskHeads``: their outputs zeroed), for k = each share of ``shares`` of all heads (at least 1), and
   k random heads of the same layers (``n_random`` draws; a layer whose every head is in the top k lends its count to
   the others); per condition, RULER's greedy NIAH accuracy, and with the gold answer fed in the share of answer
   tokens that are the greedy choice and the answer's NLL. Wu et al.: masking the retrieval heads breaks needle
   retrieval, masking random heads barely changes it.

The masking conditions depend on the ranking, so the two passes run one after the other (each data-parallel under
torchrun; a ``--shard I/N`` process cannot compute its share of the second alone and is refused).
Rows: ``part`` = ``heads`` (layer, head, scores, rank) or ``masking`` (condition, k, draw, measures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Fits, Help, Range, analysis
from analyses.nan_policy import integer_columns, may_be_nan
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd


def random_same_layers(top: list[tuple[int, int]], n_layers: int, n_heads: int, rng) -> list[tuple[int, int]]:
    """As many random heads as ``top`` holds in each layer, none of them in ``top``; a layer with too few others lends
    its remaining count to the heads of every other layer."""
    chosen, short = [], 0
    taken = set(top)
    for layer in range(n_layers):
        want = sum(1 for l, _ in top if l == layer)
        others = [(layer, h) for h in range(n_heads) if (layer, h) not in taken]
        picks = [others[i] for i in rng.permutation(len(others))[:want]] if want else []
        chosen += picks
        short += want - len(picks)
    if short:
        rest = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in taken and (l, h) not in chosen]
        chosen += [rest[i] for i in rng.permutation(len(rest))[:short]]
    return sorted(chosen)


def _label(heads) -> str:
    return " ".join(f"L{l}H{h}" for l, h in sorted(heads))


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        heads, masking = g[g["part"] == "heads"], g[g["part"] == "masking"]
        n = int(heads["is_retrieval"].sum())
        base = masking.loc[masking["condition"] == "none", "niah_accuracy"].iloc[0]
        k = masking.loc[masking["condition"] == "top", "k"].max()
        top = masking[(masking["condition"] == "top") & (masking["k"] == k)]["niah_accuracy"].iloc[0]
        rand = masking[(masking["condition"] == "random") & (masking["k"] == k)]["niah_accuracy"].mean()
        parts.append(f"{model}: {n} of {len(heads)} heads ({n / len(heads):.1%}) score >= {g['threshold'].iloc[0]:g}; NIAH "
                     f"{base:.2f}, {top:.2f} with the top {int(k)} masked, {rand:.2f} with {int(k)} random heads of the same layers")
    return "Retrieval heads: " + "; ".join(parts) + "."


def summary(df):
    m = df[df["part"] == "masking"]
    return (m.groupby(["model", "condition", "k"], sort=False)
            .agg(niah_accuracy=("niah_accuracy", "mean"), answer_accuracy=("answer_accuracy", "mean"),
                 answer_nll=("answer_nll", "mean"), draws=("draw", "size")).reset_index())


@analysis("retrieval-heads", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary)
@may_be_nan(layer="a masking row is of the whole model", head="a masking row is of the whole model",
            depth="a masking row is of the whole model", needle_mass="a masking row is of the whole model",
            rank="a masking row is of the whole model",
            retrieval_score="a masking row, or no answer token of any prompt occurs in the needle",
            k="a heads row masks nothing", share="a heads row masks nothing", draw="a heads row masks nothing",
            niah_accuracy="a heads row masks nothing", answer_accuracy="a heads row masks nothing",
            answer_nll="a heads row masks nothing")
def retrieval_heads(model, *,
                    n_docs: Annotated[int, Help("NIAH prompts the retrieval scores are read on"), Range(1)] = 8,
                    n_samples: Annotated[int, Help("other NIAH prompts retrieval is measured on under each masking"),
                                         Range(1)] = 8,
                    length: Annotated[int, Help("NIAH prompt length in the model's tokens (16 more must fit for the answer)"),
                                      Range(32), Fits(margin=16)] = 512,
                    shares: Annotated[tuple[float, ...], Help("shares of all heads masked (comma-separated; at least one head "
                                                              "each)"), Range(0.001, 1)] = (0.01, 0.02, 0.05, 0.1),
                    threshold: Annotated[float, Help("retrieval score that makes a retrieval head (Wu et al.: 0.1)"),
                                         Range(0, 1)] = 0.1,
                    n_random: Annotated[int, Help("draws of random heads per k"), Range(1)] = 2,
                    seed: int = 0, documents=None) -> pd.DataFrame:
    """Per head the retrieval score (Wu et al. 2024); NIAH accuracy with the top-k retrieval heads masked against k random
    heads of the same layers, for several k.

    Rows ``part=heads`` (one per layer and head) and ``part=masking`` (one per condition, k and draw); ``documents=``
    (``--input``) are the haystack."""
    import numpy as np
    import pandas as pd

    from analyses.head_profiles import needle_scores
    from corpora.answers import fitting_samples, retrieved, teacher_forced
    from corpora.niah import niah_samples
    from interp import interventions, parallel

    if parallel.current().standalone:
        raise ValueError("retrieval-heads ranks the heads on one pass and masks them on a second, so a --shard I/N process "
                         "cannot compute its share alone; run it in one process or under torchrun")
    tok = model.require_tokenizer("retrieval-heads")
    haystack = "wiki" if documents is None else documents
    scoring = fitting_samples(model, niah_samples(tok, n_docs, length, seed=seed, haystack=haystack, preamble=False))
    evaluation = fitting_samples(model, niah_samples(tok, n_samples, length, seed=seed + 1, haystack=haystack, preamble=False))
    shape = (model.n_layers, model.n_heads)

    def score(sample):
        mass, s = needle_scores(model, sample)
        s = s.double().numpy()
        return {"mass": mass.double().numpy(), "score": np.nan_to_num(s), "counted": np.isfinite(s).astype(np.float64)}

    def add(state, i, stats):
        for k, v in stats.items():
            state[k] += v

    sums = parallel.fold_items(score, scoring, {k: np.zeros(shape) for k in ("mass", "score", "counted")}, add, model=model,
                               tag="scores", desc=f"retrieval scores {model.model_name}")
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = sums["score"] / sums["counted"]
    mass = sums["mass"] / len(scoring)
    heads = [(l, h) for l in range(model.n_layers) for h in range(model.n_heads)]
    ranked = sorted(heads, key=lambda lh: (-np.nan_to_num(scores[lh], nan=-1.0), -mass[lh], lh))
    total = len(heads)
    ks = sorted({min(total, max(1, int(round(s * total)))) for s in shares})
    conditions = [("none", 0, 0, [])]
    for k in ks:
        top = ranked[:k]
        conditions.append(("top", k, 0, top))
        for d in range(n_random):
            rng = np.random.default_rng([seed, k, d])
            conditions.append(("random", k, d, random_same_layers(top, model.n_layers, model.n_heads, rng)))

    def measure(sample):
        out = {}
        for c, (_, _, _, masked) in enumerate(conditions):
            ivs = (interventions.MaskHeads(masked),) if masked else ()
            with interventions.applied(model, *ivs):
                acc, nll = teacher_forced(model, sample)
                out[f"{c}"] = np.array([float(retrieved(model, [sample])[0]), acc, nll])
        return out

    measured = parallel.fold_items(measure, evaluation, {f"{c}": np.zeros(3) for c in range(len(conditions))}, add,
                                   model=model, tag="masking", desc=f"retrieval masking {model.model_name}")
    rows = [dict(part="heads", layer=l, head=h, depth=l / max(1, model.n_layers - 1), retrieval_score=float(scores[l, h]),
                 needle_mass=float(mass[l, h]), rank=ranked.index((l, h)),
                 is_retrieval=bool(np.nan_to_num(scores[l, h]) >= threshold)) for l, h in heads]
    for c, (condition, k, d, masked) in enumerate(conditions):
        hits, acc, nll = measured[f"{c}"] / len(evaluation)
        rows.append(dict(part="masking", condition=condition, k=k, share=k / total, draw=d, heads=_label(masked),
                         niah_accuracy=hits, answer_accuracy=acc, answer_nll=nll))
    df = integer_columns(pd.DataFrame(rows), "layer", "head", "rank", "k", "draw")
    df.insert(0, "model", model.model_name)
    df["threshold"], df["n_scored"], df["n_samples"], df["prompt_tokens"] = threshold, len(scoring), len(evaluation), length
    return df
