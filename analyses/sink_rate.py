"""Attention sinks: how many heads put most of their attention on the first token (Gu et al., ICLR 2025, "When
Attention Sink Emerges in Language Models: An Empirical View").

Protocol: per head, ``first_token_mass`` = mean over query rows 1..N-1 (at most ``max_rows``, evenly spaced) of
the attention to key 0 (``head_profiles.context_masses``, the same statistic); a head is a sink when it exceeds ``epsilon`` (the paper's 0.3). The sink rate is the share
of sink heads, per layer and overall. Conditions, each at every length of ``lengths``:

- ``input``: ``text`` (English Wikipedia leads, or the user's ``documents=``) or ``random`` (random ordinary
  tokens, ``corpora.random_tokens``): a sink that survives random tokens is positional, not semantic;
- ``start_token``: with the document-start token (BOS, or a byte model's EOS) first, or without it (the first
  token is then an ordinary one; the same text or tokens, shifted by one). Models without a start token have only
  the second.

Gu et al. find sinks in every pretrained LM they test, on the first token whatever it is, and Barbero et al. (COLM
2025, "Why do LLMs attend to the first token?") that they grow with context length and depth; a model with random
weights has none (attention is near uniform, ``first_token_mass`` about 1 / position). Each context adds its
``[layer, head]`` masses (``interp.parallel.fold_items``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Adapts, Cli, Fits, Help, NotWith, Range, analysis
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

INPUTS = ("text", "random")


def _lengths(model, options) -> tuple[int, ...]:
    return tuple(n for n in (64, 256, 1024) if n < model.max_seq_len) or (model.max_seq_len - 1,)


def _contexts(model, n_docs: int, length: int, seed: int, documents) -> dict[tuple[str, bool], list[list[int]]]:
    """``{(input, start_token): [ids]}``: each context of ``length`` tokens with and without the start token."""
    from corpora.random_tokens import random_sequences, start_token

    bos = start_token(model)
    tok = model.require_tokenizer("sink-rate")
    if documents is not None:
        from corpora.contexts import user_windows

        text = [w.ids for w in user_windows(model, "sink-rate", documents, length + 1)]
    else:
        from probes.position import probe_documents

        text = [d.ids for d in probe_documents(tok, n_docs, length + 1, seed=seed)]
    plain = [ids[1:] if bos is not None and ids and ids[0] == bos else ids for ids in text]
    rand = random_sequences(model, n_docs if documents is None else len(text), length, seed)
    out = {("text", False): [ids[:length] for ids in plain if len(ids) >= 2],
           ("random", False): rand}
    if bos is not None:
        out[("text", True)] = [[bos] + ids[: length - 1] for ids in plain if len(ids) >= 1]
        out[("random", True)] = [[bos] + r[: length - 1] for r in rand]
    return out


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        top = g[g["length"] == g["length"].max()]
        cells = ", ".join(f"{i}{' +start' if s else ''} {h['is_sink'].mean():.0%}"
                          for (i, s), h in top.groupby(["input", "start_token"], sort=False))
        parts.append(f"{model} at {top['length'].iloc[0]} tokens: {cells}")
    return f"Sink heads (first-token mass > {df['epsilon'].iloc[0]:g}): " + "; ".join(parts) + "."


def summary(df):
    return (df.groupby(["model", "input", "start_token", "length"], sort=False)
            .agg(heads=("is_sink", "size"), sink_rate=("is_sink", "mean"), mean_first_token_mass=("first_token_mass", "mean"))
            .reset_index())


@analysis("sink-rate", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary)
def sink_rate(model, *,
              lengths: Annotated[tuple[int, ...], Help("context length(s), comma-separated or repeated (those of the "
                                                       "default that fit the model)"),
                                 Range(2), Fits(), Adapts(_lengths), Cli("--length")] = (64, 256, 1024),
              n_docs: Annotated[int, Help("contexts per condition"), Range(1), NotWith()] = 8,
              epsilon: Annotated[float, Help("a head is a sink when its mean first-token attention exceeds this"),
                                 Range(0, 1)] = 0.3,
              max_rows: Annotated[int, Help("query rows read per context, evenly spaced"), Range(1)] = 256,
              seed: int = 0, documents=None) -> pd.DataFrame:
    """Share of heads whose attention goes mostly to the first token (attention sinks), per layer, on text and on
    random tokens, with and without the document-start token, at several lengths.

    One row per input, start token, length, layer and head: first-token mass and whether it exceeds epsilon."""
    import numpy as np
    import pandas as pd

    from analyses.head_profiles import context_masses
    from interp import parallel

    items, keys = [], []
    for length in lengths:
        for (kind, start), seqs in _contexts(model, n_docs, length, seed, documents).items():
            for ids in seqs:
                items.append(ids)
                keys.append((kind, start, length))
    conditions = sorted(set(keys), key=lambda k: (INPUTS.index(k[0]), k[1], k[2]))
    state = {f"{k}|{s}|{n}": np.zeros((model.n_layers, model.n_heads)) for k, s, n in conditions}
    state |= {f"count|{k}|{s}|{n}": np.zeros(1) for k, s, n in conditions}

    def add(state, i, mass):
        k, s, n = keys[i]
        state[f"{k}|{s}|{n}"] += mass
        state[f"count|{k}|{s}|{n}"] += 1

    def first_token_mass(ids):
        return context_masses(model, ids, max_rows, local_window=1)["first_token_mass"].double().numpy()

    state = parallel.fold_items(first_token_mass, items, state, add, model=model, desc=f"sink-rate {model.model_name}")
    layer, head = np.meshgrid(np.arange(model.n_layers), np.arange(model.n_heads), indexing="ij")
    frames = []
    for k, s, n in conditions:
        count = int(state[f"count|{k}|{s}|{n}"][0])
        mass = state[f"{k}|{s}|{n}"] / count
        frames.append(pd.DataFrame(dict(input=k, start_token=s, length=n, layer=layer.ravel(), head=head.ravel(),
                                        depth=layer.ravel() / max(1, model.n_layers - 1), first_token_mass=mass.ravel(),
                                        is_sink=mass.ravel() > epsilon, epsilon=epsilon, n_contexts=count)))
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "model", model.model_name)
    return df
