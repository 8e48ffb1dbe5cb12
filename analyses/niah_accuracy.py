"""Needle-in-a-haystack retrieval accuracy by context length: greedy exact match of the value, with a
Wilson 95% interval. Lengths beyond a model's training length test extrapolation."""

from __future__ import annotations

import math

import pandas as pd
import torch

from corpora.niah import niah_samples
from interp.base import Capability, require


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@torch.no_grad()
def niah_accuracy(model, *, lengths=(512, 1024, 2048), n_samples: int = 32, haystack: str = "wiki",
                  preamble: bool = False, seed: int = 1) -> pd.DataFrame:
    """One row per context length: accuracy, Wilson interval, samples."""
    require(model, Capability.CAUSAL_LM, "niah-accuracy")
    rows = []
    for length in lengths:
        if length + 16 > model.max_seq_len:
            raise ValueError(f"context length {length} does not fit in {model.model_name} (max_seq_len={model.max_seq_len})")
        samples = niah_samples(model.tokenizer, n_samples, length, seed=seed, haystack=haystack, preamble=preamble)
        hits = sum(s.value in model.tokenizer.decode(model.generate([s.token_ids], len(s.answer_ids))) for s in samples)
        lo, hi = wilson(hits, len(samples))
        rows.append(dict(model=model.model_name, context_tokens=length, accuracy=hits / len(samples), ci_low=lo, ci_high=hi,
                         n_samples=len(samples), haystack=haystack))
    return pd.DataFrame(rows)
