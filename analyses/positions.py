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
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp import extract, parallel
from interp.base import Capability, require


def context_tokens_for(model, n: int, context_tokens: int, seed: int, source: str = "niah"):
    """Token sequences of ``context_tokens`` tokens (to within a sentence or word) to read positions on:
    NIAH prompts (default) or Wikipedia lead sections joined to that length."""
    tokenizer = model.require_tokenizer("positions")
    if source == "niah":
        from corpora.niah import niah_samples

        return [s.token_ids for s in niah_samples(tokenizer, n, context_tokens, seed=seed, preamble=False)]
    if source == "wiki":
        from probes.position import probe_documents

        return [d.ids for d in probe_documents(tokenizer, n, context_tokens, seed=seed)]
    raise ValueError(f"source must be 'niah' or 'wiki', not {source!r}")


def _modes(model) -> list[str]:
    if hasattr(model, "position_modes"):
        return model.position_modes()
    if Capability.INCREMENTS in model.capabilities:
        return ["increments"] * model.n_layers
    return ["rope"] * model.n_layers


def position_ranges(model, *, n_contexts: int = 8, context_tokens: int = 512, source: str = "niah", seed: int = 0) -> pd.DataFrame:
    """One row per context, layer and head: d = max - min of the assigned positions, with min and max."""
    require(model, Capability.POSITIONS, "position-ranges")
    if context_tokens > model.max_seq_len:
        raise ValueError(f"--context-tokens={context_tokens} is longer than {model.model_name} allows (max_seq_len={model.max_seq_len})")
    names = [f"blocks.{l}.attn.hook_positions" for l in range(model.n_layers)]
    modes = _modes(model)
    rows = []
    seqs = context_tokens_for(model, n_contexts, context_tokens, seed, source)

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
                rows.append(dict(model=model.model_name, context=c, layer=l, head=h, mode=modes[l], d=float(z_max[l, h] - z_min[l, h]),
                                 z_min=float(z_min[l, h]), z_max=float(z_max[l, h]), n_tokens=n))
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


def position_patterns(model, *, layers=None, heads=None, context_tokens: int = 256, source: str = "niah",
                      jump_factor: float = 5.0, plateau_factor: float = 0.1, seed: int = 0) -> pd.DataFrame:
    """Assigned position per token for chosen layers / heads of one context, with jumps and plateaus."""
    require(model, Capability.POSITIONS, "position-patterns")
    layers = list(range(model.n_layers)) if layers is None else list(layers)
    heads = list(range(model.n_heads)) if heads is None else list(heads)
    for l in layers:
        if not 0 <= l < model.n_layers:
            raise ValueError(f"layer {l} does not exist in {model.model_name} ({model.n_layers} layers)")
    for h in heads:
        if not 0 <= h < model.n_heads:
            raise ValueError(f"head {h} does not exist in {model.model_name} ({model.n_heads} heads)")
    seq = context_tokens_for(model, 1, context_tokens, seed, source)[0]
    names = [f"blocks.{l}.attn.hook_positions" for l in layers]
    acts = extract.run_and_collect(model, [seq], names)
    tokens = model.tokenizer.token_strings(seq)
    modes = _modes(model)
    frames = []
    for l, name in zip(layers, names):
        for h in heads:
            z = acts[name][0, h].numpy()
            is_jump, run_id, median, longest = jumps_and_plateaus(z, jump_factor, plateau_factor)
            frames.append(pd.DataFrame(dict(
                model=model.model_name, layer=l, head=h, mode=modes[l], token_index=np.arange(len(z)), token=tokens,
                position=z, is_jump=is_jump, plateau=run_id, n_jumps=int(is_jump.sum()), longest_plateau=longest,
                median_step=median, jump_factor=jump_factor, plateau_factor=plateau_factor)))
    return pd.concat(frames, ignore_index=True)
