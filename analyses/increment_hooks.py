"""Reading learned increments, what the increment analyses (byte-increments, word-boundaries, entity-spacing,
char-spacing) share: which hooks carry them (``Capability.INCREMENTS``) and their values per token."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from interp.capabilities import Capability, CapabilityError
from interp.tokenizers import ByteTokenizer, TokenizerError


def byte_model(model, analysis: str) -> None:
    """Analyses built on UTF-8 byte positions need learned increments and the byte tokenizer."""
    if Capability.INCREMENTS not in getattr(model, "capabilities", ()):
        raise CapabilityError(f"analysis '{analysis}' needs a model with {Capability.INCREMENTS.value}; {model.model_name} has none")
    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise TokenizerError(f"analysis '{analysis}' works on byte-level models; {model.model_name} is not one")


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
