"""Helpers the increment analyses share: which hooks carry increments and how to read them."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from interp.capabilities import Capability, CapabilityError
from interp.tokenizers import ByteTokenizer, TokenizerError


def no_grad(function):
    """``torch.no_grad()`` as a decorator that imports torch only when called (analysis modules import light)."""

    @functools.wraps(function)
    def inner(*args, **kwargs):
        import torch

        with torch.no_grad():
            return function(*args, **kwargs)

    return inner


def byte_model(model, analysis: str) -> None:
    """Analyses built on UTF-8 byte positions need learned increments and the byte tokenizer."""
    if Capability.INCREMENTS not in getattr(model, "capabilities", ()):
        raise CapabilityError(f"analysis '{analysis}' needs a model with {Capability.INCREMENTS.value}; {model.model_name} has none")
    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise TokenizerError(f"analysis '{analysis}' works on byte-level models; {model.model_name} is not one")


def check_window(model, max_tokens: int, what: str = "--length") -> None:
    from interp.base import InputError

    if max_tokens > model.max_seq_len:
        raise InputError(f"{what}={max_tokens} is longer than {model.model_name} allows (max_seq_len={model.max_seq_len})")
    if max_tokens < 4:
        raise InputError(f"{what}={max_tokens} is too short to hold a character")


def increment_labels(model) -> list[str]:
    return [label for label, _ in model.increment_sources()]


def increments(model, sequences: Iterable[Sequence[int]], *, batch_size: int = 8) -> Iterator[tuple[int, np.ndarray]]:
    """Per sequence, ``[n_sources, n_tokens]`` increments (per-head increments averaged over heads)."""
    from interp import extract

    sources = model.increment_sources()
    names = [hook for _, hook in sources]
    for index, acts in extract.stream(model, sequences, names, batch_size=batch_size):
        rows = []
        for name in names:
            t = acts[name]
            rows.append((t.mean(0) if t.dim() == 2 else t).numpy())
        yield index, np.stack(rows)
