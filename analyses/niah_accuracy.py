"""Needle-in-a-haystack retrieval accuracy by context length: the model generates greedily (up to 8 tokens
more than the answer, stopping at EOS) and a sample counts when the value appears, as RULER scores it;
Wilson 95% intervals. Lengths beyond the training length test extrapolation: the bundled decoders allow
4x their training length; for other checkpoints raise ``model.max_seq_len`` first.

Inputs: seeded prompts on Wikipedia or noise, prompts whose haystack is the user's ``documents=``
(``--input PATH``), or ready ``samples=`` (``corpora.niah.NiahSample``), scored in one row whose
``length`` is the longest prompt (``lengths`` is then not used); a prompt that does not fit with
its answer is refused."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

from analyses.registry import Cli, Fits, Help, Range, analysis
from analyses.runs import DECODERS, REPO, Run
from corpora.answers import equal_length_batches, retrieved
from corpora.niah import prompts_for
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

BATCH = 8  # prompts generated together; rows leave the batch as they finish


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def headline(df) -> str:
    return "Accuracy by length: " + "; ".join(
        f"{m}: " + ", ".join(f"{int(r.length)}: {r.accuracy:.2f}" for r in g.itertuples())
        for m, g in df.groupby("model", sort=False)) + "."


def summary(df):
    return df[["model", "length", "accuracy", "ci_low", "ci_high", "n_docs"]]


@analysis("niah-accuracy", needs=[Capability.CAUSAL_LM], headline=headline, summary=summary,
          small=Run(("repo-small",), dict(lengths=(300,), n_docs=2)),
          main=Run(DECODERS, dict(lengths=(512, 1024, 2048), n_docs=16), quick=dict(n_docs=2), section=REPO),
          memory=Run(("repo-small",), dict(lengths=(256,))))
def niah_accuracy(model, *,
                  lengths: Annotated[tuple[int, ...], Help("context length(s), comma-separated or repeated"), Range(32),
                                     Fits(margin=16), Cli("--length")] = (512, 1024, 2048),
                  n_docs: Annotated[int, Help("prompts per length"), Range(1)] = 32,
                  haystack: str = "wiki", preamble: bool = False, seed: int = 1, documents=None) -> pd.DataFrame:
    """Needle-in-a-haystack retrieval accuracy (greedy exact match) at several context lengths, beyond the training
    length included: where a position scheme stops extrapolating.

    One row per context length: accuracy, Wilson interval, samples; ``documents=`` (``--input``) are the haystack, or
    ready NIAH prompts (one row, at the longest prompt's length)."""
    import pandas as pd

    from corpora.documents import input_kind
    from interp.runtime import parallel

    given = documents is not None and input_kind(documents) == "prompts"
    if given:
        prompts = prompts_for(model, "niah-accuracy", documents, n_docs, 0)
        lengths = (max(len(s.token_ids) for s in prompts),)
        samples = {lengths[0]: prompts}
    else:
        samples = {length: prompts_for(model, "niah-accuracy", documents, n_docs, length, seed=seed, haystack=haystack,
                                       preamble=preamble) for length in lengths}
    batches = [(length, batch) for length in lengths for batch in equal_length_batches(samples[length], BATCH)]

    def one(job):
        return sum(retrieved(model, job[1]))

    hits = dict.fromkeys(lengths, 0)
    for (length, _), h in zip(batches, parallel.map_items(one, batches, model=model, desc=f"niah {model.model_name}")):
        hits[length] += h
    rows = []
    for length in lengths:
        n = len(samples[length])
        lo, hi = wilson(hits[length], n)
        rows.append(dict(model=model.model_name, length=length, accuracy=hits[length] / n, ci_low=lo, ci_high=hi,
                         n_docs=n, haystack=haystack if documents is None else "input"))
    return pd.DataFrame(rows)
