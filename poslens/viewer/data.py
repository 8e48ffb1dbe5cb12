"""What the head viewer shows, computed from a model and a text without ever holding a ``[q, k]`` pattern.

**One forward pass** (``interp.attention.model_statistics``, every query row, exact over every key, one chunk of rows
in memory) gives, for every layer and head:

- the grid's statistics, each the mean over query rows 1 .. N-1 (row 0 sees only itself): ``first`` (mass on key 0),
  ``previous`` (on key q - 1), ``window`` (on keys with q - k <= ``WINDOW``, the query's own key included), ``far`` (on
  keys with q - k > ``FAR``), ``entropy`` (nats) and ``distance`` (mean attended distance q - k);
- the same statistics per block of ``block`` query rows (the head's curves along the context);
- the **block-pooled pattern** ``pooled[b, c]``: the mean of the exact pattern's entries ``A[q, k]`` over the query rows
  ``q`` of block ``b`` and the keys ``k`` of block ``c``, entries a query cannot see (above the causal diagonal, or
  outside a sliding window) counted as the 0 they are. It is the ``span_mass`` statistic with the key blocks as parts,
  summed over the block's rows and divided by ``rows(b) * keys(c)``; ``pooled[b, c] * keys(c)`` is the mass a row of
  block ``b`` puts on block ``c`` on average.

**The token level** (``pattern_rows``): a bounded set of query rows of one block, their exact pattern rows read from
``hook_pattern`` inside ``interp.attention.query_rows`` (only those rows are materialised; the pass stops after the
layer asked for). Each row keeps its ``top`` most attended keys and the ``before`` keys just before the query (itself
included), so what the page shows of a row is bounded whatever the length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

STATS = {  # key: (label, what the grid's number is)
    "first": ("first-token mass", "mean over rows 1..N-1 of A[q, 0]"),
    "previous": ("previous-token mass", "mean over rows 1..N-1 of A[q, q-1]"),
    "window": ("window mass (q-k <= 8)", "mean over rows 1..N-1 of the mass on keys with q - k <= 8"),
    "far": ("far mass (q-k > 1024)", "mean over rows 1..N-1 of the mass on keys with q - k > 1024"),
    "entropy": ("entropy (nats)", "mean over rows 1..N-1 of the row's entropy"),
    "distance": ("mean distance", "mean over rows 1..N-1 of the attended distance q - k"),
}
WINDOW, FAR = 8, 1024
MAX_BLOCKS = 32  # default block size: N / 32 rounded up, at most 256 (Gemma 3 at 32k: 128 blocks of 256)
ROWS_PER_BLOCK = 4  # token level: query rows shown per block
TOP_KEYS = 32  # a row keeps its most attended keys ...
BEFORE = 16  # ... and the keys just before the query


def default_block(n: int) -> int:
    return min(256, max(1, math.ceil(n / MAX_BLOCKS)))


def block_rows(n: int, block: int, b: int, rows: int = ROWS_PER_BLOCK) -> list[int]:
    """The query rows shown for block ``b``: ``rows`` evenly spaced from its first row to its last (every row of a
    smaller block)."""
    lo, hi = b * block, min(n, (b + 1) * block) - 1
    if lo > hi:
        raise ValueError(f"block {b} is outside 0..{math.ceil(n / block) - 1} ({n} tokens, blocks of {block})")
    if hi - lo + 1 <= rows:
        return list(range(lo, hi + 1))
    return sorted({int(round(x)) for x in np.linspace(lo, hi, rows)})


@dataclass
class HeadData:
    """Every head of one model on one text: grid ``{stat: [layer, head]}``, curves ``{stat: [layer, head, block]}``,
    ``pooled [layer, head, block, block]`` (float32)."""

    n: int
    block: int
    grid: dict
    curves: dict
    pooled: np.ndarray

    @property
    def n_blocks(self) -> int:
        return math.ceil(self.n / self.block)


def head_data(model, ids, block: int | None = None, *, progress=None) -> HeadData:
    """One forward pass over ``ids`` (one text): the grid, curves and block-pooled patterns of every head."""
    import torch

    from interp.attention import model_statistics

    tokens = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    n = tokens.shape[1]
    if n < 2:
        raise ValueError("the viewer needs a text of at least 2 tokens")
    block = block or default_block(n)
    nb = math.ceil(n / block)
    parts = torch.arange(n) // block
    options = dict(first=(1,), windows=(WINDOW, FAR), key_parts=parts, n_parts=nb)
    if progress is not None:
        options["progress"] = progress
    got = model_statistics(model, tokens.to(model.device),
                           ("first_mass", "previous_mass", "window_mass", "far_mass", "entropy", "distance_mean",
                            "span_mass"), **options)
    per_row = {"first": got["first_mass"][:, 0, :, :, 0], "previous": got["previous_mass"][:, 0],
               "window": got["window_mass"][:, 0, :, :, 0], "far": got["far_mass"][:, 0, :, :, 1],
               "entropy": got["entropy"][:, 0], "distance": got["distance_mean"][:, 0]}  # [layer, head, row]
    grid = {k: v[..., 1:].double().mean(-1).numpy() for k, v in per_row.items()}
    curves = {}
    for k, v in per_row.items():
        v = v.double().clone()
        counts = torch.bincount(parts, minlength=nb).double()
        v[..., 0] = 0.0  # row 0 left out, as in the grid
        counts[0] -= 1
        sums = torch.zeros(*v.shape[:2], nb, dtype=torch.float64).index_add_(2, parts, v)
        curves[k] = (sums / counts.clamp(min=1)).numpy()
    span = got["span_mass"][:, 0].double()  # [layer, head, row, key block]
    sums = torch.zeros(*span.shape[:2], nb, nb, dtype=torch.float64).index_add_(2, parts, span)
    sizes = torch.bincount(parts, minlength=nb).double()
    pooled = (sums / sizes[:, None] / sizes[None, :]).float().numpy()
    return HeadData(n, block, grid, curves, pooled)


class _Done(Exception):
    """Raised from the last hook a pass needs: nothing after that layer runs."""


def pattern_rows(model, ids, rows, layers) -> dict:
    """``{layer: [head, len(rows), N]}`` float32: the exact ``hook_pattern`` rows of these query rows (sorted, once
    each) at each of ``layers``, from one pass inside ``query_rows`` that stops after the last of them. A causal LM
    reads only the tokens up to the last row (no row sees a later one), so a block near the start costs a short pass;
    its rows then hold keys up to that row only."""
    import torch

    from interp.attention import query_rows
    from interp.capabilities import Capability

    tokens = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(model.device)
    rows = sorted(set(int(r) for r in rows))
    if Capability.CAUSAL_LM in getattr(model, "capabilities", ()):
        tokens = tokens[:, : rows[-1] + 1]
    layers = sorted(set(int(l) for l in layers))
    out = {}

    def keep(layer):
        def hook(pattern, hook):
            out[layer] = pattern[0].detach().float().cpu()
            if layer == layers[-1]:
                raise _Done
        return hook

    with torch.no_grad(), query_rows(rows), model.hooks(
            fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", keep(l)) for l in layers]):
        try:
            model(tokens)
        except _Done:
            pass
    return out


def bounded(row, q: int, top: int = TOP_KEYS, before: int = BEFORE) -> tuple[list[int], list[float]]:
    """The keys a row keeps (its ``top`` heaviest and the ``before`` keys ending at the query), in position order,
    with their weights."""
    import torch

    row = torch.as_tensor(row)[: q + 1]
    heavy = torch.topk(row, min(top, q + 1)).indices.tolist()
    keys = sorted(set(heavy) | set(range(max(0, q - before + 1), q + 1)))
    return keys, [float(row[k]) for k in keys]


def token_level(model, ids, rows, layers, heads, *, top: int = TOP_KEYS, before: int = BEFORE) -> dict:
    """``{(layer, head, row): (keys, weights)}`` for every layer of ``layers`` and head of ``heads``."""
    got = pattern_rows(model, ids, rows, layers)
    rows = sorted(set(int(r) for r in rows))
    out = {}
    for l, p in got.items():
        for h in heads:
            for j, q in enumerate(rows):
                out[(l, h, q)] = bounded(p[h, j], q, top, before)
    return out
