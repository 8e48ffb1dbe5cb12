"""Increments by byte category, from token identity alone (seed 001's per-byte table).

The increment function that reads embeddings (the shared DeltaMLP, or layer 0's of the per-layer
model) is applied to all 257 embeddings with no context; per category: min, max and mean. Per-head
increments are averaged over heads.
"""

from __future__ import annotations

import pandas as pd

from interp.base import Capability, require

CATEGORIES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("English lowercase", "a-z", tuple(range(97, 123))),
    ("English uppercase", "A-Z", tuple(range(65, 91))),
    ("Digits", "0-9", tuple(range(48, 58))),
    ("Chinese lead byte", "0xE4-0xE9", tuple(range(0xE4, 0xEA))),
    ("Continuation byte", "0x80-0xBF", tuple(range(0x80, 0xC0))),
    ("Space", "' '", (32,)),
    ("Sentence punctuation", ". ! ?", (46, 33, 63)),
    ("Other punctuation", ", ; : -", (44, 59, 58, 45)),
    ("Newline", "\\n", (10,)),
    ("EOS", "id 256", (256,)),
)


def byte_increments(model) -> pd.DataFrame:
    """One row per (source, category): min / max / mean context-free increment."""
    require(model, Capability.INCREMENTS, "byte-increments")
    rows = []
    for source, values in model.context_free_increments().items():
        values = values.float().cpu()
        if values.dim() == 2:
            values = values.mean(1)
        if values.shape[0] < 257:
            raise ValueError(f"byte-increments needs a byte-level vocabulary (257 ids); {model.model_name} has {values.shape[0]}")
        for name, members, ids in CATEGORIES:
            v = values[list(ids)]
            rows.append(dict(model=model.model_name, source=source, category=name, members=members,
                             min=float(v.min()), max=float(v.max()), mean=float(v.mean()), n_ids=len(ids)))
    return pd.DataFrame(rows)
