"""Result columns named as the options are, and the renames a table written by an older poslens still carries.

A column that records an option's value, or what the option counted, has the option's name: ``n_docs`` is how many
documents, windows, contexts or prompts were read, ``length`` their tokens (the longest, where the user's own
documents or prompts set it), ``niah_prompts`` the NIAH prompts read beside them, ``n_train`` / ``n_test`` the probe's
documents. ``RENAMED`` holds, per analysis, each column's old name and its new one. A CSV is read back through
``current`` wherever poslens reads one (``figures.render.read_result`` and ``read_table``, so ``poslens figure``;
``poslens.known_results``): an old name is renamed with a ``PoslensDeprecationWarning`` naming the new one, until
``interp.deprecated.REMOVAL``. README.md's "Deprecated names" lists every entry (tests/unit/interp/test_deprecated.py
checks both ways). Nothing here imports pandas.
"""

from __future__ import annotations

import warnings

from interp import deprecated
from interp.deprecation import PoslensDeprecationWarning

RENAMED: dict[str, dict[str, str]] = {
    "attention-mass": {"n_samples": "n_docs", "context_tokens": "length"},
    "niah-accuracy": {"n_samples": "n_docs", "context_tokens": "length"},
    "loss-neutrality": {"n_windows": "n_docs", "context": "length"},
    "head-profiles": {"n_contexts": "n_docs", "context_tokens": "length", "n_samples": "niah_prompts"},
    "rope-frequencies": {"n_contexts": "n_docs", "context_tokens": "length", "n_samples": "niah_prompts",
                         "logit_share": "poslens_logit_share"},
    "retrieval-heads": {"n_samples": "niah_prompts", "prompt_tokens": "length"},
    "sink-rate": {"n_contexts": "n_docs", "is_sink": "sink_share"},
    "position-probes": {"n_train_docs": "n_train", "n_test_docs": "n_test"},
}


def old_spelling(analysis: str, column: str) -> str:
    """How README.md's "Deprecated names" and the warning write an old column: ``sink-rate column is_sink``."""
    return f"{analysis} column {column}"


def current(analysis: str, df, source: str = "", *, quiet: bool = False):
    """``df`` (an ``analysis`` table read from ``source``) with its old column names replaced by the current ones, each
    with a ``PoslensDeprecationWarning`` unless ``quiet``; a table that already has the new column keeps both."""
    renames = {old: new for old, new in RENAMED.get(analysis, {}).items()
               if old in df.columns and new not in df.columns}
    if not quiet:
        for old, new in renames.items():
            warnings.warn((f"{source}: " if source else "") + deprecated.message(old_spelling(analysis, old), new),
                          PoslensDeprecationWarning, stacklevel=3)
    return df.rename(columns=renames) if renames else df
