"""Window attention and attention sinks (Xiao et al., ICLR 2024, "Efficient Streaming Language Models with Attention
Sinks", StreamingLLM): next-token loss of long documents read through a sliding window of keys, with and without the
first few tokens kept.

Protocol: ``n_docs`` documents of ``length`` tokens (English Wikipedia lead sections joined, or the user's documents cut
into windows of that length), each starting with the document-start token. Each is read with full attention and, for
every count in ``sinks``, with every layer's queries restricted to the ``window`` nearest keys plus the first that many
tokens (``interventions.KeyWindow``; 0 sinks is plain window attention). Per condition, the next-token loss in
``n_buckets`` position buckets and over the positions past the window (where the window binds). StreamingLLM: without
the first tokens the loss explodes once the text outgrows the window; with 4 kept it stays near full attention's.

With full attention the same pass reads, for up to ``max_rows`` query rows per document, where each head looks
(``part=reach``): its attention mass on keys at least ``window`` tokens back, on the first ``max(sinks)`` tokens, and on
keys past the layer's own attention window where the model has one (Gemma 3's sliding layers: exactly 0), and its
mean attended distance. Every document adds its float64 sums (``interp.parallel.fold_items``).

Unlike StreamingLLM's rolling cache, tokens keep their own positions here (see ``KeyWindow``), which for rotary models
within their trained length changes nothing the window does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Fits, Help, NotWith, Range, analysis, no_grad
from analyses.nan_policy import integer_columns, may_be_nan
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd


def conditions(sinks) -> list[tuple[str, int | None]]:
    return [("full", None)] + [("window" if s == 0 else f"window + {s} sink{'s' * (s > 1)}", s) for s in sinks]


def buckets(length: int, n: int) -> list[tuple[int, int]]:
    """``n`` ranges of target positions (1..length-1) of about equal size."""
    import numpy as np

    edges = np.unique(np.linspace(1, length, n + 1).round().astype(int))
    return list(zip(edges[:-1], edges[1:]))


@no_grad
def document_statistics(model, ids, window: int, sinks, spans, max_rows: int) -> dict:
    """One document's additive share: per condition the loss summed in each bucket and past the window; with full
    attention, each head's mass far back, on the first tokens and past its layer's own window, and its mean distance."""
    import numpy as np
    import torch

    from interp import interventions

    n = len(ids)
    tokens = torch.tensor([ids], device=model.device)
    gold = tokens[0, 1:]
    target = torch.arange(1, n)  # the positions predicted; ``spans`` are of the full length (a short last window fills fewer)
    rows = torch.unique(torch.linspace(1, n - 1, min(max_rows, n - 1)).round().long())
    distance = (rows[:, None] - torch.arange(n)[None, :]).clamp(min=0).float()  # [rows, keys]
    first = max(sinks) if sinks else 0
    own = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    shape = (model.n_layers, model.n_heads)
    out = {k: np.zeros(shape) for k in ("distance", "beyond", "sink", "beyond_own")}

    def reach(layer):
        def hook(pattern, hook):
            p = pattern[0].float().cpu()  # [head, rows, keys]
            out["distance"][layer] = (p * distance).sum(-1).mean(-1).double().numpy()
            out["beyond"][layer] = (p * (distance >= window)).sum(-1).mean(-1).double().numpy()
            out["sink"][layer] = p[..., :first].sum(-1).mean(-1).double().numpy()
            if own[layer]:
                out["beyond_own"][layer] = (p * (distance >= own[layer])).sum(-1).mean(-1).double().numpy()
        return hook

    for c, (name, s) in enumerate(conditions(sinks)):
        if s is None:
            hooks = [(f"blocks.{l}.attn.hook_pattern", reach(l)) for l in range(model.n_layers)]
            with model.query_rows(rows), model.hooks(fwd_hooks=hooks):
                logits = model(tokens)[0, :-1]
        else:
            with interventions.applied(model, interventions.KeyWindow(window, s)):
                logits = model(tokens)[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits.float(), gold, reduction="none").cpu().double()
        out[f"loss|{c}"] = np.array([float(nll[(target >= a) & (target < b)].sum()) for a, b in spans])
        out[f"beyond|{c}"] = np.array([float(nll[target >= window].sum())])
    out["tokens"] = np.array([float(((target >= a) & (target < b)).sum()) for a, b in spans])
    out["beyond_tokens"] = np.array([float((target >= window).sum())])
    return out


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        past = g[(g["part"] == "loss") & (g["bucket"] == "past the window")].set_index("condition")["loss"]
        parts.append(f"{model} ({int(g['length'].iloc[0])} tokens, window {int(g['window'].iloc[0])}): "
                     + ", ".join(f"{c} {v:.2f}" for c, v in past.items()))
    return "Loss past the window (nats per token): " + "; ".join(parts) + "."


def summary(df):
    loss = df[(df["part"] == "loss") & (df["bucket"] == "past the window")]
    return loss[["model", "condition", "sinks", "window", "loss", "n_tokens"]]


@analysis("attention-window", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary)
@may_be_nan(sinks="full attention keeps no first tokens", position="the row of every position past the window",
            loss="a reach row (where a head looks) has no loss", n_tokens="a reach row (where a head looks) has no loss",
            layer="a loss row is of the whole model", head="a loss row is of the whole model",
            depth="a loss row is of the whole model", mean_distance="a loss row is of the whole model",
            mass_beyond_window="a loss row is of the whole model", sink_mass="a loss row is of the whole model",
            mass_beyond_own_window="a loss row, or a layer without an attention window of its own")
def attention_window(model, *,
                     length: Annotated[int, Help("tokens per document"), Range(8), Fits()] = 1024,
                     n_docs: Annotated[int, Help("documents"), Range(1), NotWith()] = 4,
                     window: Annotated[int, Help("keys each query sees, itself included (must be shorter than --length)"),
                                       Range(1)] = 256,
                     sinks: Annotated[tuple[int, ...], Help("counts of first tokens kept besides the window (0: plain window "
                                                            "attention)"), Range(0)] = (0, 1, 4),
                     n_buckets: Annotated[int, Help("position buckets of the loss curve"), Range(1)] = 8,
                     max_rows: Annotated[int, Help("query rows per document for where heads look"), Range(1)] = 64,
                     seed: int = 0, documents=None) -> pd.DataFrame:
    """Next-token loss of long documents read through a sliding window of keys, with and without the first tokens kept
    (StreamingLLM), against full attention; and how far each head looks.

    Rows ``part=loss`` (condition, position bucket, and the positions past the window) and ``part=reach`` (layer, head)."""
    import numpy as np
    import pandas as pd

    from corpora.contexts import text_contexts
    from interp import parallel

    if window >= length:
        raise ValueError(f"--window {window}: the window must be shorter than the documents (--length {length}), "
                         "or nothing is left out")
    docs = [ids for ids in text_contexts(model, "attention-window", n_docs, length, seed, documents) if len(ids) > window]
    if not docs:
        raise ValueError(f"attention-window: no document is longer than the window ({window} tokens)")
    sinks = tuple(sorted(set(sinks)))
    conds = conditions(sinks)
    spans = buckets(length, n_buckets)
    shape = (model.n_layers, model.n_heads)
    state = {k: np.zeros(shape) for k in ("distance", "beyond", "sink", "beyond_own")}
    state |= {f"loss|{c}": np.zeros(len(spans)) for c in range(len(conds))}
    state |= {f"beyond|{c}": np.zeros(1) for c in range(len(conds))}
    state |= {"tokens": np.zeros(len(spans)), "beyond_tokens": np.zeros(1)}

    def add(state, i, stats):
        for k, v in stats.items():
            state[k] += v

    state = parallel.fold_items(lambda ids: document_statistics(model, ids, window, sinks, spans, max_rows), docs, state,
                                add, model=model, desc=f"attention-window {model.model_name}")
    rows = []
    for c, (name, s) in enumerate(conds):
        for (a, b), total, count in zip(spans, state[f"loss|{c}"], state["tokens"]):
            if count:
                rows.append(dict(part="loss", condition=name, sinks=s, bucket=f"{a}-{b - 1}", position=(a + b - 1) / 2,
                                 loss=total / count, n_tokens=int(count)))
        rows.append(dict(part="loss", condition=name, sinks=s, bucket="past the window", position=float("nan"),
                         loss=float(state[f"beyond|{c}"][0] / state["beyond_tokens"][0]), n_tokens=int(state["beyond_tokens"][0])))
    windows = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            rows.append(dict(part="reach", layer=layer, head=head, depth=layer / max(1, model.n_layers - 1),
                             attention=f"sliding {windows[layer]}" if windows[layer] else "full",
                             mean_distance=state["distance"][layer, head] / len(docs),
                             mass_beyond_window=state["beyond"][layer, head] / len(docs),
                             sink_mass=state["sink"][layer, head] / len(docs),
                             mass_beyond_own_window=state["beyond_own"][layer, head] / len(docs) if windows[layer] else float("nan")))
    df = integer_columns(pd.DataFrame(rows), "layer", "head", "sinks", "n_tokens")
    df.insert(0, "model", model.model_name)
    df["length"], df["window"], df["n_docs"], df["first_tokens"] = max(len(d) for d in docs), window, len(docs), max(sinks, default=0)
    return df
