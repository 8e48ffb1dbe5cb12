"""Do learned increments mark Chinese word boundaries that the text does not? (seed 001)

Protocol, as upstream ran it: held-out Chinese documents, each cut into character-aligned windows of at
most ``length`` UTF-8 bytes run separately with no EOS; every adjacent pair of characters (i, i+1)
inside a window where both are CJK Unified Ideographs (U+4E00-U+9FFF) is a gap, labelled 1 when a word
ends at character i; its score is the increment at the UTF-8 lead byte of character i+1, per layer; stop
after the document that brings the count to ``max_gaps`` (or ``n_docs`` documents). ROC-AUC per layer.

Labels come from two references on the same gaps: jieba (precise mode over the whole document) and the
PKU gold segmentation of People's Daily. The row ``layer='jieba', reference='gold'`` scores jieba's own
boundaries against gold (its AUC is balanced accuracy; precision / recall / F1 beside it).
Confidence intervals resample whole documents (gaps in one document are not independent). ``n_docs`` counts the
documents that gave gaps (what the AUC rests on), ``n_docs_read`` those read; ``ci_missing`` says why an interval
is missing (fewer than two documents with gaps, say).

The user's own ``documents=`` (strings or ``corpora.documents.Document``; ``--input PATH``) replace People's
Daily: every document is read whole, in the same character-aligned windows (``n_docs`` and
``max_gaps`` do not apply), and scored against jieba, and against their gold segmentation where every one carries
it (``Document.words``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.increment_hooks import byte_model, increment_labels, increments
from analyses.nan_policy import may_be_nan
from analyses.registry import Fits, Help, NotWith, Range, analysis, check_window
from analyses.runs import INC, INCREMENT_MODELS, Run
from analyses.stats import bootstrap_auc, roc_auc
from corpora.documents import Window
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

CJK_FIRST, CJK_LAST = 0x4E00, 0x9FFF
REFERENCES = ("jieba", "gold")


def is_cjk(ch: str) -> bool:
    return CJK_FIRST <= ord(ch) <= CJK_LAST


def char_windows(text: str, max_bytes: int, document: str = "") -> Iterator[Window]:
    """Contiguous character-aligned windows of at most ``max_bytes`` UTF-8 bytes (no character is split): ``ids`` are
    the bytes, ``spans`` each byte's character ``(i, i + 1)`` in ``text``, ``text`` the characters the window holds."""
    ids, spans, index = [], [], 0
    for i, ch in enumerate(text):
        b = ch.encode("utf-8")
        if ids and len(ids) + len(b) > max_bytes:
            yield Window(document, ids, spans, index=index, text=text[spans[0][0]:i])
            ids, spans, index = [], [], index + 1
        ids.extend(b)
        spans.extend([(i, i + 1)] * len(b))
    if ids:
        yield Window(document, ids, spans, index=index, text=text[spans[0][0]:])


def lead_bytes(window: Window) -> list[int]:
    """Offset in the window of each character's first byte."""
    return [t for t, span in enumerate(window.spans) if t == 0 or span != window.spans[t - 1]]


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
    n_read: int  # documents read (up to the one that reached max_gaps)

    @property
    def n_docs(self) -> int:
        """Documents that gave at least one gap: what the AUC and its interval rest on."""
        return len(np.unique(self.doc))

    def why_no_interval(self, low: float) -> str:
        """Why the bootstrap interval is missing ('' when it is not)."""
        if np.isfinite(low):
            return ""
        if self.n_docs < 2:
            return (f"only {self.n_docs} of the {self.n_read} documents read has gaps between CJK characters; "
                    "the interval resamples documents and needs at least 2")
        return "no bootstrap resample of the documents held both word-final and word-internal gaps"


def gap_table(docs, max_bytes: int, max_gaps: int) -> GapTable:
    """The gaps of the protocol, independent of any model (so the stopping document is too)."""
    win_idx, lead, doc_of, windows = [], [], [], []
    labels = {r: [] for r in REFERENCES}
    used = 0
    for d, doc in enumerate(docs):
        final = {"jieba": word_final_indices(jieba_words(doc.text))}
        if doc.words is not None:
            final["gold"] = word_final_indices(doc.words)
        for w in char_windows(doc.text, max_bytes, doc.id):
            windows.append(w)
            leads, first = lead_bytes(w), w.spans[0][0]
            for i in range(len(w.text) - 1):
                if is_cjk(w.text[i]) and is_cjk(w.text[i + 1]):
                    win_idx.append(len(windows) - 1)
                    lead.append(leads[i + 1])
                    doc_of.append(d)
                    for ref in REFERENCES:
                        labels[ref].append(int(first + i in final[ref]) if ref in final else -1)
        used = d + 1
        if len(lead) >= max_gaps:
            break
    return GapTable(np.array(win_idx), np.array(lead), np.array(doc_of),
                    {r: np.array(v) for r, v in labels.items()}, windows, used)


def validation_documents(max_docs: int):
    from corpora import people_daily

    return [d for d in people_daily() if d.split == "validation"][:max_docs]


def headline(df) -> str:
    parts = []
    models = df[df["layer"] != "jieba"]
    for model, g in models[models["reference"] == "gold"].groupby("model", sort=False):
        best = g.loc[(g["auc"] - 0.5).abs().idxmax()]
        parts.append(f"{model}: strongest layer {best.layer} with AUC {best.auc:.3f} "
                     f"[{best.ci_low:.3f}, {best.ci_high:.3f}] vs gold")
    agree = df[df["layer"] == "jieba"]
    if len(agree):
        parts.append(f"jieba itself reaches AUC {agree.iloc[0].auc:.3f} (F1 {agree.iloc[0].f1:.3f}) against gold on "
                     "the same gaps")
    return "; ".join(parts) + "."


def summary(df):
    return df[["model", "layer", "reference", "auc", "ci_low", "ci_high", "n_gaps", "positive_rate"]]


@analysis("word-boundaries", needs=[Capability.INCREMENTS], headline=headline, summary=summary,
          small=Run(("increments-per-layer",), dict(n_docs=3, max_gaps=300, n_boot=20)),
          main=Run(INCREMENT_MODELS, quick=dict(max_gaps=3000, n_boot=100), section=INC),
          memory=Run(("increments-per-layer",), dict(length=128, max_gaps=10000000, n_boot=10)))
@may_be_nan(layer_index="no layer: the shared increment, or jieba itself",
            ci_low="bootstrap interval undefined: ci_missing says why",
            ci_high="bootstrap interval undefined: ci_missing says why", precision="only the jieba-vs-gold row has it",
            recall="only the jieba-vs-gold row has it", f1="only the jieba-vs-gold row has it",
            agreement="only the jieba-vs-gold row has it")
def word_boundaries(
    model,
    *,
    n_docs: Annotated[int, Help("documents read at most"), Range(1),
                          NotWith()] = 300,
    max_gaps: Annotated[int, Help("stop after the document that brings the gap count to this"), Range(1),
                            NotWith()] = 40_000,
    length: Annotated[int, Help("window length in bytes (at most the model's context)"), Range(4), Fits()] = 512,
    n_boot: Annotated[int, Help("bootstrap resamples (of documents) for the 95% interval"), Range(1)] = 1000,
    seed: int = 0,
    batch_size: int = 8,
    documents=None,
) -> pd.DataFrame:
    """ROC-AUC with which each layer's increment at the next character separates Chinese word boundaries from
    word-internal gaps (0.5 = chance), against jieba and the PKU gold segmentation on held-out People's Daily.

    ``documents=`` defaults to the held-out People's Daily articles (gold segmentation available).
    """
    import pandas as pd

    from interp.runtime import parallel

    byte_model(model, "word-boundaries")
    check_window(model, length)
    if documents is not None:
        from corpora.user import user_inputs

        docs, max_gaps = user_inputs(documents, "word-boundaries").items, np.inf
    else:
        docs = validation_documents(n_docs)
    gaps = gap_table(docs, length, max_gaps)
    if len(gaps.lead_byte) == 0:
        raise ValueError(f"word-boundaries: the {len(docs)} documents contain no gap between two CJK characters")
    layers = increment_labels(model)
    scores = np.empty((len(layers), len(gaps.lead_byte)))
    by_window = parallel.map_items(lambda ws: [inc for _, inc
                                               in increments(model, [w.ids for w in ws], batch_size=len(ws))],
                                   gaps.windows, model=model, batch_size=batch_size,
                                   desc=f"word-boundaries {model.model_name}")
    for g, (w, b) in enumerate(zip(gaps.window_index, gaps.lead_byte)):
        scores[:, g] = by_window[int(w)][:, b]

    rows = []
    for ref in REFERENCES:
        y = gaps.labels[ref]
        if (y < 0).any():
            continue  # documents without gold segmentation
        for li, layer in enumerate(layers):
            what = (f"word-boundaries: ROC-AUC of layer {layer} against the {ref} segmentation ({len(y)} gaps in "
                    f"{gaps.n_docs} documents)")
            auc = roc_auc(y, scores[li], what)
            lo, hi = bootstrap_auc(y, scores[li], gaps.doc, n_boot=n_boot, seed=seed, what=what)
            rows.append(dict(layer=layer, layer_index=li if layer != "shared" else np.nan, reference=ref,
                             auc=auc, ci_low=lo, ci_high=hi, n_gaps=len(y),
                             positive_rate=float(y.mean()), n_docs=gaps.n_docs, n_docs_read=gaps.n_read,
                             ci_missing=gaps.why_no_interval(lo)))
    if (gaps.labels["gold"] >= 0).all():
        gold, jb = gaps.labels["gold"], gaps.labels["jieba"]
        what = (f"word-boundaries: ROC-AUC of jieba against the gold segmentation ({len(gold)} gaps in "
                f"{gaps.n_docs} documents)")
        lo, hi = bootstrap_auc(gold, jb, gaps.doc, n_boot=n_boot, seed=seed, what=what)
        tp = int(((gold == 1) & (jb == 1)).sum())
        precision, recall = tp / max(1, int(jb.sum())), tp / max(1, int(gold.sum()))
        rows.append(dict(layer="jieba", layer_index=np.nan, reference="gold", auc=roc_auc(gold, jb, what), ci_low=lo,
                         ci_high=hi, n_gaps=len(gold), positive_rate=float(gold.mean()), n_docs=gaps.n_docs,
                         n_docs_read=gaps.n_read, ci_missing=gaps.why_no_interval(lo),
                         precision=precision, recall=recall, f1=2 * precision * recall / max(1e-12, precision + recall),
                         agreement=float((gold == jb).mean())))
    df = pd.DataFrame(rows)
    df.insert(0, "model", model.model_name)
    return df
