"""Needle-in-a-haystack retrieval accuracy by context length: the model generates greedily (up to 8 tokens
more than the answer, stopping at EOS) and a sample counts when the value appears, as RULER scores it;
Wilson 95% intervals. Lengths beyond the training length test extrapolation: the bundled decoders allow
4x their training length; for other checkpoints raise ``model.max_seq_len`` first."""

from __future__ import annotations

import math

import pandas as pd
import torch

from interp import parallel
from corpora.answers import answer_budget, stop_ids
from corpora.niah import niah_samples
from interp.base import Capability, require

BATCH = 8  # prompts generated together; rows leave the batch as they finish


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _equal_length_batches(samples, size: int = BATCH):
    by_length: dict[int, list] = {}
    for s in samples:
        by_length.setdefault(len(s.token_ids), []).append(s)
    for group in by_length.values():
        for i in range(0, len(group), size):
            yield group[i : i + size]


@torch.no_grad()
def niah_accuracy(model, *, lengths=(512, 1024, 2048), n_samples: int = 32, haystack: str = "wiki",
                  preamble: bool = False, seed: int = 1) -> pd.DataFrame:
    """One row per context length: accuracy, Wilson interval, samples."""
    require(model, Capability.CAUSAL_LM, "niah-accuracy")
    tokenizer = model.require_tokenizer("niah-accuracy")
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    for length in lengths:
        if length + 16 > model.max_seq_len:
            raise ValueError(f"context length {length} does not fit in {model.model_name} (max_seq_len={model.max_seq_len})")
    samples = {length: niah_samples(tokenizer, n_samples, length, seed=seed, haystack=haystack, preamble=preamble)
               for length in lengths}
    batches = [(length, batch) for length in lengths for batch in _equal_length_batches(samples[length])]

    def one(job):
        _, batch = job
        outs = model.generate_batch([s.token_ids for s in batch], 0, stop_ids(tokenizer),
                                    budgets=[answer_budget(s.answer_ids) for s in batch])
        return sum(s.value in tokenizer.decode(o) for s, o in zip(batch, outs))

    hits = dict.fromkeys(lengths, 0)
    for (length, _), h in zip(batches, parallel.map_items(one, batches, model=model, desc=f"niah {model.model_name}")):
        hits[length] += h
    rows = []
    for length in lengths:
        n = len(samples[length])
        lo, hi = wilson(hits[length], n)
        rows.append(dict(model=model.model_name, context_tokens=length, accuracy=hits[length] / n, ci_low=lo, ci_high=hi,
                         n_samples=n, haystack=haystack))
    return pd.DataFrame(rows)
