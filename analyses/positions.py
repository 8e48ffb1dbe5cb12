"""What positions do heads assign? Ranges and patterns of the positions each head rotates by (seed 000).

Positions come from ``blocks.{l}.attn.hook_positions`` ``[batch, head, pos]``, which every decoder family
reports: RePo's learned z, the increment family's cumulative increments, 0..N-1 for integer RoPE and 0
for NoPE layers. So one analysis compares all of them.

``position_ranges``: per context, layer and head, d = max(z) - min(z) over the context's tokens (the
seed's distribution of ranges across heads).

``position_patterns``: z against token index for chosen layers and heads, with the structure the seed
points at made countable: a *jump* is a step |z_t - z_{t-1}| larger than ``jump_factor`` times the
head's median absolute step; a *plateau* is a run of consecutive steps each at most ``plateau_factor``
times that median (many tokens mapped to nearly one position). Integer RoPE has neither.

Inputs: the built-in NIAH prompts or Wikipedia windows (``source``, seeded), or the user's own
``documents=``: texts (strings or ``corpora.documents.Document``; ``--input PATH`` on the command line) or token
ids (``Window``s or lists of ids, read as given). A document longer than ``length`` is split into
consecutive windows of at most ``length`` tokens, each opening with the document-start token
(``corpora.user.token_windows``); every window is a context, named by the ``document`` and ``window``
columns, so integer RoPE gives d = N - 1 per window. ``position_patterns`` reads every window too; its
figure draws the first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.registry import Below, Choices, Cli, Fits, Help, NotWith, Range, analysis
from analyses.runs import DECODERS, REPO, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

SOURCE = Annotated[str, Help("niah prompts or wiki windows"), Choices(("niah", "wiki")), NotWith()]


def context_tokens_for(model, n: int, context_tokens: int, seed: int, source: str = "niah"):
    """Token sequences of ``context_tokens`` tokens (to within a sentence or word) to read positions on:
    NIAH prompts (default) or Wikipedia lead sections joined to that length."""
    tokenizer = model.require_tokenizer("positions")
    if source == "niah":
        from corpora.niah import niah_samples

        return [s.token_ids for s in niah_samples(tokenizer, n, context_tokens, seed=seed, preamble=False)]
    if source == "wiki":
        from corpora.contexts import wikipedia_windows

        return [d.ids for d in wikipedia_windows(tokenizer, n, context_tokens, seed=seed)]
    raise ValueError(f"source must be 'niah' or 'wiki', not {source!r}")


def contexts(model, *, n: int, context_tokens: int, seed: int, source: str, documents=None):
    """``[(document, window, ids)]``: the user's documents in windows (or their token ids), or the built-in source
    (NIAH prompts, or Wikipedia windows: ``corpora.contexts.analysis_windows``)."""
    if documents is None and source != "wiki":
        return [(f"niah:{i}", 0, ids)
                for i, ids in enumerate(context_tokens_for(model, n, context_tokens, seed, source))]
    from corpora.contexts import analysis_windows

    windows = analysis_windows(model, "positions", documents, length=context_tokens, n_docs=n, seed=seed)
    if documents is None:
        return [(f"{source}:{i}", 0, w.ids) for i, w in enumerate(windows)]
    return [(w.document, w.index, w.ids) for w in windows]


def _modes(model) -> list[str]:
    if hasattr(model, "position_modes"):
        return model.position_modes()
    if Capability.INCREMENTS in model.capabilities:
        return ["increments"] * model.n_layers
    return ["rope"] * model.n_layers


def ranges_headline(df) -> str:
    per_head = df.groupby(["model", "mode", "layer", "head"], sort=False).agg(d=("d", "mean"), n=("n_tokens", "median"))
    parts = []
    for model, g in per_head.groupby(level=0, sort=False):
        modes = ", ".join(f"{mode} heads {h['d'].median():.3g} ({h['d'].min():.3g}-{h['d'].max():.3g})"
                          for mode, h in g.groupby(level=1, sort=False))
        parts.append(f"{model} ({int(g['n'].median())} tokens): {modes}")
    return "Position range d per head, median (min-max): " + "; ".join(parts) + "."


def ranges_summary(df):
    per_head = df.groupby(["model", "layer", "head", "mode"], as_index=False).agg(d=("d", "mean"),
                                                                                  n_tokens=("n_tokens", "median"))
    return per_head.groupby(["model", "mode"], as_index=False, sort=False).agg(
        heads=("d", "size"), d_min=("d", "min"), d_median=("d", "median"), d_max=("d", "max"),
        n_tokens=("n_tokens", "median"))


@analysis("position-ranges", needs=[Capability.POSITIONS], headline=ranges_headline, summary=ranges_summary,
          small=Run(("repo-small",), dict(n_docs=1, length=64, source="wiki")),
          main=Run(DECODERS + ("increments-per-layer", "smollm2"), dict(n_docs=4, length=512), quick=dict(n_docs=1),
                   per_model={"smollm2": dict(n_docs=2, length=256)}, section=REPO),
          memory=Run(("repo-small",), dict(length=256)))
def position_ranges(model, *,
                    n_docs: Annotated[int, Help("contexts"), Range(1), NotWith()] = 8,
                    length: Annotated[int, Help("tokens per context"), Range(2), Fits()] = 512,
                    source: SOURCE = "niah", seed: int = 0, documents=None) -> pd.DataFrame:
    """Range d = max - min of the positions each head assigns within a context, across heads: small d means a head
    packs the context into a narrow span (local re-organisation), large d a wide one; integer RoPE gives d = N - 1.

    One row per context (or window of the user's documents), layer and head: d = max - min of the assigned
    positions, with min and max."""
    import pandas as pd

    from interp import extract
    from interp.runtime import parallel
    names = [f"blocks.{l}.attn.hook_positions" for l in range(model.n_layers)]
    modes = _modes(model)
    rows = []
    if length > model.max_seq_len:
        raise ValueError(f"--length={length} is longer than {model.model_name} allows "
                         f"(max_seq_len={model.max_seq_len})")
    ctx = contexts(model, n=n_docs, context_tokens=length, seed=seed, source=source, documents=documents)
    seqs = [ids for _, _, ids in ctx]

    def extremes(batch):
        """Per context ``[layer, head]`` min and max of the positions, and the number of tokens."""
        out = []
        for _, acts in extract.stream(model, batch, names, batch_size=len(batch)):
            z = np.stack([acts[name].numpy() for name in names])  # [layer, head, pos]
            out.append((z.min(-1), z.max(-1), z.shape[-1]))
        return out

    for c, (z_min, z_max, n) in enumerate(parallel.map_items(extremes, seqs, model=model, batch_size=4,
                                                             desc=f"position-ranges {model.model_name}")):
        for l in range(len(names)):
            for h in range(z_min.shape[1]):
                rows.append(dict(model=model.model_name, context=c, document=ctx[c][0], window=ctx[c][1], layer=l,
                                 head=h, mode=modes[l], d=float(z_max[l, h] - z_min[l, h]), z_min=float(z_min[l, h]),
                                 z_max=float(z_max[l, h]), n_tokens=n))
    return pd.DataFrame(rows)


def jumps_and_plateaus(z: np.ndarray, jump_factor: float, plateau_factor: float):
    """(is_jump [n], plateau_run_id [n] or -1, median |step|, longest plateau in tokens) for one head's positions."""
    steps = np.abs(np.diff(z))
    median = float(np.median(steps)) if len(steps) else 0.0
    is_jump = np.concatenate([[False], steps > jump_factor * median])
    flat = steps <= plateau_factor * median
    run_id = np.full(len(z), -1)
    longest, current, run = 1 if len(z) else 0, 1, 0
    for t, f in enumerate(flat, start=1):
        if f:
            current += 1
            run_id[t - current + 1 : t + 1] = run
        else:
            if current > 1:
                run += 1
            current = 1
        longest = max(longest, current)
    return is_jump, run_id, median, longest


def patterns_headline(df) -> str:
    per_head = df.drop_duplicates(["model", "layer", "head"])
    parts = []
    for model, g in per_head.groupby("model", sort=False):
        top = g.sort_values("longest_plateau", ascending=False).iloc[0]
        parts.append(f"{model}: {int(g['n_jumps'].sum())} jumps over {len(g)} heads; longest "
                     f"plateau {int(top.longest_plateau)} tokens (layer {top.layer}, head {top['head']})")
    return "; ".join(parts) + "."


def patterns_summary(df):
    return df.drop_duplicates(["model", "layer", "head"])[["model", "layer", "head", "mode", "n_jumps",
                                                           "longest_plateau", "median_step"]]


@analysis("position-patterns", needs=[Capability.POSITIONS], headline=patterns_headline, summary=patterns_summary,
          small=Run(("repo-small",), dict(length=64, layers=(1, 2), source="wiki")),
          main=Run(("repo-small", "increments-per-layer"), dict(length=256),
                   per_model={"repo-small": dict(length=256, layers=(1, 3))}, section=REPO))
def position_patterns(model, *,
                      layers: Annotated[tuple[int, ...], Help("layer(s) to plot, comma-separated or repeated "
                                                              "(default: all)"),
                                        Below("n_layers"), Cli("--layer")] = None,
                      heads: Annotated[tuple[int, ...], Help("head(s) to plot (default: all)"), Below("n_heads"),
                                       Cli("--head")] = None,
                      length: Annotated[int, Help("tokens in the context"), Range(2), Fits()] = 256,
                      source: SOURCE = "niah",
                      jump_factor: Annotated[float, Help("a jump is a step above this many median steps"),
                                             Range(0)] = 5.0,
                      plateau_factor: Annotated[float, Help("a plateau step is at most this many median steps"),
                                                Range(0)] = 0.1,
                      seed: int = 0, documents=None) -> pd.DataFrame:
    """Assigned position against token index for chosen layers and heads, with jumps (steps above k times the median
    step) and plateaus (runs of near-zero steps) counted per head: a straight line is plain RoPE.

    Assigned position per token for chosen layers / heads of one context (or every window of the user's
    documents), with jumps and plateaus."""
    import pandas as pd

    from interp import extract

    layers = list(range(model.n_layers)) if layers is None else list(layers)
    heads = list(range(model.n_heads)) if heads is None else list(heads)
    for l in layers:
        if not 0 <= l < model.n_layers:
            raise ValueError(f"layer {l} does not exist in {model.model_name} ({model.n_layers} layers)")
    for h in heads:
        if not 0 <= h < model.n_heads:
            raise ValueError(f"head {h} does not exist in {model.model_name} ({model.n_heads} heads)")
    if length > model.max_seq_len:
        raise ValueError(f"--length={length} is longer than {model.model_name} allows "
                         f"(max_seq_len={model.max_seq_len})")
    ctx = contexts(model, n=1, context_tokens=length, seed=seed, source=source, documents=documents)
    names = [f"blocks.{l}.attn.hook_positions" for l in layers]
    modes = _modes(model)
    frames = []
    for document, window, seq in ctx:
        acts = extract.run_and_collect(model, [seq], names)
        tokens = model.tokenizer.token_strings(seq)
        for l, name in zip(layers, names):
            for h in heads:
                z = acts[name][0, h].numpy()
                is_jump, run_id, median, longest = jumps_and_plateaus(z, jump_factor, plateau_factor)
                frames.append(pd.DataFrame(dict(
                    model=model.model_name, document=document, window=window, layer=l, head=h, mode=modes[l],
                    token_index=np.arange(len(z)), token=tokens, position=z.astype(np.float64), is_jump=is_jump,
                    plateau=run_id,
                    n_jumps=int(is_jump.sum()), longest_plateau=longest, median_step=median, jump_factor=jump_factor,
                    plateau_factor=plateau_factor)))
    return pd.concat(frames, ignore_index=True)
