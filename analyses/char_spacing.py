"""Characters placed at their learned positions: how close the model thinks characters are. (seed 001)

The text is read as ``[EOS] + UTF-8 bytes`` (EOS makes the first character a document start, as in
training); a character's increment is the sum of its bytes' increments, the EOS column is dropped.
``per-row`` divides each layer's increments by that layer's mean (every row averages 1, so rows are
legible); ``shared`` divides all layers by one mean (later layers that advance less look compressed).
A character sits at its cumulative increment, so the gap before it is its own increment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.increment_hooks import byte_model, increment_labels, increments
from analyses.nan_policy import may_be_nan
from analyses.registry import Choices, Cli, Help, Inline, analysis
from analyses.runs import INC, INCREMENT_MODELS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TEXTS = {
    "english": "Marie Curie, a Polish-born physicist, won two Nobel Prizes.",
    "chinese": "人工智能是计算机科学的一个分支。",
}
SCALES = ("per-row", "shared")


def char_increments(model, text: str) -> np.ndarray:
    """``[n_layers, n_chars]`` increments per character (sum over its bytes)."""
    enc = model.tokenizer.encode_with_spans(text, doc_start=True)
    if len(enc.ids) > model.max_seq_len:
        from interp.base import InputError

        raise InputError(f"the text is {len(enc.ids)} bytes with EOS, longer than {model.model_name} allows "
                         f"(max_seq_len={model.max_seq_len})")
    _, inc = next(increments(model, [enc.ids]))
    per_char = np.zeros((inc.shape[0], len(text)))
    for t, (start, _end) in enumerate(enc.spans[1:], start=1):
        per_char[:, start] += inc[:, t]
    return per_char


def parse_texts(items: list[str]) -> dict[str, str]:
    """``--text ID=TEXT`` values as ``{id: text}`` (what ``documents=`` takes)."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError("expected ID=TEXT")
        if not text.strip():
            raise ValueError(f"text '{key}' is empty")
        out[key] = text
    return out


def headline(df) -> str:
    g = df[(df["scale"] == "per-row")]
    widest = g.loc[g.groupby(["model", "text_id", "layer"])["scaled"].idxmax()]
    top = widest.sort_values("scaled", ascending=False).head(4)
    return "Widest gaps (per-row scale): " + ", ".join(
        f"{r.model} {r.layer} before {r.char!r} ({r.scaled:.1f}x the row mean)" for r in top.itertuples()) + "."


def summary(df):
    d = df[df["scale"] == "per-row"]
    return d.groupby(["model", "text_id", "layer"], as_index=False).agg(widest_gap=("scaled", "max"),
                                                                        mean_increment=("increment", "mean"))


@analysis("char-spacing", needs=[Capability.INCREMENTS], headline=headline, summary=summary,
          small=Run(("increments-shared",)),
          main=Run(INCREMENT_MODELS, section=INC))
@may_be_nan(layer_index="no layer: the shared increment")
def char_spacing(model, *,
                 scales: Annotated[tuple[str, ...], Help("per-row or shared (repeatable; default: both)"),
                                   Choices(SCALES), Cli("--scale")] = SCALES,
                 documents: Annotated[object, Inline("--text", convert=parse_texts, metavar="ID=TEXT",
                                                     help="ID=TEXT to plot (repeatable; default: the blog's "
                                                          "English and Chinese sentences)")] = None) -> pd.DataFrame:
    """Each character placed at its cumulative learned position, one row per layer: tight clusters are units the
    layer packs together, wide gaps are boundaries it expands.

    One row per (text, scale, layer, character): raw and scaled increment and placed position; ``documents=``
    (``--input``, or ``--text ID=TEXT``) are the texts to plot, one per document (strings, ``Document``s or a
    ``{id: text}`` dict)."""
    import pandas as pd

    from corpora.user import user_inputs

    byte_model(model, "char-spacing")
    texts = DEFAULT_TEXTS if documents is None else {d.id: d.text for d in user_inputs(documents, "char-spacing").items}
    for bad in set(scales) - set(SCALES):
        raise ValueError(f"unknown scale {bad!r} (choose from {SCALES})")
    layers = increment_labels(model)
    rows = []
    from interp.tokenizers import check_text  # transformers: not at the command line's import

    for text_id, text in texts.items():
        text = check_text(text, f"text '{text_id}'")
        raw = char_increments(model, text)
        for scale in scales:
            div = raw.mean(axis=1, keepdims=True) if scale == "per-row" else np.full((raw.shape[0], 1), raw.mean())
            scaled = raw / div
            placed = np.cumsum(scaled, axis=1) - scaled[:, :1]
            for li, layer in enumerate(layers):
                for ci, ch in enumerate(text):
                    rows.append(dict(model=model.model_name, text_id=text_id, scale=scale, layer=layer,
                                     layer_index=li if layer != "shared" else np.nan, char_index=ci, char=ch,
                                     increment=float(raw[li, ci]), scaled=float(scaled[li, ci]),
                                     position=float(placed[li, ci]), divisor=float(div[li, 0])))
    return pd.DataFrame(rows)
