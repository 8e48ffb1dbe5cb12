"""The one attention every family runs through (``attend``), with hookable scores and pattern that cost nothing unless
used, and per-head statistics of every query row in the memory of a forward pass.

When no hook is attached to ``hook_attn_scores`` / ``hook_pattern`` the output comes from
``scaled_dot_product_attention`` and no ``[q, k]`` matrix is built. When one is attached, the scores and
pattern are materialised and passed through the hooks, so edits to them change the output.

Inside ``query_rows(idx)`` only the listed query rows are materialised: the hooks see
``[batch, head, len(idx), key_pos]``, the output of those rows is recomputed from the (possibly edited)
pattern rows and every other row comes from the fused kernel.

Inside ``collecting_statistics(wanted, ...)`` each attention records, under its ``hook_pattern`` name, the
statistics of ``STATISTICS`` (mass on the first k keys, on the token itself, on the previous token, on keys within
distance w, on labelled key parts; mean and spread of the attended distance; entropy; the most attended key) for
**every** query row, exact over every key. Where every statistic asked for allows it (masses on the first keys, on
the token itself, the previous one and a window; span masses; no soft-cap and no ``scores``), the forward's own flash
kernel runs with its log-sum-exp ``L`` per row: its output keeps the bits of the forward without statistics, a key's
mass is ``exp(s - L)`` so masses on a few keys come from those keys' logits alone (one block of rows and their band at a
time), and statistics of the key alone ride a second flash call as value columns (part indicators). No ``[q, k]`` block
exists and the cost is the forward's plus a band (and a second kernel pass where value columns are wanted). On SmolLM2
at 2,048 tokens, against float64 statistics of the same ``q, k``: band masses within 1.6e-6 (the chunked float32 path:
1.6e-6), value-column masses 3e-6. Entropy could ride too (``L - scale q . E[k]``, ``E[k]`` as value columns) but
misses by 1.8e-5 (``L`` is the log-sum-exp of float32 logits, ``E[s]`` that of exact ones; chunked: 7e-6), so it does
not. Entropy, distances (``E[j^2] - E[j]^2`` over positions in the thousands cancels in float32), far mass (``1 -
window`` is off by 1.7e-6) and the top key need every key of the row against the query: for them rows are taken one
chunk at a time (``chunk_bytes`` of scores): the chunk's pattern is built in place, reduced, and multiplied by the
values to give that chunk's output, so the statistics ride the forward pass and never more than one chunk of ``[rows,
keys, heads]`` of one layer exists. ``model_statistics`` runs it over a model and stops after the last attention (no
logits). Peers read a few rows (the research code of retrieval heads, SnapKV) or hold every ``[head, N, N]`` pattern
(transformers' ``output_attentions``, TransformerLens).

Inside ``key_window(names, window, sinks)`` each attention named there sees only the keys less than ``window``
positions from its query and the first ``sinks`` keys (StreamingLLM's window with sinks; ``interventions.KeyWindow``).
Without hooks or statistics it attends one chunk of query rows at a time to that chunk's keys only (the window's span
and the sinks), so no ``[q, k]`` mask exists and a window runs at any length in the memory of one chunk; with hooks,
statistics or spans the window joins ``bias`` as a boolean mask.

Inside ``decoding(cache)`` each attention module that supports it rotates its new tokens from ``cache.past``,
appends their keys and values to a ``KVCache`` and attends from the new tokens only, under ``cache.visible``'s
mask where it gives one (a sliding window; ``interp.streaming.RollingCache``'s evictions), so greedy generation
runs one token per step; its hooks then see the new query rows against every cached key.

Inside ``collecting_spans(rows, key_parts, n_parts)`` every attention records, under its ``hook_pattern`` name, the
attention mass ``[batch, head, len(rows), n_parts]`` of those query rows on each part of the keys (``key_parts`` labels
each key): the ``span_mass`` statistic of ``collecting_statistics`` for those rows (the part indicators as values of a
fused kernel; with pattern hooks, the edited pattern rows summed), as are ``span_masses`` and ``model_span_masses``.
``stop_after`` ends the forward pass (``StopForward``) once that hook name is recorded, before its layer's output is
computed.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

_QUERY_ROWS: contextvars.ContextVar[Tensor | None] = contextvars.ContextVar("poslens_query_rows", default=None)


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def query_rows(rows):
    """Restrict materialised attention scores / patterns to these query positions (1-D integer indices).

    Indices must be whole numbers (2.7 is refused, never truncated to row 2); each is checked against the
    sequence length when an attention hook runs."""
    given = torch.as_tensor(rows).flatten()
    if given.dtype == torch.bool or given.is_complex():
        raise ValueError(f"query_rows takes integer positions, got dtype {given.dtype}")
    if given.is_floating_point() and not (torch.isfinite(given).all() and (given == given.round()).all()):
        bad = given[~(torch.isfinite(given) & (given == given.round()))][0].item()
        raise ValueError(f"query_rows takes integer positions, got {bad}")
    idx = given.long()
    if idx.numel() == 0:
        raise ValueError("query_rows needs at least one query position")
    if (idx < 0).any():
        raise ValueError(f"query_rows takes positions from 0, got {int(idx.min())}")
    return _setting(_QUERY_ROWS, idx)


def current_query_rows(n_queries: int | None = None) -> Tensor | None:
    """The rows set by ``query_rows``, checked against ``n_queries`` query positions when given."""
    rows = _QUERY_ROWS.get()
    if rows is not None and n_queries is not None and int(rows.max()) >= n_queries:
        raise IndexError(f"query_rows asks for query position {int(rows.max())}, but this forward pass has "
                         f"{n_queries} query positions (0..{n_queries - 1})")
    return rows


class KVCache:
    """Keys (after rotation) and values ``[batch, pos, kv_head, d]`` of the tokens already run, per module."""

    def __init__(self):
        self._kv: dict[torch.nn.Module, tuple[Tensor, Tensor]] = {}

    def past(self, owner: torch.nn.Module) -> int:
        """How many positions ``owner`` has cached: the absolute index of its next token."""
        return self._kv[owner][0].shape[1] if owner in self._kv else 0

    def append(self, owner: torch.nn.Module, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if owner in self._kv:
            k, v = torch.cat([self._kv[owner][0], k], 1), torch.cat([self._kv[owner][1], v], 1)
        self._kv[owner] = (k, v)
        return k, v

    def select(self, rows) -> None:
        """Keep these batch rows (finished sequences leave the batch)."""
        idx = torch.as_tensor(rows, dtype=torch.long)
        self._kv = {m: (k[idx.to(k.device)], v[idx.to(v.device)]) for m, (k, v) in self._kv.items()}

    def visible(self, owner: torch.nn.Module, n_q: int, n_k: int, window: int | None = None) -> Tensor | None:
        """Additive mask ``[1, 1, n_q, n_k]`` (0 or -inf) of the keys ``append`` returned, the queries being the last
        ``n_q`` of them, or None where the causal mask is all there is (no ``window``: keys a query may see, itself
        included)."""
        if window is None:
            return None
        q = torch.arange(n_k - n_q, n_k)[:, None]
        k = torch.arange(n_k)[None, :]
        far = (k > q) | (q - k >= window)
        return torch.zeros(n_q, n_k).masked_fill_(far, float("-inf"))[None, None]


_KV_CACHE: contextvars.ContextVar[KVCache | None] = contextvars.ContextVar("poslens_kv_cache", default=None)


def decoding(cache: KVCache):
    return _setting(_KV_CACHE, cache)


def current_kv_cache() -> KVCache | None:
    return _KV_CACHE.get()


class StopForward(Exception):
    """Raised inside a forward pass once everything asked for has been recorded."""


@dataclass
class SpanRequest:
    """What ``collecting_spans`` yields: the ``span_mass`` statistic of its rows, in the order asked for."""

    rows: Tensor  # query positions, as asked for (repeats and order kept)
    key_parts: Tensor  # [k_pos] integer label per key
    n_parts: int
    stop_after: str | None = None
    statistics: StatisticsRequest | None = None  # the statistics request that records them

    @property
    def masses(self) -> dict[str, Tensor]:
        """hook_pattern name -> ``[batch, head, rows, n_parts]``."""
        order = torch.searchsorted(self.statistics.rows, self.rows)
        return {name: got["span_mass"].index_select(2, order) for name, got in self.statistics.results.items()}


@contextlib.contextmanager
def collecting_spans(rows, key_parts, n_parts: int, *, stop_after: str | None = None):
    """Record each attention's mass of these query rows on each key part; yields the ``SpanRequest``
    whose ``masses`` fill in during the forward pass. Pattern hooks, if any, see these rows only (sorted, once each).
    The ``span_mass`` statistic of ``collecting_statistics``, kept under this name."""
    request = SpanRequest(torch.as_tensor(rows, dtype=torch.long).flatten(),
                          torch.as_tensor(key_parts, dtype=torch.long).flatten(), int(n_parts), stop_after)
    if request.rows.numel() == 0:
        raise ValueError("collecting_spans needs at least one query position")
    with collecting_statistics(("span_mass",), key_parts=request.key_parts, n_parts=request.n_parts, rows=request.rows,
                               stop_after=stop_after) as statistics:
        request.statistics = statistics
        yield request


def part_indicators(key_parts: Tensor, n_parts: int, dtype=torch.float32) -> Tensor:
    """``[k_pos, n_parts]`` one-hot rows; a key labelled outside 0..n_parts-1 belongs to no part."""
    valid = (key_parts >= 0) & (key_parts < n_parts)
    return F.one_hot(torch.where(valid, key_parts, n_parts), n_parts + 1)[:, :n_parts].to(dtype)


def span_masses(q: Tensor, k: Tensor, key_parts: Tensor, n_parts: int, *, scale: float | None = None,
                causal: bool = True, bias: Tensor | None = None, rows: Tensor | None = None) -> Tensor:
    """Attention mass of query rows on each key part, ``[batch, head, rows, n_parts]``, without the pattern.

    ``q [batch, head, q_pos, d]``, ``k [batch, kv_head, k_pos, d]`` (``kv_head`` divides ``head``: grouped
    query heads share a key head), ``key_parts [k_pos]`` integer labels, ``rows`` indices into ``q_pos``
    (all when None). Causal queries are the last ``q_pos`` of the ``k_pos`` positions (a KV cache);
    ``bias`` is added to the scores as in ``attend``. The ``span_mass`` statistic of ``StatisticsRequest``: the part
    indicators as values of a fused kernel, no pattern row built.
    """
    h, d = q.shape[1], q.shape[-1]
    kv, n_k = k.shape[1], k.shape[2]
    if h % kv:
        raise ValueError(f"span_masses: {h} query heads cannot share {kv} key heads")
    if key_parts.shape != (n_k,):
        raise ValueError(f"span_masses: key_parts has shape {tuple(key_parts.shape)}, expected ({n_k},) for {n_k} keys")
    given = None if rows is None else torch.as_tensor(rows, dtype=torch.long).flatten()
    request = StatisticsRequest(("span_mass",), key_parts=key_parts, n_parts=n_parts, rows=given)
    q, k = q.float(), k.float()
    request.attend("span_masses", q, k, k, causal=causal, bias=bias,
                   scale=scale if scale is not None else 1.0 / math.sqrt(d), softcap=None, scores=None)
    got = request.results["span_masses"]["span_mass"]
    if given is not None:
        got = got.index_select(2, torch.searchsorted(request.rows, given))
    return got.to(q.device)


def hooked(hook) -> bool:
    """Whether anything would see or keep this hook point's value: TransformerLens hooks or plain torch hooks."""
    return hook is not None and bool(hook._forward_hooks or hook._forward_pre_hooks or hook.has_hooks())


def causal_mask(n_q: int, n_k: int, device, rows: Tensor | None = None) -> Tensor:
    """Boolean ``[q, k]`` mask, True where the key is visible; the queries are the last ``n_q`` of the
    ``n_k`` positions (all of them without a cache)."""
    q_idx = rows.to(device) if rows is not None else torch.arange(n_q, device=device)
    return torch.arange(n_k, device=device)[None, :] <= q_idx[:, None] + (n_k - n_q)


def grouped_matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a [batch, head, r, x] @ b [batch, kv_head, x, y]`` with query heads grouped onto key heads, no copy of
    ``b``."""
    n, h, r, x = a.shape
    kv = b.shape[1]
    if kv == h:
        return torch.matmul(a, b)
    return torch.matmul(a.reshape(n, kv, h // kv, r, x), b[:, :, None]).reshape(n, h, r, -1)


def _rows_of(mask: Tensor, rows: Tensor, n_k: int) -> Tensor:
    m = mask if mask.shape[-2] == 1 else mask.index_select(-2, rows.to(mask.device))
    return m[..., :n_k]


def logits(q: Tensor, k: Tensor, rows: Tensor, n_q: int, *, causal: bool, bias: Tensor | None = None, scale: float,
           softcap: float | None = None, scores: Tensor | None = None, rows_selected: bool = False) -> Tensor:
    """Masked logits ``[batch, head, len(rows), k_pos]`` of the query rows ``rows`` (indices into ``n_q`` queries; ``q``
    holds those rows only). ``bias`` is additive (``-inf`` masks) or boolean (True: visible); ``scores``, when given,
    are the full scaled logits ``[batch, head, n_q, k_pos]`` and replace ``q . k * scale``. Keys past the diagonal are
    ``-inf`` whatever they held (NaN or inf too). ``rows_selected``: ``bias`` and ``scores`` hold these rows already."""
    n_k = k.shape[-2]
    if scores is not None:
        s = scores.clone() if rows_selected or rows.numel() == n_q else scores.index_select(-2, rows.to(scores.device))
    else:
        s = grouped_matmul(q, k.transpose(-1, -2)).mul_(scale)
    if softcap is not None:
        s = torch.tanh(s / softcap).mul_(softcap)
    if bias is not None:
        m = bias[..., :n_k] if rows_selected else _rows_of(bias, rows, n_k)
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    if causal:
        s = s.masked_fill_(~causal_mask(n_q, n_k, s.device, rows), float("-inf"))
    return s


def _first_visible(bias: Tensor | None, rows: Tensor, keys: int) -> int:
    """The first key any of these rows may see under a boolean mask (a sliding window starts late), else 0."""
    if bias is None or bias.dtype != torch.bool:
        return 0
    seen = _rows_of(bias, rows, keys).reshape(-1, keys).any(0)
    return int(seen.to(torch.uint8).argmax()) if bool(seen.any()) else 0


def _fused(q: Tensor, k: Tensor, v: Tensor, *, causal: bool, bias: Tensor | None, scale: float,
           softcap: float | None) -> Tensor:
    """Attention output ``[batch, head, q, d_v]`` without a pattern: the fused kernel (row chunks when soft-capped)."""
    n_q = q.shape[-2]
    if softcap is not None:
        out = []
        for start in range(0, n_q, CHUNK_ROWS):
            rows = torch.arange(start, min(start + CHUNK_ROWS, n_q), device=q.device)
            s = logits(q[..., start:start + len(rows), :], k, rows, n_q, causal=causal, bias=bias, scale=scale,
                       softcap=softcap)
            out.append(grouped_matmul(torch.softmax(s.float(), -1).to(v.dtype), v))
        return torch.cat(out, -2)
    mask, is_causal = _sdpa_mask(q, k, causal=causal, bias=bias)
    gqa = k.shape[1] != q.shape[1]
    spans = _key_spans(mask, n_q, k.shape[-2])
    if spans is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    return torch.cat([F.scaled_dot_product_attention(q[..., a:e, :], k[..., lo:hi, :], v[..., lo:hi, :],
                                                     attn_mask=_mask_rows(mask, a, e)[..., lo:hi], scale=scale,
                                                     enable_gqa=gqa)
                      for a, e, lo, hi in spans], -2)


MASK_ROWS = 1024  # query rows of one fused call where a mask hides whole stretches of keys from them


def _mask_rows(mask: Tensor, a: int, e: int) -> Tensor:
    return mask if mask.shape[-2] == 1 else mask[..., a:e, :]


def _key_spans(mask: Tensor | None, n_q: int, n_k: int) -> list[tuple[int, int, int, int]] | None:
    """Chunks of query rows ``[a, e)`` and the keys ``[lo, hi)`` that any of their rows may see under ``mask``, where
    calling the fused kernel per chunk on those keys only skips at least a quarter of the work (a sliding window, a
    materialised causal mask at length: the kernel cannot skip what a mask hides, and turns a boolean mask into a
    float ``[q, k]`` block). None where one call over every key is as good. Hidden keys add nothing to a row's softmax,
    so the result is the same up to float rounding."""
    if mask is None or n_q < 2 * MASK_ROWS:
        return None
    spans, kept = [], 0
    for a in range(0, n_q, MASK_ROWS):
        e = min(n_q, a + MASK_ROWS)
        part = _mask_rows(mask, a, e)[..., :n_k]
        seen = (part if part.dtype == torch.bool else part > float("-inf")).flatten(0, -2).any(0).nonzero()
        lo, hi = (int(seen[0]), int(seen[-1]) + 1) if seen.numel() else (0, n_k)
        spans.append((a, e, lo, hi))
        kept += (e - a) * (hi - lo)
    return spans if 4 * kept <= 3 * n_q * n_k else None


def _sdpa_mask(q: Tensor, k: Tensor, *, causal: bool, bias: Tensor | None) -> tuple[Tensor | None, bool]:
    """The ``attn_mask`` and ``is_causal`` that ``_fused`` hands the fused kernel (so the statistics' kernel gets the
    same)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = None if bias is None else (bias if bias.dtype == torch.bool else bias.to(q.dtype))
    if mask is not None:
        mask = mask[..., :n_k]
    if causal and (mask is not None or n_q != n_k):
        visible = causal_mask(n_q, n_k, q.device)
        mask = visible if mask is None else (mask & visible if mask.dtype == torch.bool
                                             else mask.masked_fill(~visible, float("-inf")))
    return mask, causal and mask is None and n_q > 1


_KEY_WINDOWS: contextvars.ContextVar[dict[str, tuple[tuple[int, int], ...]] | None] = contextvars.ContextVar(
    "poslens_key_windows", default=None)
WINDOW_CHUNK_BYTES = 16 << 20  # scores of one chunk of query rows against its window's keys


@contextlib.contextmanager
def key_window(names, window: int, sinks: int = 0):
    """Inside, the attentions whose ``hook_pattern`` names are in ``names`` see only the keys less than ``window``
    positions from the query (itself included; both ways where attention is bidirectional) and the first ``sinks``
    keys. Nested windows on one attention all hold (a key must be visible under each)."""
    window, sinks = int(window), int(sinks)
    if window < 1 or sinks < 0:
        raise ValueError(f"key_window: window={window} must be at least 1 and sinks={sinks} at least 0")
    current = dict(_KEY_WINDOWS.get() or {})
    for name in names:
        current[name] = current.get(name, ()) + ((window, sinks),)
    with _setting(_KEY_WINDOWS, current):
        yield


def current_key_windows(name: str | None) -> tuple[tuple[int, int], ...]:
    """The ``(window, sinks)`` conditions ``key_window`` set on the attention called ``name`` (none: ``()``)."""
    return (_KEY_WINDOWS.get() or {}).get(name, ()) if name else ()


def _window_visible(q_abs: Tensor, keys: Tensor, windows) -> Tensor:
    """Boolean ``[rows, keys]``: True where every ``(window, sinks)`` lets query ``q_abs`` see key ``keys``."""
    d = (q_abs[:, None] - keys[None, :]).abs()
    visible = torch.ones(d.shape, dtype=torch.bool, device=d.device)
    for window, sinks in windows:
        visible &= (d < window) | (keys[None, :] < sinks)
    return visible


def _with_windows(bias: Tensor | None, windows, n_q: int, n_k: int, device) -> Tensor:
    """``bias`` with the key windows folded in as a materialised ``[q, k]`` mask (where hooks, statistics or spans read
    rows of the scores)."""
    visible = _window_visible(torch.arange(n_k - n_q, n_k, device=device), torch.arange(n_k, device=device), windows)
    if bias is None:
        return visible[None, None]
    b = bias[..., :n_k]
    return b & visible if b.dtype == torch.bool else b.masked_fill(~visible, float("-inf"))


def _windowed(q: Tensor, k: Tensor, v: Tensor, windows, *, causal: bool, bias: Tensor | None, scale: float,
              softcap: float | None, scores: Tensor | None) -> Tensor:
    """Attention output under key windows, one chunk of query rows at a time against only the keys that chunk may see
    (the first ``sinks`` and the window's span), so memory is one chunk's ``[rows, window + rows + sinks]`` scores."""
    b, h, n_q, _ = q.shape
    n_k = k.shape[-2]
    offset = n_k - n_q
    window, sinks = min(windows, key=lambda ws: ws[0] + ws[1])  # every visible key lies in this one's span
    rows_per = max(1, min(max(window, 64), WINDOW_CHUNK_BYTES // (4 * b * h * (max(window, 64) + window + sinks))))
    out = []
    for a in range(0, n_q, rows_per):
        e = min(n_q, a + rows_per)
        lo = max(0, a + offset - window + 1)
        hi = min(n_k, e + offset) if causal else min(n_k, e + offset + window - 1)
        keys = torch.cat([torch.arange(min(sinks, lo)), torch.arange(lo, hi)]).to(q.device)
        q_abs = torch.arange(a + offset, e + offset, device=q.device)
        visible = _window_visible(q_abs, keys, windows)
        if causal:
            visible &= keys[None, :] <= q_abs[:, None]
        mask = visible[None, None]
        if bias is not None:
            part = _rows_of(bias, torch.arange(a, e), n_k).index_select(-1, keys.to(bias.device))
            mask = part & mask if part.dtype == torch.bool else part.to(torch.float32).masked_fill(~mask, float("-inf"))
        kk, vv = k.index_select(-2, keys), v.index_select(-2, keys)
        if softcap is None and scores is None:
            if mask.dtype != torch.bool:
                mask = mask.to(q.dtype)
            z = F.scaled_dot_product_attention(q[..., a:e, :], kk, vv, attn_mask=mask, scale=scale,
                                               enable_gqa=k.shape[1] != q.shape[1])
        else:
            s = (scores[..., a:e, :].index_select(-1, keys).float() if scores is not None
                 else grouped_matmul(q[..., a:e, :], kk.transpose(-1, -2)).float().mul_(scale))
            if softcap is not None:
                s = torch.tanh(s / softcap).mul_(softcap)
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
            z = grouped_matmul(torch.softmax(s, -1).to(v.dtype), vv)
        out.append(z)
    return torch.cat(out, -2)


CHUNK_ROWS = 1024  # query rows per chunk where the fused kernel cannot run (logit soft-capping)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    bias: Tensor | None = None,
    hook_scores=None,
    hook_pattern=None,
    scale: float | None = None,
    softcap: float | None = None,
    scores: Tensor | None = None,
) -> Tensor:
    """Attention output ``[batch, head, q_pos, d_v]`` from ``q, k [batch, head, pos, d]`` and ``v``; ``k`` and ``v``
    may have fewer heads (grouped-query attention: key head j serves query heads j*rep .. j*rep+rep-1). Every family
    attends through this function, so hooks, ``query_rows``, ``collecting_spans`` and ``collecting_statistics`` hold
    for all of them.

    ``bias`` is an additive ``[batch or 1, head or 1, q_pos, k_pos]`` term (ALiBi, relative bias, a cache's mask) or a
    boolean mask (True: visible, as transformers' sdpa masks); masked entries are ``-inf`` in the scores handed to
    ``hook_scores`` and 0 in the pattern. ``softcap`` is Gemma 2's tanh logit cap. ``scores``, when given, are the
    full scaled logits (a model that sums hooked logit components) and replace ``q . k * scale``; ``q`` and ``k`` then
    only give shapes.
    """
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    name = getattr(hook_pattern, "name", None) if hook_pattern is not None else None
    stats = current_statistics() if name else None
    n_q, n_k = q.shape[-2], k.shape[-2]
    windows = current_key_windows(name)
    if windows:
        if not (hooked(hook_scores) or hooked(hook_pattern)) and stats is None:
            return _windowed(q, k, v, windows, causal=causal, bias=bias, scale=scale, softcap=softcap, scores=scores)
        bias = _with_windows(bias, windows, n_q, n_k, q.device)
    if not (hooked(hook_scores) or hooked(hook_pattern)):
        if stats is not None:
            return stats.attend(name, q, k, v, causal=causal, bias=bias, scale=scale, softcap=softcap, scores=scores)
        if scores is None:
            return _fused(q, k, v, causal=causal, bias=bias, scale=scale, softcap=softcap)
        return grouped_matmul(torch.softmax(logits(q, k, torch.arange(n_q), n_q, causal=causal, bias=bias, scale=scale,
                                                   scores=scores).float(), -1).to(v.dtype), v)

    if k.shape[1] != q.shape[1]:  # materialised anyway: repeated key heads give the bits of a model that repeats them
        k, v = k.repeat_interleave(q.shape[1] // k.shape[1], 1), v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    rows = current_query_rows(n_q)
    sel = torch.arange(n_q, device=q.device) if rows is None else rows.to(q.device)
    s = logits(q if rows is None else q.index_select(-2, sel), k, sel, n_q, causal=causal, bias=bias, scale=scale,
               softcap=softcap, scores=scores)
    if hook_scores is not None:
        s = hook_scores(s)
    if s.dtype == v.dtype == torch.float32 and not s.requires_grad and not hooked(hook_scores):
        pattern = torch._softmax(s, -1, False, out=s)  # in place: no one else holds these scores
    else:
        pattern = torch.softmax(s.float(), dim=-1).to(v.dtype)
    if hook_pattern is not None:
        pattern = hook_pattern(pattern)
    if stats is not None:
        stats.check_keys(n_k)
        stats.record(name, stats.of_pattern(pattern, sel, n_q, n_k))
    z_sel = grouped_matmul(pattern, v)
    if rows is None:
        return z_sel
    if scores is not None:
        rest = grouped_matmul(torch.softmax(logits(q, k, torch.arange(n_q), n_q, causal=causal, bias=bias, scale=scale,
                                                   scores=scores).float(), -1).to(v.dtype), v)
    else:
        rest = _fused(q, k, v, causal=causal, bias=bias, scale=scale, softcap=softcap)
    return rest.index_copy(-2, sel, z_sel)


STATISTICS = {
    "first_mass": "mass on the first k keys, one column per k of ``first``",
    "self_mass": "mass on the query's own key",
    "previous_mass": "mass on key q - 1 (0 at position 0)",
    "window_mass": "mass on keys with |q - k| <= w, the query's own key included, one column per w of ``windows``",
    "far_mass": "mass on keys with |q - k| > w, one column per w of ``windows`` (0 exactly where the pattern is)",
    "span_mass": "mass on each labelled part of the keys, one column per part",
    "distance_mean": "attended distance |q - k| (positions), its mean under the pattern row",
    "distance_std": "its standard deviation under the pattern row",
    "entropy": "entropy of the pattern row (nats)",
    "top_key": "the most attended key (its position)",
    "top_mass": "the weight of that key",
}
CHUNK_BYTES = 64 << 20  # scores of one chunk of query rows (x3 for the temporaries of the statistics)
FUSED_STATISTICS = frozenset({"first_mass", "self_mass", "previous_mass", "window_mass", "span_mass"})
# first_mass of at most this many keys is read from the band block; more: an indicator value column
FIRST_GATHERED = 256
BAND_ROWS = 128  # query rows of one band block (with their window's keys and the first keys)


def _flash_serves(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float) -> bool:
    """Whether ``scaled_dot_product_attention`` runs these inputs through the CPU flash kernel, whose log-sum-exp
    ``_flash_with_lse`` returns with the very output ``_fused`` gives."""
    if (q.device.type != "cpu" or q.dtype not in (torch.float32, torch.float64) or k.dtype != q.dtype
            or v.dtype != q.dtype):
        return False
    if q.requires_grad or k.requires_grad or v.requires_grad:
        return False
    from torch.nn.attention import SDPBackend

    choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=scale, enable_gqa=k.shape[1] != q.shape[1])
    return choice == int(SDPBackend.FLASH_ATTENTION)


def _additive(mask: Tensor | None, dtype) -> Tensor | None:
    """A boolean mask as 0 / ``-inf`` (what ``scaled_dot_product_attention`` hands its flash kernel)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def _flash_with_lse(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
                    scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp [batch, head, q])`` of the CPU flash kernel; ``mask`` boolean or additive, handed to the
    kernel additive (``_additive``) in the chunks ``_fused`` calls it in (``_key_spans``). Grouped key heads are
    repeated as ``scaled_dot_product_attention`` repeats them, so the output has its bits."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    spans = _key_spans(mask, q.shape[-2], k.shape[-2])
    if spans is None:
        return flash(q, k, v, 0.0, is_causal, attn_mask=_additive(mask, q.dtype), scale=scale)
    parts = [flash(q[..., a:e, :], k[..., lo:hi, :], v[..., lo:hi, :], 0.0, False,
                   attn_mask=_additive(_mask_rows(mask, a, e)[..., lo:hi], q.dtype), scale=scale)
             for a, e, lo, hi in spans]
    return torch.cat([z for z, _ in parts], -2), torch.cat([lse for _, lse in parts], -1)


def _padded(t: Tensor, width: int) -> Tensor:
    return t if t.shape[-1] == width else F.pad(t, (0, width - t.shape[-1]))


@dataclass
class StatisticsRequest:
    """Per-head statistics of every query row (or of ``rows``), exact over all keys.

    Without pattern hooks, where ``FUSED_STATISTICS`` holds every statistic wanted, the forward's flash kernel gives
    the output and each row's log-sum-exp, and the statistics come from a band of keys per row and value columns
    (``_fused``). Otherwise, one chunk of rows at a time, a chunk's ``[batch, head, rows, keys]`` logits are built,
    turned into the pattern in place, reduced to the statistics and, when every row is read, multiplied by the values:
    the chunk's attention output, so the statistics ride the forward pass and no other ``[q, k]`` block exists. Causal
    chunks stop at their last row's key. With pattern hooks the (possibly edited) hooked rows are reduced instead."""

    wanted: tuple[str, ...]
    first: tuple[int, ...] = (1,)
    windows: tuple[int, ...] = ()
    key_parts: Tensor | None = None
    n_parts: int = 0
    rows: Tensor | None = None
    chunk_bytes: int = CHUNK_BYTES
    stop_after: str | None = None
    progress: object = None  # called as progress(name, rows_done, rows_total)
    results: dict[str, dict[str, Tensor]] = field(default_factory=dict)

    def __post_init__(self):
        unknown = sorted(set(self.wanted) - set(STATISTICS))
        if unknown or not self.wanted:
            raise ValueError(f"attention statistics: unknown {unknown or 'none asked for'}; "
                             f"known: {', '.join(STATISTICS)}")
        if "span_mass" in self.wanted and (self.key_parts is None or self.n_parts < 1):
            raise ValueError("attention statistics: span_mass needs key_parts and n_parts >= 1")
        if any(f < 1 for f in self.first) or any(w < 0 for w in self.windows):
            raise ValueError(f"attention statistics: first takes counts >= 1 (got {self.first}), "
                             f"windows distances >= 0 (got {self.windows})")
        if self.rows is not None:
            self.rows = torch.unique(torch.as_tensor(self.rows, dtype=torch.long).flatten())
            if self.rows.numel() == 0 or int(self.rows[0]) < 0:
                raise ValueError("attention statistics: rows must be positions from 0, at least one")
        if self.chunk_bytes < 1:
            raise ValueError(f"attention statistics: chunk_bytes must be positive, got {self.chunk_bytes}")

    def check_keys(self, n_k: int) -> None:
        """Span masses need one part label per key of the attention."""
        if "span_mass" in self.wanted and self.key_parts.numel() != n_k:
            raise ValueError(f"attention statistics: key_parts has shape ({self.key_parts.numel()},), "
                             f"expected ({n_k},) for {n_k} keys")

    def record(self, name: str, values: dict[str, Tensor]) -> None:
        self.results[name] = {s: v.cpu() for s, v in values.items()}
        if name == self.stop_after:
            raise StopForward(name)

    def of_pattern(self, p: Tensor, rows: Tensor, n_q: int, n_k: int, k0: int = 0) -> dict[str, Tensor]:
        """The statistics of pattern rows ``p [batch, head, r, keys]`` of query ``rows`` among ``n_q`` queries over
        ``n_k`` keys, ``p`` holding keys ``k0 .. k0 + keys - 1`` only (the others masked for every row)."""
        p = p.float()
        keys = p.shape[-1]
        q_abs = rows.to(p.device) + (n_k - n_q)
        k_idx = torch.arange(k0, k0 + keys, device=p.device)
        out = {}
        want = set(self.wanted)
        if "first_mass" in want:
            out["first_mass"] = torch.stack([p[..., :max(0, f - k0)].sum(-1) for f in self.first], -1)

        def at(key: Tensor) -> Tensor:
            inside = (key >= k0) & (key < k0 + keys)
            idx = (key - k0).clamp(0, keys - 1).view(1, 1, -1, 1).expand(*p.shape[:-1], 1)
            return p.gather(-1, idx)[..., 0].masked_fill(~inside.view(1, 1, -1), 0.0)

        if "self_mass" in want:
            out["self_mass"] = at(q_abs)
        if "previous_mass" in want:
            out["previous_mass"] = at(torch.where(q_abs > 0, q_abs - 1, -1))
        distance = (q_abs[:, None] - k_idx[None, :]).abs()
        def near(w: int) -> Tensor:
            """Mass on keys within distance ``w``: the band gathered when it is narrow (no pass over every key)."""
            if 4 * (2 * w + 1) >= keys:
                return (p * (distance <= w)).sum(-1)
            key = q_abs[:, None] + torch.arange(-w, w + 1, device=p.device)[None, :]
            inside = (key >= k0) & (key < k0 + keys)
            idx = (key - k0).clamp(0, keys - 1).view(1, 1, *key.shape).expand(*p.shape[:-1], key.shape[-1])
            return (p.gather(-1, idx) * inside).sum(-1)

        if "window_mass" in want:
            out["window_mass"] = torch.stack([near(w) for w in self.windows], -1)
        if "far_mass" in want:
            out["far_mass"] = torch.stack([(p * (distance > w)).sum(-1) for w in self.windows], -1)
        if "span_mass" in want:
            parts = self.key_parts.to(p.device)[k0:k0 + keys]
            out["span_mass"] = p @ part_indicators(parts, self.n_parts)
        if "distance_mean" in want or "distance_std" in want:
            d = distance.float()
            mean = (p * d).sum(-1)
            out["distance_mean"] = mean
            if "distance_std" in want:
                out["distance_std"] = (p * (d - mean[..., None]).square_()).sum(-1).clamp_(min=0).sqrt_()
        if "entropy" in want:
            out["entropy"] = torch.special.entr(p).sum(-1)
        if "top_key" in want or "top_mass" in want:
            top = p.max(-1)
            out["top_key"], out["top_mass"] = top.indices + k0, top.values
        return {s: v for s, v in out.items() if s in want}

    def attend(self, name: str, q: Tensor, k: Tensor, v: Tensor, *, causal: bool, bias, scale: float, softcap,
               scores) -> Tensor:
        """``attend`` without hooks while collecting: the output, with the statistics recorded under ``name``
        (``_fused``'s kernel where it serves every statistic wanted, else ``_chunked``)."""
        n_q = q.shape[-2]
        self.check_keys(k.shape[-2])
        wanted = torch.arange(n_q) if self.rows is None else self.rows
        if int(wanted[-1]) >= n_q:
            raise IndexError(f"attention statistics: row {int(wanted[-1])} asked for, but this forward pass has {n_q} "
                             f"query positions (0..{n_q - 1})")
        if softcap is None and scores is None and set(self.wanted) <= FUSED_STATISTICS:
            mask, is_causal = _sdpa_mask(q, k, causal=causal, bias=bias)
            if _flash_serves(q, k, k, mask, is_causal, scale):
                return self._fused(name, q, k, v, wanted, causal=causal, bias=bias, scale=scale, mask=mask,
                                   is_causal=is_causal)
        return self._chunked(name, q, k, v, wanted, causal=causal, bias=bias, scale=scale, softcap=softcap,
                             scores=scores)

    def _fused(self, name: str, q: Tensor, k: Tensor, v: Tensor, wanted: Tensor, *, causal: bool, bias, scale: float,
               mask: Tensor | None, is_causal: bool) -> Tensor:
        """The statistics beside the forward's own fused kernel, no ``[q, k]`` block: the flash kernel gives the output
        and each row's log-sum-exp ``L``; a key's mass is ``exp(s - L)``, so the masses on a few keys (the first ones,
        the query's band) come from those keys' logits alone, one block of rows at a time. Statistics of the key alone
        ride a second flash call as value columns: the part and first-key indicators."""
        b, h, _, d = q.shape
        n_k = k.shape[-2]
        want = set(self.wanted)
        lse = None
        if v.shape[-1] == d and _flash_serves(q, k, v, mask, is_causal, scale):
            z, lse = _flash_with_lse(q, k, v, mask, is_causal, scale)
        else:
            z = _fused(q, k, v, causal=causal, bias=bias, scale=scale, softcap=None)
        first = self.first if "first_mass" in want else ()
        wide = [f for f in first if f > FIRST_GATHERED]
        indicators = []
        key = torch.arange(n_k, device=q.device)
        if wide:
            indicators.append(torch.stack([key < f for f in wide], -1).to(q.dtype))
        if "span_mass" in want:
            indicators.append(part_indicators(self.key_parts.to(q.device), self.n_parts, q.dtype))
        columns = [c.expand(b, k.shape[1], n_k, c.shape[-1]) for c in indicators]
        rows = wanted.to(q.device)
        every = self.rows is None
        lse_rows = None if lse is None else lse.index_select(-1, rows).double()
        expect = None
        if columns or lse is None:
            values = torch.cat(columns, -1) if columns else k
            width = max(d, values.shape[-1])
            q_c, mask_c, causal_c = q, mask, is_causal
            if not every:  # the rows asked for only, against their rows of the mask
                q_c, causal_c = q.index_select(-2, rows), False
                mask_c = ((causal_mask(q.shape[-2], n_k, q.device, rows) if is_causal else None) if mask is None
                          else _rows_of(mask, rows, n_k))
            expect, lse_c = _flash_with_lse(_padded(q_c, width), _padded(k, width), _padded(values, width), mask_c,
                                            causal_c, scale)
            if every:
                expect = expect.index_select(-2, rows)
            if lse_rows is None:
                lse_rows = (lse_c.index_select(-1, rows) if every else lse_c).double()
        out: dict[str, Tensor] = {}
        wide_mass = expect[..., :len(wide)].float() if wide else None
        col = len(wide)
        if "span_mass" in want:
            out["span_mass"] = expect[..., col:col + self.n_parts].float()
        del expect
        narrow = min(max([f for f in first if f <= FIRST_GATHERED], default=0), n_k)
        reach = (max(self.windows) if "window_mass" in want else
                 1 if "previous_mass" in want else 0 if "self_mass" in want else -1)
        if narrow or reach >= 0:
            band = self._band(q, k, rows, lse_rows, narrow, reach, causal=causal, bias=bias, scale=scale, name=name)
            for stat, value in band.items():
                out[stat] = value
        if first:
            gathered = iter(out.pop("first_gathered", torch.empty(0)).unbind(-1))
            wide_cols = iter(wide_mass.unbind(-1)) if wide else iter(())
            out["first_mass"] = torch.stack([next(wide_cols) if f > FIRST_GATHERED else next(gathered)
                                             for f in first], -1)
        self.record(name, {stat: out[stat] for stat in self.wanted})
        return z

    def _band(self, q: Tensor, k: Tensor, rows: Tensor, lse: Tensor, narrow: int, reach: int, *, causal: bool, bias,
              scale: float, name: str) -> dict[str, Tensor]:
        """Masses on the first ``narrow`` keys and on keys within ``reach`` of the query, from those keys' logits and
        the rows' log-sum-exp ``lse``, one block of nearby rows at a time: ``[rows, first keys + band]``. The logits are
        rounded as the kernel rounds its own (in the inputs' dtype: float64 logits miss the kernel's ``L`` by the
        float32 rounding of ``q . k``, 4e-5 at logits of 200), the masses summed in float64."""
        b, h, n_q, _ = q.shape
        n_k = k.shape[-2]
        offset = n_k - n_q
        span = max(reach, 0)
        per = max(BAND_ROWS, 2 * span + 1)
        while per > 1 and 3 * 8 * b * h * per * min(n_k, per + 2 * span + narrow) > self.chunk_bytes:
            per //= 2
        want = set(self.wanted)
        firsts = [f for f in self.first if f <= FIRST_GATHERED] if "first_mass" in want else []
        parts: dict[str, list[Tensor]] = {}
        i = 0
        while i < rows.numel():
            j = int(torch.searchsorted(rows, rows[i] + per))
            r = rows[i:j]
            q_abs = r + offset
            lo, hi = max(0, int(q_abs[0]) - span), min(n_k, int(q_abs[-1]) + (1 if causal else span + 1))
            keys = torch.arange(lo, hi, device=q.device) if reach >= 0 else torch.arange(0, device=q.device)
            if narrow:
                keys = torch.cat([torch.arange(narrow, device=q.device), keys]).unique()
            s = grouped_matmul(q.index_select(-2, r), k.index_select(-2, keys).transpose(-1, -2)).mul_(scale).double()
            if bias is not None:
                m = _rows_of(bias, r, n_k).index_select(-1, keys.to(bias.device)).to(s.device)
                s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m.double()
            distance = q_abs[:, None] - keys[None, :]
            if causal:
                s = s.masked_fill(distance < 0, float("-inf"))
            p = torch.exp(s - lse[..., i:j, None])
            found = {}
            if firsts:
                found["first_gathered"] = torch.stack([(p * (keys < f)).sum(-1) for f in firsts], -1)
            if "self_mass" in want:
                found["self_mass"] = (p * (distance == 0)).sum(-1)
            if "previous_mass" in want:
                found["previous_mass"] = (p * (distance == 1)).sum(-1)
            if "window_mass" in want:
                found["window_mass"] = torch.stack([(p * (distance.abs() <= w)).sum(-1) for w in self.windows], -1)
            for stat, value in found.items():
                parts.setdefault(stat, []).append(value.float())
            if self.progress is not None:
                self.progress(name, j, rows.numel())
            i = j
        return {stat: torch.cat(values, 2) for stat, values in parts.items()}

    def _chunked(self, name: str, q: Tensor, k: Tensor, v: Tensor, wanted: Tensor, *, causal: bool, bias, scale: float,
                 softcap, scores) -> Tensor:
        """Each chunk of rows' pattern built in place over every key, reduced, and multiplied by the values."""
        b, h, n_q, _ = q.shape
        n_k = k.shape[-2]
        offset = n_k - n_q
        every = self.rows is None
        chunk = max(1, self.chunk_bytes // (3 * 4 * b * h * n_k))
        outputs, parts = [], []
        for start in range(0, wanted.numel(), chunk):
            rows = wanted[start:start + chunk].to(q.device)
            keys = min(n_k, int(rows[-1]) + offset + 1) if causal else n_k
            k0 = _first_visible(bias, rows, keys)
            # keys k0 .. keys - 1 are read: causal positions shift by k0 on both sides, so n_q becomes
            # keys - k0 - offset
            s = logits(q.index_select(-2, rows), k[..., k0:keys, :], rows - k0, keys - k0 - offset, causal=causal,
                       bias=None if bias is None else _rows_of(bias, rows, keys)[..., k0:], rows_selected=True,
                       scale=scale, softcap=softcap,
                       scores=None if scores is None else scores.index_select(-2, rows)[..., k0:keys])
            p = (torch._softmax(s, -1, False, out=s) if s.dtype == torch.float32 and not s.requires_grad
                 else torch.softmax(s.float(), -1))
            parts.append(self.of_pattern(p, rows, n_q, n_k, k0))
            if every:
                outputs.append(grouped_matmul(p.to(v.dtype), v[..., k0:keys, :]))
            if self.progress is not None:
                self.progress(name, start + rows.numel(), wanted.numel())
            del s, p
        z = torch.cat(outputs, -2) if every else _fused(q, k, v, causal=causal, bias=bias, scale=scale, softcap=softcap)
        self.record(name, {stat: torch.cat([part[stat] for part in parts], 2) for stat in parts[0]})
        return z


_STATISTICS: contextvars.ContextVar[StatisticsRequest | None] = contextvars.ContextVar(
    "poslens_statistics", default=None)


def collecting_statistics(wanted, **options):
    """Record, under each attention's ``hook_pattern`` name, the statistics ``wanted`` (names of ``STATISTICS``) of
    every query row (or of ``rows=``, which pattern hooks then see alone), each ``[batch, head, rows(, columns)]``;
    yields the ``StatisticsRequest``."""
    request = StatisticsRequest(tuple(wanted), **options)
    if request.rows is None:
        return _setting(_STATISTICS, request)
    return _statistics_of_rows(request)


@contextlib.contextmanager
def _statistics_of_rows(request: StatisticsRequest):
    """Sampled rows: hooked attentions materialise those rows only (``query_rows``), as ``collecting_spans`` has it."""
    with query_rows(request.rows), _setting(_STATISTICS, request):
        yield request


def current_statistics() -> StatisticsRequest | None:
    return _STATISTICS.get()


@torch.no_grad()
def model_statistics(model, tokens: Tensor, wanted, *, layers=None, **options) -> dict[str, Tensor]:
    """``{statistic: [layer, batch, head, rows(, columns)]}`` for any model with ``blocks.{l}.attn.hook_pattern``: every
    query row's attention statistics (``STATISTICS``), exact over every key, in the memory of a forward pass plus one
    chunk of rows (``chunk_bytes``). The pass stops after the last layer asked for; no logits are built. An attention
    that does not honour ``collecting_statistics`` has its pattern read one chunk of rows at a time instead."""
    return _statistics_pass(model, tokens, wanted, layers, True, options)[1]


@torch.no_grad()
def forward_statistics(model, tokens: Tensor, wanted, *, layers=None, run=None,
                       **options) -> tuple[object, dict[str, Tensor]]:
    """``(model(tokens), model_statistics(...))`` from one forward pass: the statistics ride the pass that gives the
    output, for analyses that need both. ``run()``, when given, is that pass instead of ``model(tokens)`` (e.g.
    ``model.final_hidden`` or ``model.token_losses``: losses without every position's logits). Options as
    ``model_statistics``'s."""
    return _statistics_pass(model, tokens, wanted, layers, False, options, run)


def _statistics_pass(model, tokens: Tensor, wanted, layers, stop: bool, options: dict, run=None):
    layers = list(range(model.n_layers)) if layers is None else sorted(set(int(l) for l in layers))
    if not layers or layers[0] < 0 or layers[-1] >= model.n_layers:
        raise ValueError(f"attention statistics: layers {layers} outside 0..{model.n_layers - 1}")
    names = [f"blocks.{l}.attn.hook_pattern" for l in layers]
    if options.get("key_parts") is not None:
        options["key_parts"] = torch.as_tensor(options["key_parts"], dtype=torch.long)
        if options["key_parts"].shape != (tokens.shape[-1],):
            raise ValueError(f"key_parts has shape {tuple(options['key_parts'].shape)}, "
                             f"expected ({tokens.shape[-1]},): one label per token")
    output = None
    stop_after = f"blocks.{model.n_layers - 1}.attn.hook_pattern" if stop else None
    with collecting_statistics(wanted, stop_after=stop_after, **options) as request:
        try:
            output = model(tokens) if run is None else run()
        except StopForward:
            pass
    missing = [n for n in names if n not in request.results]
    if missing:
        _read_patterns(model, tokens, request, missing)
    return output, {stat: torch.stack([request.results[n][stat] for n in names]) for stat in request.results[names[0]]}


def _read_patterns(model, tokens: Tensor, request: StatisticsRequest, names: list[str]) -> None:
    n = tokens.shape[-1]
    every = torch.arange(n) if request.rows is None else request.rows
    b, h = tokens.shape[0], model.n_heads
    chunk = max(1, request.chunk_bytes // (3 * 4 * b * h * n))
    parts: dict[str, list] = {name: [] for name in names}

    def read(pattern, hook):
        parts[hook.name].append(request.of_pattern(pattern, current_query_rows(), n, n))

    for start in range(0, every.numel(), chunk):
        with query_rows(every[start:start + chunk]), model.hooks(fwd_hooks=[(name, read) for name in names]):
            try:
                model(tokens)
            except StopForward:
                pass
    for name in names:
        request.results[name] = {s: torch.cat([p[s] for p in parts[name]], 2).cpu() for s in parts[name][0]}


@torch.no_grad()
def model_span_masses(model, tokens: Tensor, rows, key_parts, n_parts: int) -> Tensor:
    """``[layer, batch, head, rows, n_parts]``: every layer's attention mass of these query rows on each key
    part, for any model with ``blocks.{l}.attn.hook_pattern``: ``model_statistics``' ``span_mass`` of these rows, in the
    order asked for. The forward pass stops after the last layer's attention."""
    given = torch.as_tensor(rows, dtype=torch.long).flatten()
    got = model_statistics(model, tokens, ("span_mass",), key_parts=key_parts, n_parts=n_parts, rows=given)["span_mass"]
    return got.index_select(3, torch.searchsorted(torch.unique(given), given))
