"""Positional targets per token: where it is in the document, in which segment, and how far into it.

A segment ends at terminal punctuation (. ! ?) followed by whitespace or the end of the text, or at a
newline; the next segment starts at the next non-space character. A token belongs to the segment of
its first character; special tokens (empty character spans) are excluded.

- ``token``: normalised index ``i / (n - 1)`` over the document's n content tokens;
- ``segment``: the segment index 0, 1, 2, ... (the raw count, as the seed probes it);
- ``intra``: progress inside the segment, ``(i - start) / (end - start)`` with start and end the first
  and last token of the segment (0 for one-token segments).
"""

from __future__ import annotations

import numpy as np

TARGETS = ("token", "segment", "intra")
TERMINAL = ".!?"


def segment_ids(text: str) -> np.ndarray:
    """Segment index of every character; whitespace after a boundary stays with the segment it ends."""
    ids = np.zeros(len(text), dtype=np.int64)
    seg, pending = 0, False
    for i, ch in enumerate(text):
        if pending and not ch.isspace():
            seg, pending = seg + 1, False
        ids[i] = seg
        if ch == "\n" or (ch in TERMINAL and (i + 1 == len(text) or text[i + 1].isspace())):
            pending = True
    return ids


def position_targets(text: str, spans) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, Y[len(rows), 3])``: indices of content tokens (non-empty spans) and their three targets."""
    rows = np.array([i for i, (a, b) in enumerate(spans) if b > a], dtype=np.int64)
    if len(rows) < 2:
        raise ValueError("a document needs at least two content tokens to probe positions")
    chars = segment_ids(text)
    seg = chars[[spans[i][0] for i in rows]]
    seg = seg - seg.min()
    n = len(rows)
    token = np.arange(n) / (n - 1)
    intra = np.zeros(n)
    for s in np.unique(seg):
        idx = np.flatnonzero(seg == s)
        if len(idx) > 1:
            intra[idx] = (idx - idx[0]) / (idx[-1] - idx[0])
    return rows, np.stack([token, seg.astype(np.float64), intra], axis=1)
