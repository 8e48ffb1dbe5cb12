"""Increments by byte category, from token identity alone (seed 001's per-byte table).

The increment function that reads embeddings (the shared DeltaMLP, or layer 0's of the per-layer
model) is applied to all 257 embeddings with no context; per category: min, max and mean. Per-head
increments are averaged over heads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyses.registry import analysis
from analyses.runs import INC, INCREMENT_MODELS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

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


def headline(df) -> str:
    parts = []
    for (model, source), g in df.groupby(["model", "source"], sort=False):
        g = g.set_index("category")["mean"]
        parts.append(f"{model} ({source}): space {g['Space']:.2f}, newline {g['Newline']:.2f}, EOS {g['EOS']:.2f}, "
                     f"a-z {g['English lowercase']:.2f}, A-Z {g['English uppercase']:.2f}")
    return "; ".join(parts) + "."


def summary(df):
    return df.pivot_table(index="category", columns=["model", "source"], values="mean", sort=False).reset_index()


@analysis("byte-increments", needs=[Capability.INCREMENTS], headline=headline, summary=summary,
          small=Run(("increments-shared", "increments-per-layer")),
          main=Run(INCREMENT_MODELS, section=INC))
def byte_increments(model) -> pd.DataFrame:
    """Increment each byte gets from its identity alone (the shared DeltaMLP, or layer 0 of the per-layer model):
    boundary bytes (space, newline, punctuation, EOS, capitals) should get larger steps than word-internal bytes.

    One row per (source, category): min / max / mean context-free increment."""
    import pandas as pd

    rows = []
    for source, values in model.context_free_increments().items():
        values = values.float().cpu()
        if values.dim() == 2:
            values = values.mean(1)
        if values.shape[0] < 257:
            raise ValueError(f"byte-increments needs a byte-level vocabulary (257 ids); {model.model_name} "
                             f"has {values.shape[0]}")
        for name, members, ids in CATEGORIES:
            v = values[list(ids)]
            rows.append(dict(model=model.model_name, source=source, category=name, members=members,
                             min=float(v.min()), max=float(v.max()), mean=float(v.mean()), n_ids=len(ids)))
    return pd.DataFrame(rows)
