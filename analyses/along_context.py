"""How each head's attention changes along one long context: per layer, head and log-spaced bucket of query positions,
the first-token mass, the previous-token mass, the mass within a few distances, the mean attended distance and the
entropy, read from **every** query row, exact over every key, at the model's full context.

Protocol. ``n_docs`` documents of ``length`` tokens (default: the model's context, ``max_seq_len``: SmolLM2 8,192,
Gemma 3 32,768), each the built-in English Wikipedia lead sections joined into one text with the document-start token
first (``corpora.contexts.analysis_windows``, as attention-window's stream is built), or the user's documents cut into
windows of ``length`` tokens, each starting as a document does (token ids: read as given, refused when longer than
``length``). Each document is one forward pass through ``interp.attention.model_statistics`` (every row, one chunk of
rows in memory, no logits; sliding-window layers read only their window's keys). Query position 0 sees only itself and
is left out; positions 1 .. length - 1 fall into buckets whose edges are ``floor(2 ** (i / buckets_per_octave))``
(``[start, end]``, both inclusive; ``centre`` their geometric mean). Per document, a bucket's value is the mean over
its rows; across documents, the mean of those per-document means (each document weighs the same) and a two-sided
Student-t interval at ``confidence`` over the documents that reach the bucket (mean ± t_{(1+c)/2, n-1} · s / √n, s with
n - 1 degrees of freedom: ``interval=t``, not clipped to a statistic's range, so a mass's bounds may pass 0 or 1 with
few documents; ``none`` gives no interval, and one document allows nothing else).

Statistics (``interp.attention.STATISTICS``): ``first_mass`` A_{t,0}; ``previous_mass`` A_{t,t-1}; ``window_mass_w``
Σ_{t-k ≤ w} A_{t,k}, the query's own key included (Gemma 3's 512-key sliding window is distance ≤ 511, so its local
layers have window mass 1 at w = 511 and above); ``distance_mean`` Σ_k A_{t,k} (t - k); ``entropy`` −Σ_k A_{t,k} ln
A_{t,k} (nats). ``layer_type`` is ``local`` for a sliding-window layer (the config's ``layer_types`` /
``sliding_window``, as ``model.attention_windows`` reads them) and ``global`` otherwise; ``layer_window`` its keys.

The question behind it: Gu et al. (ICLR 2025, "When Attention Sink Emerges in Language Models"), Fig. 3: Sink_1^ε
"tends to decrease with larger token lengths T", an average over all rows of sequences of length T; here the first
token's mass is followed row by row inside one document, so a fall with T shows as a fall along position. Where poslens
departs: the built-in "document" is Wikipedia leads joined (articles end and begin inside it), a few documents rather
than Gu's 100, and the intervals are over documents, not over heads or rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import may_be_nan
from analyses.registry import Adapts, Choices, Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

WANTED = ("first_mass", "previous_mass", "window_mass", "distance_mean", "entropy")
INTERVALS = ("t", "none")
NO_INTERVAL = "no interval: --interval none, or fewer than two documents reach this bucket"


def buckets(length: int, per_octave: int) -> list[tuple[int, int]]:
    """``[(start, end)]`` of query positions 1 .. length - 1, both inclusive, log-spaced: ``per_octave`` per
    doubling."""
    import math

    edges = sorted({int(math.floor(2 ** (i / per_octave)))
                    for i in range(per_octave * math.ceil(math.log2(max(2, length))) + 1)})
    edges = [e for e in edges if e < length] + [length]
    return [(a, b - 1) for a, b in zip(edges, edges[1:])]


def stat_columns(windows) -> list[str]:
    return ["first_mass", "previous_mass", *(f"window_mass_{w}" for w in windows), "distance_mean", "entropy"]


@no_grad
def document_statistics(model, ids: list[int], windows, spans, *, desc: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``(values [stat, layer, head, bucket], rows [bucket])``: each statistic of ``stat_columns(windows)`` averaged
    over the query rows of each bucket of ``spans`` in one document (NaN where the document does not reach the bucket),
    and the rows each bucket holds."""
    import numpy as np
    import torch

    from interp.attention import model_statistics
    from interp.runtime.progress import progress

    n = len(ids)
    bar = progress(None, desc or f"along-context {model.model_name}", total=model.n_layers * n)
    done: dict[str, int] = {}

    def tick(name: str, rows: int, total: int) -> None:
        bar.update(rows - done.get(name, 0))
        done[name] = rows
        bar.set_postfix_str(f"layer {name.split('.')[1]}/{model.n_layers - 1}", refresh=False)

    try:
        got = model_statistics(model, torch.tensor([ids], device=model.device), WANTED, first=(1,),
                               windows=tuple(windows), progress=tick)
    finally:
        bar.close()
    per_row = [got["first_mass"][..., 0], got["previous_mass"],
               *(got["window_mass"][..., j] for j in range(len(windows))), got["distance_mean"], got["entropy"]]
    values = torch.stack([v[:, 0] for v in per_row]).double().numpy()  # [stat, layer, head, pos]
    out = np.full(values.shape[:3] + (len(spans),), np.nan)
    rows = np.zeros(len(spans), dtype=np.int64)
    for j, (a, b) in enumerate(spans):
        b = min(b, n - 1)
        if a <= b:
            out[..., j] = values[..., a:b + 1].mean(-1)
            rows[j] = b - a + 1
    return out, rows


def across_documents(per_doc: np.ndarray, interval: str,
                     confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, low, high, n)`` over axis 0 (documents) of per-document values, NaNs (a document short of the bucket)
    left out; the Student-t interval of the module docstring (NaN with fewer than two documents or
    ``interval=none``)."""
    import numpy as np
    from scipy import stats

    n = np.sum(~np.isnan(per_doc), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(per_doc, 0) if per_doc.shape[0] else np.full(per_doc.shape[1:], np.nan)
        if interval == "none":
            return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan), n
        sd = np.sqrt(np.nansum((per_doc - mean) ** 2, 0) / (n - 1))
        half = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / np.sqrt(n)
    half = np.where(n >= 2, half, np.nan)
    return mean, mean - half, mean + half, n


def _contexts(model, n_docs: int, length: int, seed: int, documents) -> list[list[int]]:
    from corpora.contexts import analysis_windows
    from corpora.documents import input_kind
    from interp.base import InputError

    docs = [w.ids for w in analysis_windows(model, "along-context", documents, length=length, n_docs=n_docs, seed=seed)]
    if documents is not None and input_kind(documents) == "tokens":
        for i, ids in enumerate(docs):
            if len(ids) > length:
                raise InputError(f"along-context: documents[{i}] has {len(ids)} token ids, more than "
                                 f"--length {length}; cut it or raise --length")
    return [ids for ids in docs if len(ids) >= 2]


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        first, last = g["bucket_start"].min(), g["bucket_start"].max()
        mass = g.groupby("bucket_start")["first_mass"].mean()
        entropy = g.groupby("bucket_start")["entropy"].mean()
        text = (f"{model} over {int(g['length'].iloc[0])} tokens: mean first-token mass {mass[first]:.2f} at "
                f"position {first}, {mass[last]:.2f} at positions {last}-{int(g['bucket_end'].max())}; "
                f"entropy {entropy[first]:.2f} -> {entropy[last]:.2f} nats")
        local = g[g["layer_type"] == "local"]
        if len(local):
            text += f"; local layers' mean distance at most {local['distance_mean'].max():.0f} tokens"
        parts.append(text)
    return "Along the context (head means per position bucket): " + "; ".join(parts) + "."


def summary(df):
    wanted = [c for c in df.columns if c in ("first_mass", "previous_mass", "distance_mean", "entropy")
              or c.startswith("window_mass_") and not c.endswith(("_low", "_high"))]
    return (df.groupby(["model", "layer_type", "bucket_start", "bucket_end"], sort=False)
            .agg(heads=("head", "size"), n_docs=("n_docs", "first"), **{f"mean_{c}": (c, "mean") for c in wanted})
            .reset_index())


def precheck(options: dict, label) -> None:
    """Before any model loads: an interval needs two documents of the built-in corpus."""
    from analyses.registry import OptionError

    if options["interval"] != "none" and options.get("documents") is None and options["n_docs"] < 2:
        raise OptionError(f"{label('n_docs')} {options['n_docs']}: a {options['interval']}-interval needs at least 2 "
                          f"documents; give more or {label('interval')} none")


@analysis("along-context", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary,
          small=Run(("repo-small", "rope-small"), dict(n_docs=2, length=64)),
          main=Run(DECODERS, dict(length=2048, n_docs=3), quick=dict(length=128, n_docs=2), section=HEADS),
          memory=Run(("rope-small",), dict(length=256)),
          builds_logits=False, precheck=precheck)
@may_be_nan(layer_window="a global layer: every earlier key is visible",
            **{f"{s}_low": NO_INTERVAL for s in ("first_mass", "previous_mass", "window_mass_*", "distance_mean",
                                                 "entropy")},
            **{f"{s}_high": NO_INTERVAL for s in ("first_mass", "previous_mass", "window_mass_*", "distance_mean",
                                                  "entropy")})
def along_context(model, *,
                  length: Annotated[int, Help("tokens per document (default: the model's context, max_seq_len)"),
                                    Range(2), Fits(), Adapts(lambda m, o: m.max_seq_len)] = None,
                  n_docs: Annotated[int, Help("documents, each read whole; the interval is over them"), Range(1),
                                    NotWith()] = 3,
                  windows: Annotated[tuple[int, ...], Help("distances w of the window masses (keys t - k <= w, the "
                                                           "query's own included; Gemma 3's 512-key window is "
                                                           "w = 511)"),
                                     Range(0)] = (16, 512),
                  buckets_per_octave: Annotated[int, Help("position buckets per doubling of the query position"),
                                                Range(1, 16)] = 2,
                  interval: Annotated[str, Help("t: Student-t interval over documents; none: means only (needed "
                                                "with one document)"), Choices(INTERVALS)] = "t",
                  confidence: Annotated[float, Help("the interval's level"), Range(0.5, 0.999)] = 0.95,
                  seed: int = 0, documents=None) -> pd.DataFrame:
    """Each head's first-token, previous-token and window masses, mean attended distance and entropy per log-spaced
    bucket of query positions, over every row of documents at the model's full context, averaged over documents with
    intervals.

    One row per layer, head and position bucket; each statistic with its ``_low`` / ``_high`` interval columns."""
    import numpy as np
    import pandas as pd

    from interp.base import InputError

    windows = tuple(sorted(set(windows)))
    if interval != "none" and documents is None and n_docs < 2:
        raise InputError(f"along-context --n-docs {n_docs}: a {interval}-interval needs at least 2 documents; give "
                         "more or --interval none")
    docs = _contexts(model, n_docs, length, seed, documents)
    if not docs:
        raise InputError("along-context: no document holds 2 tokens")
    if interval != "none" and len(docs) < 2:
        raise InputError(f"along-context: your documents make {len(docs)} context of at most {length} tokens; a "
                         f"{interval}-interval needs at least 2 (give more documents or --interval none)")
    spans = buckets(max(len(d) for d in docs), buckets_per_octave)
    per_doc, rows = [], np.zeros(len(spans), dtype=np.int64)
    for i, ids in enumerate(docs):
        values, r = document_statistics(model, ids, windows, spans,
                                        desc=f"along-context {model.model_name} document {i + 1}/{len(docs)}")
        per_doc.append(values)
        rows += r
    mean, low, high, n = across_documents(np.stack(per_doc), interval, confidence)  # [stat, layer, head, bucket]
    columns = stat_columns(windows)
    own = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    layer, head, bucket = np.meshgrid(np.arange(model.n_layers), np.arange(model.n_heads), np.arange(len(spans)),
                                      indexing="ij")
    layer, head, bucket = layer.ravel(), head.ravel(), bucket.ravel()
    start = np.array([a for a, _ in spans])[bucket]
    end = np.array([b for _, b in spans])[bucket]
    df = pd.DataFrame(dict(model=model.model_name, layer=layer, head=head,
                           layer_type=np.where([own[l] is not None for l in layer], "local", "global"),
                           layer_window=pd.array([own[l] for l in layer], dtype="Int64"),
                           bucket_start=start, bucket_end=end, bucket_centre=np.sqrt(start * end)))
    for j, name in enumerate(columns):
        df[name], df[f"{name}_low"], df[f"{name}_high"] = mean[j].ravel(), low[j].ravel(), high[j].ravel()
    df["n_docs"] = n[0].ravel()
    df["tokens"] = rows[bucket]
    df["length"], df["interval"], df["confidence"] = max(len(d) for d in docs), interval, confidence
    return df
