"""Retrieval heads (Wu et al., 2024, "Retrieval Head Mechanistically Explains Long-Context Factuality"): the few heads
that copy the needle, and what masking them does to needle retrieval against masking as many random heads.

The paper's score: while the model generates its answer greedily to a needle-in-a-haystack prompt, a head copies at a
step when the generated token w is in the needle k and the key it attends to most is a needle token equal to w; the
head's retrieval score is |g_h ∩ k| / |k| ("a token-level recall rate of the most attended tokens by an attention
head"), a head with a score above 0.1 is a retrieval head, and "only about 3% to 6% of the attention heads have a
retrieval score larger than 0.1" (their Fig. 3's "less than 5%" is for scores above 0.5). In the authors' code
(nightdessert/Retrieval_Head, ``retrieval_head_detection.py``) the needle is the answer's span in the prompt, each hit
adds 1 / (span length in tokens), decoding stops after a newline (at most 50 tokens), and a prompt's scores count only
when the answer was retrieved (ROUGE-1 recall of the answer in the response > 50); a head's score is the mean over
those prompts. They mask a head by zeroing its query (``query_states[:, head] = 0``): it attends uniformly.

``score`` picks the score:

- ``wu`` (default, the paper's): on each of ``n_docs`` RULER NIAH prompts (``corpora.niah``; the needle is "One of the
  special magic numbers for {key} is: {value}.", the answer the 7-digit value) the model generates greedily, up to
  the answer's length + 8 tokens or EOS, as RULER's scoring does (``corpora.answers``); the steps scored are those up
  to the first token holding a newline (included), as the authors'. The needle k is the value's span in the prompt:
  the tokens whose characters overlap the value (7 digit tokens for SmolLM2 and Gemma 3, whose tokenizers split
  digits; a separate leading space is not in it). A prompt counts when the scored tokens' ROUGE-1 recall of k's
  tokens is above 0.5: Σ_u min(count of u in k, count of u generated) / |k| over token ids u, the paper's filter
  computed on the model's tokens rather than on words (a 7-digit value is one word to ROUGE's tokenizer, which would
  make the filter all-or-nothing): more than half the value's tokens generated. On a counted prompt a head's score is
  its hits / |k|; heads score > ``threshold`` (strict) are retrieval heads. The attention of each generated token's
  row is read in one forward pass over the prompt and the generated tokens (a causal model gives those rows the same
  pattern as decoding one token at a time).
- ``poslens`` (what poslens reported before; head-profiles' ``retrieval_score``, ``head_profiles.needle_scores``): the
  gold answer teacher-forced, every prompt counted; among the answer tokens that occur in the needle sentence, the
  share whose producing row's most attended key is that token in the needle sentence; mean over prompts;
  score >= ``threshold``.

``needle_mass`` (teacher-forced attention on the needle sentence while the answer is produced) is read under both and
breaks ties in the ranking; where no prompt counts (a model that retrieves nothing), every score is NaN and the heads
are ranked by it alone.

Masking, on ``niah_prompts`` other NIAH prompts (another seed): the top k heads by score masked, for k = each share of
``shares`` of all heads (at least 1), and k random heads of the same layers (``n_random`` draws; a layer with too
few heads outside the top k borrows from its nearest layers, and each random row's ``borrowed`` counts those heads).
``masking``:

- ``query`` (default, the authors'): ``MaskHeadQueries(heads, from_position=last prompt token)``: the prompt is read
  unmasked and from its last token on (every generated token, every answer row when the answer is fed in) the heads'
  queries are zeroed, so they attend uniformly, as ``needle_in_haystack_with_mask.py`` prefills unmasked and masks the
  decoding steps;
- ``query-all``: the queries zeroed at every position, the prompt's too (a stronger edit: a head that parks its
  attention on a sink now averages every value at every position);
- ``output``: ``MaskHeads``, the heads' outputs zeroed at every position: they write nothing.

Per condition, RULER's greedy NIAH accuracy, and with the gold answer fed in the share of answer tokens that are the
greedy choice and the answer's NLL. Wu et al.: masking the retrieval heads breaks needle retrieval, masking random heads
barely changes it. Where poslens departs: their random heads avoid the top 100 heads and may be of any layer; poslens'
avoid the top k and keep the top k's layers. Their prompts are Paul Graham essays of 1K-50K tokens with
natural-language needles; poslens' are RULER's numbers in Wikipedia of each of ``lengths`` tokens (the heads ranked
and masked anew at each length).

Unit-level values (``score=wu``; ``UNITS``, ``retrieval-heads.units.csv``): per scoring prompt its ``needle_depth``,
``recall`` and ``counted`` (1 where it counts toward the scores) and per prompt and head its ``hits`` (that prompt's
hits / needle tokens), from which a head's score is recomputed on any resample of the prompts: poslens' known-results
rows give a 95% percentile bootstrap over prompts (10,000 resamples, seed 0) for each head's score and for the share of
heads above the threshold. A masking row's accuracy is
a count of retrieved prompts (``niah_accuracy * niah_prompts``), given an exact binomial interval.

The masking conditions depend on the ranking, so the two passes run one after the other (each data-parallel under
torchrun; a ``--shard I/N`` process cannot compute its share of the second alone and is refused).
Rows: ``part`` = ``heads`` (layer, head, scores, rank) or ``masking`` (condition, k, draw, measures); ``score`` and
``masking`` name the choices in every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import integer_columns, may_be_nan
from analyses.registry import Choices, Cli, Fits, Help, Range, analysis, no_grad
from analyses.runs import HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from analyses.units import Tables, Units
from interp.capabilities import Capability

if TYPE_CHECKING:
    pass

SCORES = ("wu", "poslens")
MASKINGS = ("query", "query-all", "output")
SUCCESS = 0.5  # ROUGE-1 recall of the value a counted prompt exceeds (the authors' "score > 50")


def random_same_layers(top: list[tuple[int, int]], n_layers: int, n_heads: int, rng) -> list[tuple[int, int]]:
    """As many random heads as ``top`` holds in each layer, none of them in ``top``. A layer with too few other heads
    (``top`` holds all or most of it) borrows the rest from its nearest layers (one layer away, then two, ...; at
    equal distance a random one first); ``borrowed`` counts the heads a draw took from other layers."""
    chosen, short = [], {}
    taken = set(top)
    for layer in range(n_layers):  # first every layer's own heads, so no borrowing takes a head its layer needs
        want = sum(1 for l, _ in top if l == layer)
        others = [(layer, h) for h in range(n_heads) if (layer, h) not in taken]
        chosen += [others[i] for i in rng.permutation(len(others))[:want]] if want else []
        short[layer] = want - min(want, len(others))
    for layer, missing in short.items():
        for distance in range(1, n_layers):
            if not missing:
                break
            near = [(l, h) for l in (layer - distance, layer + distance) if 0 <= l < n_layers
                    for h in range(n_heads) if (l, h) not in taken and (l, h) not in chosen]
            picks = [near[i] for i in rng.permutation(len(near))[:missing]]
            chosen += picks
            missing -= len(picks)
    return sorted(chosen)


def borrowed(top: list[tuple[int, int]], drawn: list[tuple[int, int]]) -> int:
    """The heads of ``drawn`` beyond what ``top`` holds in their layer: those taken from neighbouring layers."""
    from collections import Counter

    want, got = Counter(l for l, _ in top), Counter(l for l, _ in drawn)
    return sum(max(0, n - want[l]) for l, n in got.items())


def value_span(tokenizer, sample) -> tuple[int, int]:
    """First and one-past-last prompt token of the needle's value (Wu et al.'s needle span): the tokens whose characters
    overlap the value inside the needle sentence."""
    from corpora.niah import NEEDLE

    needle = NEEDLE.format(key=sample.key, value=sample.value)
    at = sample.text.find(needle)
    if at < 0:
        raise ValueError(f"retrieval-heads: the prompt does not hold its needle {needle!r}")
    start = at + needle.rindex(sample.value)
    end = start + len(sample.value)
    enc = tokenizer.encode_with_spans(sample.text, doc_start=True)
    if list(enc.ids) != list(sample.token_ids):
        raise ValueError("retrieval-heads: the prompt's tokens are not its text's tokens, so the needle cannot "
                         "be located")
    inside = [t for t, (a, b) in enumerate(enc.spans) if a < end and b > start]
    return inside[0], inside[-1] + 1


def rouge1_recall(reference, hypothesis) -> float:
    """ROUGE-1 recall on token ids: Σ_u min(count of u in reference, count in hypothesis) / len(reference)."""
    from collections import Counter

    ref, hyp = Counter(reference), Counter(hypothesis)
    return sum(min(n, hyp[u]) for u, n in ref.items()) / len(reference)


def scored_steps(tokenizer, generated: list[int]) -> list[int]:
    """The generated tokens Wu et al. score: up to the first one holding a newline, that one included."""
    for i, t in enumerate(generated):
        if "\n" in tokenizer.decode([t]):
            return list(generated[: i + 1])
    return list(generated)


@no_grad
def copy_hits(model, prompt: list[int], generated: list[int], span: tuple[int, int]):
    """``[layer, head]`` float64 hits / span length: at each step the head copies when its most attended key lies in
    ``span`` and holds the token generated there. One forward pass over ``prompt`` and ``generated[:-1]``, reading
    the rows that produced the generated tokens."""
    import numpy as np
    import torch

    seq = list(prompt) + list(generated[:-1])
    rows = torch.arange(len(prompt) - 1, len(seq))
    ids = torch.tensor(seq, device=model.device)
    target = torch.tensor(list(generated), device=model.device)
    start, end = span
    hits = np.zeros((model.n_layers, model.n_heads))

    def reduce(layer):
        def hook(pattern, hook):
            top = pattern[0].float().argmax(-1)  # [head, rows]
            hit = (top >= start) & (top < end) & (ids[top] == target)
            hits[layer] = hit.sum(-1).double().cpu().numpy() / (end - start)
        return hook

    with model.query_rows(rows), model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", reduce(l))
                                                        for l in range(model.n_layers)]):
        model(torch.tensor([seq], device=model.device))
    return hits


def wu_statistics(model, sample) -> dict:
    """One prompt under Wu et al.'s protocol: greedy answer, ROUGE-1 recall of the value's tokens, and (when above 0.5)
    each head's hits / span length; ``counted`` is 1 for a retrieved prompt."""
    import numpy as np

    from corpora.answers import answer_budget, stop_ids

    tok = model.require_tokenizer("retrieval-heads")
    span = value_span(tok, sample)
    generated = scored_steps(tok, model.generate(sample.token_ids, answer_budget(sample.answer_ids), stop_ids(tok)))
    recall = rouge1_recall(sample.token_ids[span[0]: span[1]], generated)
    counted = bool(generated) and recall > SUCCESS
    hits = copy_hits(model, sample.token_ids, generated, span) if counted else np.zeros((model.n_layers, model.n_heads))
    return {"hits": hits, "counted": float(counted), "recall": recall}


def _label(heads) -> str:
    return " ".join(f"L{l}H{h}" for l, h in sorted(heads))


def headline(df) -> str:
    parts = []
    several = df["length"].nunique() > 1
    for (model, length), g in df.groupby(["model", "length"], sort=False):
        heads, masking = g[g["part"] == "heads"], g[g["part"] == "masking"]
        n = int(heads["is_retrieval"].sum())
        base = masking.loc[masking["condition"] == "none", "niah_accuracy"].iloc[0]
        k = masking.loc[masking["condition"] == "top", "k"].max()
        top = masking[(masking["condition"] == "top") & (masking["k"] == k)]["niah_accuracy"].iloc[0]
        rand = masking[(masking["condition"] == "random") & (masking["k"] == k)]["niah_accuracy"].mean()
        first = g.iloc[0]
        cmp = ">" if first["score"] == "wu" else ">="
        counted = (f" ({int(first['n_counted'])} of {int(first['n_scored'])} prompts retrieved and counted)"
                   if first["score"] == "wu" else "")
        where = f" at {length} tokens" if several else ""
        parts.append(f"{model}{where}: {n} of {len(heads)} heads ({n / len(heads):.1%}) "
                     f"score {cmp} {first['threshold']:g}{counted}; NIAH {base:.2f}, {top:.2f} with the top {int(k)} "
                     f"masked, {rand:.2f} with {int(k)} random heads of the same layers ({first['masking']} masking)")
    score = df["score"].iloc[0]
    label = "Wu et al.'s score" if score == "wu" else "poslens' teacher-forced score"
    return f"Retrieval heads ({label}): " + "; ".join(parts) + "."


def summary(df):
    m = df[df["part"] == "masking"]
    return (m.groupby(["model", "length", "score", "masking", "condition", "k"], sort=False)
            .agg(niah_accuracy=("niah_accuracy", "mean"), answer_accuracy=("answer_accuracy", "mean"),
                 answer_nll=("answer_nll", "mean"), draws=("draw", "size")).reset_index())


UNITS = Units("prompt", keys=("length", "layer", "head"), measures={
    "hits": "a head's hits on one scoring prompt / the needle's tokens (its Wu score on that prompt)",
    "counted": "1 where the prompt counts toward the scores (wu: the needle was retrieved), else 0 (no layer or head)",
    "recall": "the share of the needle's tokens the prompt's greedy answer retrieved (no layer or head)",
    "needle_depth": "where the needle sits in the prompt, 0 to 1 (no layer or head)"})


@analysis("retrieval-heads", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary,
          units=UNITS,
          small=Run(("repo-small",), dict(n_docs=1, niah_prompts=1, lengths=(224,), shares=(0.1, 0.2), n_random=1)),
          main=Run(("repo-small", "nope-small"), dict(n_docs=8, niah_prompts=16, lengths=(480,), n_random=3),
                   quick=dict(n_docs=1, niah_prompts=1, lengths=(224,), n_random=1), section=HEADS),
          # Wu et al.'s score and masking (the defaults), at three lengths (Wu: 1K-50K; this CPU: up to 4,096)
          real=Run(PRETRAINED, dict(n_docs=32, niah_prompts=48, lengths=(512, 2048, 4096), n_random=5,
                                    stage="judged"),
                   quick=dict(n_docs=1, niah_prompts=1, lengths=(128,), shares=(0.02,), n_random=1), section=KNOWN),
          memory=Run(("rope-small",), dict(lengths=(256,), niah_prompts=4)))
@may_be_nan(layer="a masking row is of the whole model", head="a masking row is of the whole model",
            depth="a masking row is of the whole model", needle_mass="a masking row is of the whole model",
            rank="a masking row is of the whole model",
            retrieval_score="a masking row, or no prompt counts (wu: none retrieved; poslens: no answer token in "
                            "the needle)",
            k="a heads row masks nothing", share="a heads row masks nothing", draw="a heads row masks nothing",
            niah_accuracy="a heads row masks nothing", answer_accuracy="a heads row masks nothing",
            answer_nll="a heads row masks nothing", is_retrieval="a masking row is of the whole model",
            heads="a heads row masks nothing", condition="a heads row masks nothing",
            borrowed="a heads row masks nothing")
def retrieval_heads(model, *,
                    score: Annotated[str, Help("wu: Wu et al.'s score (greedy answer, hits / needle tokens, retrieved "
                                               "prompts only, > threshold); poslens: the answer teacher-forced, every "
                                               "prompt, >= threshold"), Choices(SCORES)] = "wu",
                    masking: Annotated[str, Help("query: a masked head's query zeroed from the last prompt token "
                                                 "on, so it attends uniformly there (Wu et al.); query-all: at every "
                                                 "position; output: its output zeroed everywhere"),
                                       Choices(MASKINGS)] = "query",
                    n_docs: Annotated[int, Help("NIAH prompts the retrieval scores are read on"), Range(1)] = 8,
                    niah_prompts: Annotated[int, Help("other NIAH prompts retrieval is measured on under each masking"),
                                            Range(1)] = 8,
                    lengths: Annotated[tuple[int, ...], Help("NIAH prompt length(s) in the model's tokens, "
                                                             "comma-separated or repeated (16 more must fit for the "
                                                             "answer); the whole protocol runs at each"),
                                       Range(32), Fits(margin=16), Cli("--length")] = (512,),
                    shares: Annotated[tuple[float, ...], Help("shares of all heads masked (comma-separated; at least "
                                                              "one head each)"),
                                      Range(0.001, 1)] = (0.01, 0.02, 0.05, 0.1),
                    threshold: Annotated[float, Help("retrieval score that makes a retrieval head (Wu et al.: 0.1)"),
                                         Range(0, 1)] = 0.1,
                    n_random: Annotated[int, Help("draws of random heads per k"), Range(1)] = 2,
                    stage: STAGE = "any", seed: int = 0, documents=None) -> Tables:
    """Per head the retrieval score (Wu et al. 2024, or poslens' teacher-forced variant); NIAH accuracy with the top-k
    retrieval heads masked (query or output) against k random heads of the same layers, for several k; at each of
    ``lengths``, on prompts of that length (the heads ranked and masked anew at each).

    Rows ``part=heads`` (one per length, layer and head) and ``part=masking`` (one per length, condition, k and
    draw), and for ``wu`` the per-prompt values behind the scores (``UNITS``, keyed by length); ``documents=``
    (``--input``) are the haystack."""
    import pandas as pd

    from analyses import units
    from interp.runtime import parallel

    if parallel.current().standalone:
        raise ValueError("retrieval-heads ranks the heads on one pass and masks them on a second, so a --shard I/N "
                         "process cannot compute its share alone; run it in one process or under torchrun")
    model.require_tokenizer("retrieval-heads")
    settings = dict(score=score, masking=masking, n_docs=n_docs, niah_prompts=niah_prompts, shares=shares,
                    threshold=threshold, n_random=n_random, stage=stage, seed=seed,
                    haystack="wiki" if documents is None else documents)
    parts = [_at_length(model, length, **settings) for length in dict.fromkeys(lengths)]
    df = pd.concat([table for table, _ in parts], ignore_index=True)
    return Tables(df, units.frame(UNITS, [p for _, found in parts for p in found]))


def _at_length(model, length: int, *, score: str, masking: str, n_docs: int, niah_prompts: int, shares, threshold,
               n_random: int, stage: str, seed: int, haystack):
    """The whole protocol on prompts of ``length`` tokens: the rows, and the per-prompt unit frames."""
    import pandas as pd

    from corpora.answers import fitting_samples
    from corpora.niah import niah_samples

    tok = model.require_tokenizer("retrieval-heads")
    scoring = fitting_samples(model, niah_samples(tok, n_docs, length, seed=seed, haystack=haystack, preamble=False,
                                                  stage=stage))
    evaluation = fitting_samples(model, niah_samples(tok, niah_prompts, length, seed=seed + 1, haystack=haystack,
                                                     preamble=False, stage=stage))
    sums = _score_sums(model, scoring, score)
    scores, mass, ranked = _ranked(model, sums, len(scoring))
    conditions = _conditions(model, ranked, shares, n_random, seed)
    measured = _masked(model, evaluation, conditions, masking)
    rows = _rows(model, evaluation, scores, mass, ranked, conditions, measured, score, threshold)
    df = integer_columns(pd.DataFrame(rows), "layer", "head", "rank", "k", "draw")
    df.insert(0, "model", model.model_name)
    df.insert(1, "score", score)
    df.insert(2, "masking", masking)
    df.insert(3, "length", length)
    df["threshold"], df["n_scored"], df["n_counted"] = threshold, len(scoring), int(sums["prompts"][0])
    df["niah_prompts"] = len(evaluation)
    return df, _units(model, scoring, sums, score, length)


def _units(model, scoring, sums, score: str, length: int) -> list:
    """The per-prompt values of the ``wu`` score at one length (``UNITS``); none for ``poslens``'s."""
    from analyses import units

    if score != "wu":
        return []
    name, heads = model.model_name, {"layer": range(model.n_layers), "head": range(model.n_heads)}
    return [units.long(name, "hits", sums["unit_hits"], heads, length=length),
            units.long(name, "counted", sums["unit_counted"], length=length),
            units.long(name, "recall", sums["unit_recall"], length=length),
            units.long(name, "needle_depth", [float(s.depth) for s in scoring], length=length)]


def _add(state, i, stats):
    """Adds one prompt's statistics to the sums; a ``unit_`` statistic goes to that prompt's own slot."""
    for k, v in stats.items():
        if k.startswith("unit_"):
            state[k][i] += v
        else:
            state[k] += v


def _score_sums(model, scoring, score: str) -> dict:
    """The scoring prompts' summed needle masses and retrieval scores per head (and, for ``wu``, each prompt's
    hits, count and recall in its own slot)."""
    import numpy as np

    from analyses.head_profiles import needle_scores
    from interp.runtime import parallel

    shape = (model.n_layers, model.n_heads)

    def one(sample):
        mass, s = needle_scores(model, sample)
        out = {"mass": mass.double().numpy()}
        if score == "wu":
            wu = wu_statistics(model, sample)
            return out | {"score": wu["hits"], "counted": np.full(shape, wu["counted"]),
                          "prompts": np.array([wu["counted"]]), "unit_hits": wu["hits"],
                          "unit_counted": np.array(wu["counted"]), "unit_recall": np.array(wu["recall"])}
        s = s.double().numpy()
        return out | {"score": np.nan_to_num(s), "counted": np.isfinite(s).astype(np.float64),
                      "prompts": np.array([float(np.isfinite(s).any())])}

    n = len(scoring)
    state = {k: np.zeros(shape) for k in ("mass", "score", "counted")} | {"prompts": np.zeros(1)}
    if score == "wu":
        state |= {"unit_hits": np.zeros((n,) + shape), "unit_counted": np.zeros(n), "unit_recall": np.zeros(n)}
    return parallel.fold_items(one, scoring, state, _add, model=model, tag=f"scores-{score}",
                               desc=f"retrieval scores {model.model_name}")


def _ranked(model, sums: dict, n_scored: int):
    """Each head's mean retrieval score and needle mass, and the heads ranked by score (no score last), then mass."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        scores = sums["score"] / sums["counted"]
    mass = sums["mass"] / n_scored
    heads = [(l, h) for l in range(model.n_layers) for h in range(model.n_heads)]
    ranked = sorted(heads, key=lambda lh: (-np.nan_to_num(scores[lh], nan=-1.0), -mass[lh], lh))
    return scores, mass, ranked


def _conditions(model, ranked, shares, n_random: int, seed: int) -> list[tuple]:
    """(condition, k, draw, heads masked): nothing masked, then per k the top k heads and ``n_random`` draws of k
    random heads of the same layers."""
    import numpy as np

    total = len(ranked)
    ks = sorted({min(total, max(1, int(round(s * total)))) for s in shares})
    conditions = [("none", 0, 0, [])]
    for k in ks:
        top = ranked[:k]
        conditions.append(("top", k, 0, top))
        for d in range(n_random):
            rng = np.random.default_rng([seed, k, d])
            conditions.append(("random", k, d, random_same_layers(top, model.n_layers, model.n_heads, rng)))
    return conditions


def _masked(model, evaluation, conditions, masking: str) -> dict:
    """Per condition, the evaluation prompts' summed NIAH hits, answer accuracy and answer NLL with its heads
    masked."""
    import numpy as np

    from corpora.answers import retrieved, teacher_forced
    from interp import interventions
    from interp.runtime import parallel
    def mask(heads, sample):
        if masking == "query":
            return interventions.MaskHeadQueries(heads, from_position=len(sample.token_ids) - 1)
        return interventions.MaskHeadQueries(heads) if masking == "query-all" else interventions.MaskHeads(heads)

    def measure(sample):
        out = {}
        for c, (_, _, _, masked) in enumerate(conditions):
            with interventions.applied(model, *((mask(masked, sample),) if masked else ())):
                acc, nll = teacher_forced(model, sample)
                out[f"{c}"] = np.array([float(retrieved(model, [sample])[0]), acc, nll])
        return out

    return parallel.fold_items(measure, evaluation, {f"{c}": np.zeros(3) for c in range(len(conditions))}, _add,
                               model=model, tag=f"masking-{masking}", desc=f"retrieval masking {model.model_name}")


def _rows(model, evaluation, scores, mass, ranked, conditions, measured, score: str, threshold: float) -> list[dict]:
    """Rows ``part=heads``, then ``masking``, one per condition."""
    import numpy as np

    above = (lambda s: s > threshold) if score == "wu" else (lambda s: s >= threshold)
    heads = [(l, h) for l in range(model.n_layers) for h in range(model.n_heads)]
    total = len(heads)
    rows = [dict(part="heads", layer=l, head=h, depth=l / max(1, model.n_layers - 1),
                 retrieval_score=float(scores[l, h]), needle_mass=float(mass[l, h]), rank=ranked.index((l, h)),
                 is_retrieval=bool(above(np.nan_to_num(scores[l, h])))) for l, h in heads]
    for c, (condition, k, d, masked) in enumerate(conditions):
        hits, acc, nll = measured[f"{c}"] / len(evaluation)
        rows.append(dict(part="masking", condition=condition, k=k, share=k / total, draw=d, heads=_label(masked),
                         borrowed=borrowed(ranked[:k], masked) if condition == "random" else 0,
                         niah_accuracy=hits, answer_accuracy=acc, answer_nll=nll))
    return rows
