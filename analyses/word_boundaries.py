"""Do learned increments mark Chinese word boundaries that the text does not? (seed 001)

Protocol, as upstream ran it: held-out Chinese documents, each cut into character-aligned windows of at
most ``max_bytes`` UTF-8 bytes run separately with no EOS; every adjacent pair of characters (i, i+1)
inside a window where both are CJK Unified Ideographs (U+4E00-U+9FFF) is a gap, labelled 1 when a word
ends at character i; its score is the increment at the UTF-8 lead byte of character i+1, per layer; stop
after the document that brings the count to ``max_gaps``. ROC-AUC per layer.

Labels come from two references on the same gaps: jieba (precise mode over the whole document) and the
PKU gold segmentation of People's Daily. The row ``layer='jieba', reference='gold'`` scores jieba's own
boundaries against gold (its AUC is balanced accuracy; precision / recall / F1 beside it).
Confidence intervals resample whole documents (gaps in one document are not independent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analyses.common import byte_model, check_window, increment_labels, increments
from analyses.stats import bootstrap_auc, roc_auc
from interp import parallel

CJK_FIRST, CJK_LAST = 0x4E00, 0x9FFF
REFERENCES = ("jieba", "gold")


def is_cjk(ch: str) -> bool:
    return CJK_FIRST <= ord(ch) <= CJK_LAST


@dataclass(frozen=True)
class Window:
    first_char: int  # index in the document of the window's first character
    text: str
    byte_ids: tuple[int, ...]
    lead_bytes: tuple[int, ...]  # offset of each character's first byte inside the window


def char_windows(text: str, max_bytes: int) -> Iterator[Window]:
    """Contiguous character-aligned windows of at most ``max_bytes`` bytes (no character is split)."""
    start, chars, ids, leads = 0, [], [], []
    for ch in text:
        b = ch.encode("utf-8")
        if ids and len(ids) + len(b) > max_bytes:
            yield Window(start, "".join(chars), tuple(ids), tuple(leads))
            start, chars, ids, leads = start + len(chars), [], [], []
        leads.append(len(ids))
        chars.append(ch)
        ids.extend(b)
    if chars:
        yield Window(start, "".join(chars), tuple(ids), tuple(leads))


def word_final_indices(words: Sequence[str]) -> set[int]:
    """Character indices at which a word ends."""
    ends, position = set(), 0
    for word in words:
        position += len(word)
        ends.add(position - 1)
    return ends


def jieba_words(text: str) -> list[str]:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return list(jieba.cut(text, cut_all=False))


@dataclass
class GapTable:
    """Every scored gap: which window and byte scores it, its labels, its document."""

    window_index: np.ndarray
    lead_byte: np.ndarray
    doc: np.ndarray
    labels: dict[str, np.ndarray]
    windows: list[Window]
    n_docs: int


def gap_table(docs, max_bytes: int, max_gaps: int) -> GapTable:
    """The gaps of the protocol, independent of any model (so the stopping document is too)."""
    win_idx, lead, doc_of, windows = [], [], [], []
    labels = {r: [] for r in REFERENCES}
    used = 0
    for d, doc in enumerate(docs):
        final = {"jieba": word_final_indices(jieba_words(doc.text))}
        if doc.words is not None:
            final["gold"] = word_final_indices(doc.words)
        for w in char_windows(doc.text, max_bytes):
            windows.append(w)
            for i in range(len(w.text) - 1):
                if is_cjk(w.text[i]) and is_cjk(w.text[i + 1]):
                    win_idx.append(len(windows) - 1)
                    lead.append(w.lead_bytes[i + 1])
                    doc_of.append(d)
                    for ref in REFERENCES:
                        labels[ref].append(int(w.first_char + i in final[ref]) if ref in final else -1)
        used = d + 1
        if len(lead) >= max_gaps:
            break
    return GapTable(np.array(win_idx), np.array(lead), np.array(doc_of),
                    {r: np.array(v) for r, v in labels.items()}, windows, used)


def validation_documents(max_docs: int):
    from corpora import people_daily

    return [d for d in people_daily() if d.split == "validation"][:max_docs]


def word_boundaries(
    model,
    *,
    docs=None,
    max_docs: int = 300,
    max_gaps: int = 40_000,
    max_bytes: int = 512,
    n_boot: int = 1000,
    seed: int = 0,
    batch_size: int = 8,
) -> pd.DataFrame:
    """ROC-AUC of each layer's increments for word boundaries, against jieba and gold segmentation.

    ``docs`` defaults to the held-out People's Daily articles (gold segmentation available).
    """
    byte_model(model, "word-boundaries")
    check_window(model, max_bytes)
    docs = validation_documents(max_docs) if docs is None else list(docs)[:max_docs]
    gaps = gap_table(docs, max_bytes, max_gaps)
    if len(gaps.lead_byte) == 0:
        raise ValueError("the documents contain no gap between two CJK characters")
    layers = increment_labels(model)
    scores = np.empty((len(layers), len(gaps.lead_byte)))
    by_window = parallel.map_items(lambda ws: [inc for _, inc in increments(model, [w.byte_ids for w in ws], batch_size=len(ws))],
                                   gaps.windows, model=model, batch_size=batch_size, desc=f"word-boundaries {model.model_name}")
    for g, (w, b) in enumerate(zip(gaps.window_index, gaps.lead_byte)):
        scores[:, g] = by_window[int(w)][:, b]

    rows = []
    for ref in REFERENCES:
        y = gaps.labels[ref]
        if (y < 0).any():
            continue  # documents without gold segmentation
        for li, layer in enumerate(layers):
            auc = roc_auc(y, scores[li])
            lo, hi = bootstrap_auc(y, scores[li], gaps.doc, n_boot=n_boot, seed=seed)
            rows.append(dict(layer=layer, layer_index=li if layer != "shared" else np.nan, reference=ref,
                             auc=auc, ci_low=lo, ci_high=hi, n_gaps=len(y),
                             positive_rate=float(y.mean()), n_docs=gaps.n_docs))
    if (gaps.labels["gold"] >= 0).all():
        gold, jb = gaps.labels["gold"], gaps.labels["jieba"]
        lo, hi = bootstrap_auc(gold, jb, gaps.doc, n_boot=n_boot, seed=seed)
        tp = int(((gold == 1) & (jb == 1)).sum())
        precision, recall = tp / max(1, int(jb.sum())), tp / max(1, int(gold.sum()))
        rows.append(dict(layer="jieba", layer_index=np.nan, reference="gold", auc=roc_auc(gold, jb), ci_low=lo,
                         ci_high=hi, n_gaps=len(gold), positive_rate=float(gold.mean()), n_docs=gaps.n_docs,
                         precision=precision, recall=recall, f1=2 * precision * recall / max(1e-12, precision + recall),
                         agreement=float((gold == jb).mean())))
    df = pd.DataFrame(rows)
    df.insert(0, "model", model.model_name)
    return df
