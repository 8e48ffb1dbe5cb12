"""Documents and the train / validation split."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

VALIDATION_FRACTION = 0.05


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    source: str
    words: tuple[str, ...] | None = None  # gold segmentation; "".join(words) == text

    @property
    def split(self) -> str:
        return split_of(self.doc_id)


def split_of(doc_id: str, validation_fraction: float = VALIDATION_FRACTION) -> str:
    """'validation' for a stable pseudo-random ``validation_fraction`` of ids, else 'train'."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")
    return "validation" if h / 2**64 < validation_fraction else "train"
