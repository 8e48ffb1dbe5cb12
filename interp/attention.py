"""Attention shared by the decoder families, with hookable scores and pattern that cost nothing unless used.

When no hook or cache is attached to ``hook_attn_scores`` / ``hook_pattern`` the output comes from
``scaled_dot_product_attention`` and no ``[q, k]`` matrix is built. When one is attached, the scores and
pattern are materialised and passed through the hooks, so edits to them change the output.

Inside ``query_rows(idx)`` only the listed query rows are materialised: the hooks see
``[batch, head, len(idx), key_pos]``, the output of those rows is recomputed from the (possibly edited)
pattern rows and every other row comes from the fused kernel. This is what lets attention-mass analyses
stream long contexts without ever holding a full pattern.

Inside ``decoding(cache)`` each attention module that supports it rotates its new tokens from ``cache.past``,
appends their keys and values to a ``KVCache`` and attends from the new tokens only, under ``cache.visible``'s
mask where it gives one (a sliding window; ``interp.streaming.RollingCache``'s evictions), so greedy generation
runs one token per step; its hooks then see the new query rows against every cached key.

Inside ``collecting_spans(rows, key_parts, n_parts)`` every attention that honours it records, under its
``hook_pattern`` name, the attention mass ``[batch, head, len(rows), n_parts]`` of those query rows on each
part of the keys (``key_parts`` labels each key). Without pattern hooks the mass comes from ``span_masses``:
scaled-dot-product attention with the part indicators as values, so no pattern row is ever built and the
statistic costs a few rows of a fused kernel. With pattern hooks attached, the (possibly edited) pattern
rows are materialised as under ``query_rows(rows)`` and the mass is read from them. ``stop_after`` ends the
forward pass (``StopForward``) once that hook name is recorded, before its layer's output is computed.
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
    rows: Tensor  # query positions
    key_parts: Tensor  # [k_pos] integer label per key
    n_parts: int
    stop_after: str | None = None
    masses: dict[str, Tensor] = field(default_factory=dict)  # hook_pattern name -> [batch, head, rows, n_parts]

    def record(self, name: str, mass: Tensor) -> None:
        self.masses[name] = mass
        if name == self.stop_after:
            raise StopForward(name)


_SPANS: contextvars.ContextVar[SpanRequest | None] = contextvars.ContextVar("poslens_spans", default=None)


@contextlib.contextmanager
def collecting_spans(rows, key_parts, n_parts: int, *, stop_after: str | None = None):
    """Record each attention's mass of these query rows on each key part; yields the ``SpanRequest``
    whose ``masses`` fill in during the forward pass. Pattern hooks, if any, see these rows only."""
    request = SpanRequest(torch.as_tensor(rows, dtype=torch.long).flatten(), torch.as_tensor(key_parts, dtype=torch.long).flatten(),
                          int(n_parts), stop_after)
    if request.rows.numel() == 0:
        raise ValueError("collecting_spans needs at least one query position")
    with query_rows(request.rows), _setting(_SPANS, request):
        yield request


def current_spans() -> SpanRequest | None:
    return _SPANS.get()


def part_indicators(key_parts: Tensor, n_parts: int, dtype=torch.float32) -> Tensor:
    """``[k_pos, n_parts]`` one-hot rows; a key labelled outside 0..n_parts-1 belongs to no part."""
    valid = (key_parts >= 0) & (key_parts < n_parts)
    return F.one_hot(torch.where(valid, key_parts, n_parts), n_parts + 1)[:, :n_parts].to(dtype)


def span_masses(q: Tensor, k: Tensor, key_parts: Tensor, n_parts: int, *, scale: float | None = None, causal: bool = True,
                bias: Tensor | None = None, rows: Tensor | None = None) -> Tensor:
    """Attention mass of query rows on each key part, ``[batch, head, rows, n_parts]``, without the pattern.

    ``q [batch, head, q_pos, d]``, ``k [batch, kv_head, k_pos, d]`` (``kv_head`` divides ``head``: grouped
    query heads share a key head), ``key_parts [k_pos]`` integer labels, ``rows`` indices into ``q_pos``
    (all when None). Causal queries are the last ``q_pos`` of the ``k_pos`` positions (a KV cache);
    ``bias`` is added to the scores as in ``attend``. softmax(q k^T) times the part indicators is exactly
    scaled-dot-product attention with the indicators as values: run that, in float32, on the rows only.
    """
    b, h, n_q, d = q.shape
    kv, n_k = k.shape[1], k.shape[2]
    if h % kv:
        raise ValueError(f"span_masses: {h} query heads cannot share {kv} key heads")
    if key_parts.shape != (n_k,):
        raise ValueError(f"span_masses: key_parts has shape {tuple(key_parts.shape)}, expected ({n_k},) for {n_k} keys")
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    rows = torch.arange(n_q, device=q.device) if rows is None else rows.to(q.device)
    q = q.index_select(-2, rows).float()
    k = k.float()
    r, rep = rows.numel(), h // kv
    mask = None
    if bias is not None:
        mask = bias.index_select(-2, rows.to(bias.device)).float().expand(b, h, r, n_k)
        if rep > 1:
            mask = mask.reshape(b, kv, rep * r, n_k)
    if causal:
        visible = causal_mask(n_q, n_k, q.device, rows)
        if rep > 1:
            visible = visible.repeat(rep, 1)
        mask = visible if mask is None else mask.masked_fill(~visible, float("-inf"))
    values = part_indicators(key_parts.to(q.device), n_parts).expand(b, kv, n_k, n_parts)
    grouped = q.reshape(b, kv, rep * r, d)
    out = F.scaled_dot_product_attention(grouped, k, values, attn_mask=mask, scale=scale)
    return out.reshape(b, h, r, n_parts)


def hooked(hook) -> bool:
    """Whether anything would see or keep this hook point's value: TransformerLens hooks or plain torch hooks."""
    return hook is not None and bool(hook._forward_hooks or hook._forward_pre_hooks or hook.has_hooks())


def causal_mask(n_q: int, n_k: int, device, rows: Tensor | None = None) -> Tensor:
    """Boolean ``[q, k]`` mask, True where the key is visible; the queries are the last ``n_q`` of the
    ``n_k`` positions (all of them without a cache)."""
    q_idx = rows.to(device) if rows is not None else torch.arange(n_q, device=device)
    return torch.arange(n_k, device=device)[None, :] <= q_idx[:, None] + (n_k - n_q)


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
    scores: Tensor | None = None,
) -> Tensor:
    """Attention output ``[batch, head, q_pos, d_v]`` from ``q, k [batch, head, pos, d]`` and ``v``; ``k`` and ``v``
    may have fewer heads (grouped-query attention: key head j serves query heads j*rep .. j*rep+rep-1).

    ``bias`` is an additive ``[batch or 1, head or 1, q_pos, k_pos]`` term (ALiBi, learned decay); masked
    entries are ``-inf`` in the scores handed to ``hook_scores`` and 0 in the pattern. ``scores``: already-scaled
    ``[batch, head, q_pos, k_pos]`` logits that replace ``q.k * scale`` (``bias`` still added); they are always
    materialised, ``q`` then giving only the shapes.
    """
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    spans = current_spans() if hook_pattern is not None and getattr(hook_pattern, "name", None) else None
    given = scores
    if given is None and not (hooked(hook_scores) or hooked(hook_pattern)):
        if spans is not None:
            spans.record(hook_pattern.name, span_masses(q, k, spans.key_parts, spans.n_parts, scale=scale, causal=causal,
                                                        bias=bias, rows=spans.rows))
        n_q, n_k = q.shape[-2], k.shape[-2]
        mask = None if bias is None else bias.to(q.dtype)
        if causal and (bias is not None or n_q != n_k):
            visible = causal_mask(n_q, n_k, q.device)
            mask = visible if mask is None else mask.masked_fill(~visible, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None, scale=scale,
                                              enable_gqa=k.shape[1] != q.shape[1])

    if k.shape[1] != q.shape[1]:
        k, v = k.repeat_interleave(q.shape[1] // k.shape[1], 1), v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    rows = current_query_rows(q.shape[-2])
    q_sel = q if rows is None else q.index_select(-2, rows.to(q.device))
    if given is None:
        scores = torch.matmul(q_sel, k.transpose(-1, -2)).mul_(scale)  # in place: a fresh [q, k] block, never a copy more
    else:
        scores = given.clone() if rows is None else given.index_select(-2, rows.to(given.device))
    if bias is not None:
        scores = scores + (bias if rows is None else bias.index_select(-2, rows.to(bias.device)))
    if causal and rows is None:  # keys past the diagonal: zeroed (whatever they held, NaN or inf too), then -inf
        offset = k.shape[-2] - q.shape[-2]
        future = torch.full(scores.shape[-2:], float("-inf"), dtype=scores.dtype, device=scores.device).triu_(offset + 1)
        scores = scores.tril_(offset).add_(future)
    elif causal:
        scores = scores.masked_fill_(~causal_mask(q.shape[-2], k.shape[-2], q.device, rows), float("-inf"))
    if hook_scores is not None:
        scores = hook_scores(scores)
    if scores.dtype == v.dtype == torch.float32 and not scores.requires_grad and not hooked(hook_scores):
        pattern = torch._softmax(scores, -1, False, out=scores)  # in place: no one else holds these scores
    else:
        pattern = torch.softmax(scores.float(), dim=-1).to(v.dtype)
    if hook_pattern is not None:
        pattern = hook_pattern(pattern)
    if spans is not None:
        if spans.key_parts.numel() != k.shape[-2]:
            raise ValueError(f"collecting_spans: {spans.key_parts.numel()} key labels for {k.shape[-2]} keys")
        spans.record(hook_pattern.name, pattern.float() @ part_indicators(spans.key_parts.to(pattern.device), spans.n_parts))
    z_sel = torch.matmul(pattern, v)
    if rows is None:
        return z_sel
    if given is None:
        z = attend(q, k, v, causal=causal, bias=bias, scale=scale)
    else:  # the other rows from the given logits, unhooked
        full = given if bias is None else given + bias
        if causal:
            full = full.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
        z = torch.matmul(torch.softmax(full.float(), dim=-1).to(v.dtype), v)
    return z.index_copy(-2, rows.to(z.device), z_sel)


@torch.no_grad()
def model_span_masses(model, tokens: Tensor, rows, key_parts, n_parts: int) -> Tensor:
    """``[layer, batch, head, rows, n_parts]``: every layer's attention mass of these query rows on each key
    part, for any model with ``blocks.{l}.attn.hook_pattern``. The forward pass stops after the last layer's
    attention. An attention that does not honour ``collecting_spans`` has its pattern rows read instead."""
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.n_layers)]
    key_parts = torch.as_tensor(key_parts, dtype=torch.long, device=tokens.device)
    if key_parts.shape != (tokens.shape[-1],):
        raise ValueError(f"key_parts has shape {tuple(key_parts.shape)}, expected ({tokens.shape[-1]},): one label per token")
    with collecting_spans(rows, key_parts, n_parts, stop_after=names[-1]) as request:
        try:
            model(tokens)
        except StopForward:
            pass
    if all(n in request.masses for n in names):
        return torch.stack([request.masses[n] for n in names])
    indicators = part_indicators(key_parts, n_parts)
    masses = {}

    def read(pattern, hook):
        masses[hook.name] = pattern.float() @ indicators

    with query_rows(rows), model.hooks(fwd_hooks=[(n, read) for n in names]):
        model(tokens)
    return torch.stack([masses[n] for n in names])
