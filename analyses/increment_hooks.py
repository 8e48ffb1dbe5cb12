"""Reading learned increments, what the increment analyses (byte-increments, word-boundaries, entity-spacing,
char-spacing) share: which hooks carry them (``Capability.INCREMENTS``) and their values per token."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from interp.capabilities import Capability, missing, require


def byte_model(model, analysis: str) -> None:
    """Analyses built on UTF-8 byte positions need learned increments and the byte tokenizer (refused as any missing
    capability is, ``interp.capabilities.missing``)."""
    require(model, Capability.INCREMENTS, analysis)
    from interp.tokenizers import ByteTokenizer  # transformers: not at the command line's import

    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise missing(model, "a byte-level tokenizer (UTF-8 bytes as tokens)", analysis)


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
