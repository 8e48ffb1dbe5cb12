"""What the head viewer shows, computed from a model and a text without ever holding a ``[q, k]`` pattern.

**One forward pass** (``interp.attention.model_statistics``, every query row, exact over every key, one chunk of rows
in memory) gives, for every layer and head:

- the grid's statistics, each the mean over query rows 1 .. N-1 (row 0 sees only itself): ``first`` (mass on key 0),
  ``previous`` (on key q - 1), ``window`` (on keys with q - k <= ``WINDOW``, the query's own key included), ``far`` (on
  keys with q - k > ``FAR``), ``entropy`` (nats) and ``distance`` (mean attended distance q - k);
- the same statistics per block of ``block`` query rows (the head's curves along the context; NaN for a block with no
  row but row 0, drawn as a gap);
- the **block-pooled pattern** ``pooled[b, c]``: the mean of the exact pattern's entries ``A[q, k]`` over the query rows
  ``q`` of block ``b`` and the keys ``k`` of block ``c``, entries a query cannot see (above the causal diagonal, or
  outside a sliding window) counted as the 0 they are. It is the ``span_mass`` statistic with the key blocks as parts,
  summed over the block's rows and divided by ``rows(b) * keys(c)``; ``pooled[b, c] * keys(c)`` is the mass a row of
  block ``b`` puts on block ``c`` on average.

**The token level** (``pattern_rows``): a bounded set of query rows of one block, their exact pattern rows read from
``hook_pattern`` inside ``interp.attention.query_rows`` (only those rows are materialised; the pass stops after the
layer asked for). Each row keeps its ``top`` most attended keys and the ``before`` keys just before the query (itself
included), so what the page shows of a row is bounded whatever the length.

**The live server's recording** (``Recorded``): one forward pass at start-up keeps each layer's queries and keys
(``interp.attention.recording_calls``) and the mask as a description; a click's rows are then a ``[rows, keys]``
product (``recorded_token_level``), equal to ``pattern_rows``' up to float rounding. Families it cannot serve exactly
(an additive bias such as the DSTG encoder's relative-position bias or ALiBi, given scores, hooked patterns) raise
``NotRecordable`` and the server falls back to ``token_level`` per click.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

STATS = {  # key: (label, the attention statistic whose row value the grid averages, its parameter)
    "first": ("first-token mass", "first_mass", "k = 1"),
    "previous": ("previous-token mass", "previous_mass", ""),
    "window": ("window mass (q-k <= 8)", "window_mass", "w = 8"),
    "far": ("far mass (q-k > 1024)", "far_mass", "w = 1024"),
    "entropy": ("entropy (nats)", "entropy", ""),
    "distance": ("mean distance", "distance_mean", ""),
}
WINDOW, FAR = 8, 1024
MAX_BLOCKS = 32  # default block size: N / 32 rounded up, at most 256 (Gemma 3 at 32k: 128 blocks of 256)
ROWS_PER_BLOCK = 4  # token level: query rows shown per block
TOP_KEYS = 32  # a row keeps its most attended keys ...
BEFORE = 16  # ... and the keys just before the query


def about(key: str) -> str:
    """The grid statistic's one-sentence definition: the mean over rows of the attention statistic's own meaning
    (``interp.attention.statistics.STATISTICS``, the text the analysis docs show), with its parameter."""
    from interp.attention.statistics import STATISTICS

    _, name, param = STATS[key]
    meaning = STATISTICS[name].split(", one column per")[0].replace("``", "")
    return f"Mean over query rows 1..N-1 of the {meaning}" + (f" ({param})." if param else ".")


def constant_at(key: str, n: int) -> str | None:
    """Why statistic ``key`` is the same for every head at ``n`` tokens (a window every key is inside, a distance
    no key is at), or None where it varies."""
    if key == "far" and n - 1 <= FAR:
        return f"0 for every head at {n:,} tokens: no key is more than {FAR} back"
    if key == "window" and n - 1 <= WINDOW:
        return f"1 for every head at {n:,} tokens: every key is within {WINDOW}"
    return None


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
        curves[k] = torch.where(counts > 0, sums / counts.clamp(min=1), math.nan).numpy()  # no rows: NaN, not 0
    span = got["span_mass"][:, 0].double()  # [layer, head, row, key block]
    sums = torch.zeros(*span.shape[:2], nb, nb, dtype=torch.float64).index_add_(2, parts, span)
    sizes = torch.bincount(parts, minlength=nb).double()
    pooled = (sums / sizes[:, None] / sizes[None, :]).float().numpy()
    return HeadData(n, block, grid, curves, pooled)


class _Done(Exception):
    """Raised from the last hook a pass needs: nothing after that layer runs."""


def pattern_rows(model, ids, rows, layers, each=None) -> dict:
    """``{layer: [head, len(rows), N]}`` float32: the exact ``hook_pattern`` rows of these query rows (sorted, once
    each) at each of ``layers``, from one pass inside ``query_rows`` that stops after the last of them. A causal LM
    reads only the tokens up to the last row (no row sees a later one), so a block near the start costs a short pass;
    its rows then hold keys up to that row only. ``each(layer, rows)``, when given, takes each layer's rows as they
    come instead (nothing is kept: the rows of every layer at a long length need not fit at once)."""
    import torch

    from interp.attention import query_rows
    from interp.capabilities import Capability

    tokens = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(model.device)
    rows = sorted(set(int(r) for r in rows))
    if Capability.CAUSAL_LM in getattr(model, "capabilities", ()):
        tokens = tokens[:, : rows[-1] + 1]
    layers = sorted(set(int(l) for l in layers))
    out = {}
    each = each or out.__setitem__

    def keep(layer):
        def hook(pattern, hook):
            each(layer, pattern[0].detach().float().cpu())
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
    """The keys a row keeps (its ``top`` heaviest among the keys it sees, and the ``before`` keys ending at the query),
    in position order, with their weights. The keys it sees are those of positive weight: the causal future and a
    window's far keys are exactly 0, and an encoder's row keeps the keys after the query."""
    import torch

    row = torch.as_tensor(row)
    seen = torch.nonzero(row > 0).flatten()
    heavy = seen[torch.topk(row[seen], min(top, len(seen))).indices].tolist()
    keys = sorted(set(heavy) | set(range(max(0, q - before + 1), q + 1)))
    return keys, [float(row[k]) for k in keys]


def bound_rows(p, rows, heads, top: int = TOP_KEYS, before: int = BEFORE) -> dict:
    """``bounded`` of every row of ``p [head, len(rows), N]`` at once (one ``topk``): ``{(head, row): (keys,
    weights)}``."""
    import torch

    p = torch.as_tensor(p).float()
    values, index = torch.topk(p, min(top, p.shape[-1]), dim=-1)
    index, seen = index.tolist(), (values > 0).tolist()
    out = {}
    for h in heads:
        weights = p[h].tolist()
        for j, q in enumerate(rows):
            keys = sorted({k for k, s in zip(index[h][j], seen[h][j]) if s} | set(range(max(0, q - before + 1), q + 1)))
            out[(h, q)] = keys, [weights[j][k] for k in keys]
    return out


def token_level(model, ids, rows, layers, heads, *, top: int = TOP_KEYS, before: int = BEFORE) -> dict:
    """``{(layer, head, row): (keys, weights)}`` for every layer of ``layers`` and head of ``heads``."""
    rows = sorted(set(int(r) for r in rows))
    out = {}

    def each(layer, p):
        out.update({(layer, h, q): kw for (h, q), kw in bound_rows(p, rows, heads, top, before).items()})

    pattern_rows(model, ids, rows, layers, each)
    return out


class NotRecordable(Exception):
    """A model whose attention the recorded path cannot reproduce exactly (see ``Recorded``)."""


@dataclass
class _Layer:
    q: object  # [head, N, d] in the model's dtype
    k: object  # [kv_head, N, d]
    causal: bool
    windows: tuple
    scale: float
    softcap: float | None


def _window_of(bias, n_q: int, n_k: int, causal: bool) -> int | None:
    """A boolean ``[1, 1, n_q, n_k]`` mask as the sliding window ``w`` it is (key visible iff ``0 <= q - k < w``, or
    ``|q - k| < w`` where not causal), verified row chunk by row chunk; 0 for every key visible; None where it is
    neither (then it is not recorded)."""
    import torch

    from interp.attention.budget import rows_per_chunk
    from interp.attention.mask import window_visible

    if bias.dtype != torch.bool or bias.dim() != 4 or bias.shape[0] != 1 or bias.shape[1] != 1:
        return None
    m = bias[0, 0, :, :n_k]
    last = m[-1]
    w = int(last.sum()) if m.shape[0] == n_q else -1
    if w < 1:
        return None
    offset = n_k - n_q
    keys = torch.arange(n_k, device=m.device)
    step = rows_per_chunk(m.device, 2 * n_k)
    for a in range(0, n_q, step):
        e = min(n_q, a + step)
        q_abs = torch.arange(a + offset, e + offset, device=m.device)
        want = window_visible(q_abs, keys, ((w, 0),)) if w < n_k else torch.ones(e - a, n_k, dtype=torch.bool,
                                                                                   device=m.device)
        if causal:
            want = want & (keys[None, :] <= q_abs[:, None])
        if not torch.equal(m[a:e], want):
            return None
    return 0 if w >= n_k else w


class Recorded:
    """One forward pass over a text that keeps, per layer, what its attention was handed: queries and keys (after
    rotation, learned positions and norms, in the model's dtype, the batch's one row), the scale, the soft-cap and the
    mask **as a description** (causal, key windows, the cache offset; a materialised boolean mask only where it is a
    sliding window or all-visible, verified, and kept as that window). ``rows(layer, rows)`` then gives those rows'
    exact pattern ``[head, len(rows), N]`` from a ``[rows, keys]`` product: the logits as the materialised backend
    builds them (``interp.attention.logits``, in the model's dtype), the windows hidden, the softmax in float32. No
    ``[q, k]`` mask or bias is ever kept.

    ``record`` raises ``NotRecordable`` (the caller falls back to a forward pass per click, ``pattern_rows``) where a
    layer is not one ``AttentionCall`` with one q/k and a describable mask: given ``scores`` (hooked logit
    components), an additive bias (the DSTG encoder's relative-position bias, ALiBi), any other materialised mask, a
    hooked scores or pattern (an edit the recorded rows would not carry), or a layer called twice or not at all.
    ``MemoryError`` with the bytes needed and free where the recording does not fit (checked at the first layer, before
    anything is kept)."""

    def __init__(self, layers: dict, n: int):
        self.layers, self.n = layers, n

    @staticmethod
    def needed_bytes(q, k, n_layers: int) -> int:
        return n_layers * (q[0].numel() * q.element_size() + k[0].numel() * k.element_size())

    @classmethod
    def record(cls, model, ids, *, free_bytes: int | None = None) -> Recorded:
        import torch

        from interp.attention import recording_calls

        tokens = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(model.device)
        n_layers = model.n_layers
        names = {f"blocks.{l}.attn.hook_pattern": l for l in range(n_layers)}
        layers: dict = {}
        seen: dict = {}  # a mask shared by layers (transformers makes one per kind) is verified once

        def on_call(call):
            layer = names.get(call.name)
            if layer is None or layer in layers:
                raise NotRecordable(f"attention {call.name!r}: not one call per layer")
            if call.scores is not None or call.hooked:
                raise NotRecordable(f"{call.name}: given scores or hooked scores / pattern")
            if call.q.shape[0] != 1 or call.mask.offset != 0:
                raise NotRecordable(f"{call.name}: not one row of the whole text")
            windows = tuple(call.mask.windows)
            if call.bias is not None:
                key = (call.bias.data_ptr(), tuple(call.bias.shape), call.causal)
                if key not in seen:
                    seen[key] = _window_of(call.bias, call.mask.n_q, call.mask.n_k, call.causal)
                w = seen[key]
                if w is None:
                    raise NotRecordable(f"{call.name}: a bias or mask that is not a sliding window")
                if w:
                    windows += ((w, 0),)
            if not layers:
                need = cls.needed_bytes(call.q, call.k, n_layers)
                free = free_bytes if free_bytes is not None else available_bytes(call.q.device)
                if need > free:
                    raise MemoryError(
                        f"the live viewer's recording needs {need / 2**30:.2f} GiB for the queries and keys of "
                        f"{n_layers} layers at {tokens.shape[1]} tokens ({call.q.dtype}) and {free / 2**30:.2f} GiB "
                        f"is free on {call.q.device}: use a shorter --length or a machine with more memory")
            layers[layer] = _Layer(call.q[0].detach().clone(), call.k[0].detach().clone(), call.causal, windows,
                                   float(call.scale), call.softcap)
            if len(layers) == n_layers:
                raise _Done  # the last attention's inputs are kept: its output, the MLP and the head are not needed

        with torch.no_grad(), recording_calls(on_call):
            try:
                model(tokens)
            except _Done:
                pass
        if len(layers) != n_layers:
            raise NotRecordable(f"{n_layers - len(layers)} layers never called attention")
        return cls(layers, tokens.shape[1])

    def rows(self, layer: int, rows) -> object:
        """``[head, len(rows), N]`` float32: the exact pattern rows of these query rows at ``layer``."""
        import torch

        from interp.attention.mask import logits, window_visible

        rec = self.layers[layer]
        q, k = rec.q[None], rec.k[None]
        sel = torch.as_tensor(list(rows), dtype=torch.long, device=q.device)
        if k.shape[1] != q.shape[1]:  # as the materialised backend: repeated key heads
            k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        s = logits(q.index_select(-2, sel), k, sel, self.n, causal=rec.causal, scale=rec.scale, softcap=rec.softcap)
        if rec.windows:
            s = s.masked_fill_(~window_visible(sel, torch.arange(self.n, device=q.device), rec.windows),
                               float("-inf"))
        return torch.softmax(s.float(), -1)[0].cpu()


def available_bytes(device) -> int:
    """Free memory on ``device``: CUDA's free bytes, else the host's ``MemAvailable``."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def recorded_token_level(rec: Recorded, rows, layers, heads, *, top: int = TOP_KEYS, before: int = BEFORE) -> dict:
    """``token_level`` from a recording: the same ``{(layer, head, row): (keys, weights)}``."""
    rows = sorted(set(int(r) for r in rows))
    out = {}
    for l in sorted(set(int(x) for x in layers)):
        out.update({(l, h, q): kw for (h, q), kw in bound_rows(rec.rows(l, rows), rows, heads, top, before).items()})
    return out
