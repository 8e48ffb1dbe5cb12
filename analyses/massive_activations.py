"""Massive activations (Sun et al., COLM 2024, "Massive Activations in Large Language Models", arXiv 2402.17762): a
few activations of the residual stream are 10^3-10^5 times the median magnitude; they sit in a few fixed feature
dimensions, at the starting token (and, in some models, the first delimiter token), appear after the first few layers
and stay nearly constant through the middle layers, and act as biases that concentrate attention on their tokens: the
mechanism behind attention sinks (their §2, Fig. 1 and Table 1 for LLaMA2-7B: top-1 2622.0 against a median of 0.2 in
a middle layer; §4, attention).

Protocol, per sequence and layer: the residual stream leaving the layer (``blocks.{l}.hook_resid_post``, the
hidden states Sun et al. plot), its ``top_k`` largest magnitudes |h| over every position and dimension, each with
its position and dimension, and the median |h| over all of them; ``ratio`` = magnitude / median. Sequences are
English Wikipedia windows of ``length`` tokens (or the user's ``documents=``), with the model's start token first and
without it (``start_token``); their first token is then an ordinary one. The sequences are the units: a summary's 95%
interval is a percentile bootstrap over them (``stats.intervals``, 10,000 resamples, seed 0), and a share of
sequences an exact binomial interval.

One row per start-token condition, layer, sequence and rank (1 = largest): ``magnitude``, ``position``, ``dim``,
``median``, ``ratio`` and ``first_token`` (the position is 0), with ``n_layers`` and ``length``. Where poslens departs
from Sun et al.: Wikipedia rather than RedPajama samples, both start-token conditions, and the de-quantised 4-bit
weights of the packaged models (4-bit quantisation is known to interact with outlier dimensions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Fits, Help, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd



def _contexts(model, n_docs: int, length: int, seed: int, documents, stage: str) -> dict[bool, list[list[int]]]:
    from corpora.contexts import analysis_windows
    from corpora.random_tokens import start_token

    bos = start_token(model)
    text = [w.ids for w in analysis_windows(model, "massive-activations", documents, length=length + 1, n_docs=n_docs,
                                            seed=seed, stage=stage)]
    plain = [ids[1:] if bos is not None and ids and ids[0] == bos else ids for ids in text]
    out = {False: [ids[:length] for ids in plain if len(ids) >= 2]}
    if bos is not None:
        out[True] = [[bos] + ids[: length - 1] for ids in plain if len(ids) >= 1]
    return out


@no_grad
def top_activations(model, ids: list[int], top_k: int) -> dict:
    """``{"magnitude", "position", "dim": [layer, top_k], "median": [layer]}`` of one sequence's residual stream
    leaving each layer (float64 / int64 numpy)."""
    import numpy as np
    import torch

    from interp.attention import StopForward

    found: dict[int, tuple] = {}

    def keep(layer):
        def hook(resid, hook):
            a = resid[0].detach().abs().double()  # [pos, d_model]
            values, flat = a.flatten().topk(min(top_k, a.numel()))
            found[layer] = (values.cpu().numpy(), (flat // a.shape[1]).cpu().numpy(), (flat % a.shape[1]).cpu().numpy(),
                            float(a.flatten().median()))
            if layer == model.n_layers - 1:
                raise StopForward  # everything is recorded: no final norm, no logits
            return resid
        return hook

    hooks = [(f"blocks.{layer}.hook_resid_post", keep(layer)) for layer in range(model.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        try:
            model(torch.tensor([ids], device=model.device))
        except StopForward:
            pass
    return {k: np.stack([found[layer][i] for layer in range(model.n_layers)])
            for i, k in enumerate(("magnitude", "position", "dim"))} | {
        "median": np.array([found[layer][3] for layer in range(model.n_layers)])}


def headline(df) -> str:
    parts = []
    top = df[df["rank"] == 1]
    for (model, start), g in top.groupby(["model", "start_token"], sort=False):
        per_layer = g.groupby("layer")["ratio"].median()
        layer = int(per_layer.idxmax())
        at = g[g.layer == layer]
        parts.append(f"{model}{' +start' if start else ''}: largest in layer {layer}, median top-1 / median "
                     f"{per_layer.max():.0f}x, at the first token in {at['first_token'].mean():.0%} of sequences")
    return "Massive activations (top-1 |residual| over the layer's median): " + "; ".join(parts) + "."


def summary(df):
    top = df[df["rank"] == 1]
    return (top.groupby(["model", "start_token", "layer"], sort=False)
            .agg(sequences=("ratio", "size"), median_ratio=("ratio", "median"), first_token=("first_token", "mean"),
                 top_dim=("dim", lambda d: int(d.mode().iloc[0])))
            .reset_index())


@analysis("massive-activations", needs=[Capability.HIDDEN_STATES, Capability.CAUSAL_LM], headline=headline,
          summary=summary,
          small=Run(("repo-small",), dict(length=32, n_docs=2)),
          main=Run(DECODERS, dict(length=64, n_docs=4), quick=dict(n_docs=1), section=HEADS),
          # Sun et al.'s statistic on 100 sequences per start-token condition, at Gu et al.'s T = 64 (the sink rows')
          real=Run(PRETRAINED, dict(length=64, n_docs=100, stage="judged"), quick=dict(n_docs=2), section=KNOWN),
          memory=Run(("rope-small",), dict(length=128)),
          builds_logits=False)  # the pass stops after the last layer's residual is read
def massive_activations(model, *,
                        length: Annotated[int, Help("tokens per sequence"), Range(2), Fits()] = 64,
                        n_docs: Annotated[int, Help("sequences per start-token condition"), Range(1)] = 8,
                        top_k: Annotated[int, Help("largest magnitudes kept per sequence and layer"), Range(1)] = 4,
                        stage: STAGE = "any", seed: int = 0, documents=None) -> pd.DataFrame:
    """The largest activations of the residual stream per layer (Sun et al.'s massive activations), their ratio to
    the layer's median magnitude, and where they sit (position, dimension), per sequence, with and without the
    start token."""
    import numpy as np
    import pandas as pd

    from corpora.random_tokens import start_token
    from interp.runtime import parallel

    items, keys, index = [], [], []
    for start, seqs in _contexts(model, n_docs, length, seed, documents, stage).items():
        for j, ids in enumerate(seqs):
            items.append(ids)
            keys.append(start)
            index.append(j)
    counts = {s: keys.count(s) for s in set(keys)}
    shape = (model.n_layers, top_k)
    state = {f"{m}|{s}": np.zeros((counts[s], *shape)) for m in ("magnitude", "position", "dim") for s in counts}
    state |= {f"median|{s}": np.zeros((counts[s], model.n_layers)) for s in counts}

    def add(state, i, stats):
        for m, v in stats.items():
            state[f"{m}|{keys[i]}"][index[i]] += v

    state = parallel.fold_items(lambda ids: top_activations(model, ids, top_k), items, state, add, model=model,
                                desc=f"massive-activations {model.model_name}")
    bos = start_token(model)
    frames = []
    for s in sorted(counts, reverse=True):
        n = counts[s]
        seq, layer, rank = np.meshgrid(np.arange(n), np.arange(model.n_layers), np.arange(top_k), indexing="ij")
        median = np.repeat(state[f"median|{s}"][:, :, None], top_k, axis=2)
        magnitude = state[f"magnitude|{s}"]
        position = state[f"position|{s}"].astype(int)
        ratio = np.divide(magnitude, median, out=np.full_like(magnitude, np.inf), where=median > 0)
        frames.append(pd.DataFrame(dict(
            start_token=s, layer=layer.ravel(), sequence=seq.ravel(), rank=rank.ravel() + 1,
            magnitude=magnitude.ravel(), position=position.ravel(), dim=state[f"dim|{s}"].astype(int).ravel(),
            median=median.ravel(), ratio=ratio.ravel(), first_token=position.ravel() == 0, length=length,
            n_layers=model.n_layers, n_docs=n)))
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "model", model.model_name)
    df["start_text"] = "none" if bos is None else model.tokenizer.decode([bos])
    return df
