"""What a forward pass asks of every attention, set by context managers: the query rows hooks see (``query_rows``),
the KV cache (``decoding``), key windows (``key_window``); and ``StopForward``. The statistics request lives in
``interp.attention.request``."""

from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import Tensor


@contextlib.contextmanager
def setting(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def whole_positions(rows, what: str) -> Tensor:
    """``rows`` as a 1-D long tensor of positions from 0, at least one; refuses floats that are not whole (2.7 is never
    truncated to row 2), booleans and complex numbers, naming ``what``."""
    given = torch.as_tensor(rows).flatten()
    if given.dtype == torch.bool or given.is_complex():
        raise ValueError(f"{what} takes integer positions, got dtype {given.dtype}")
    if given.is_floating_point() and not (torch.isfinite(given).all() and (given == given.round()).all()):
        bad = given[~(torch.isfinite(given) & (given == given.round()))][0].item()
        raise ValueError(f"{what} takes integer positions, got {bad}")
    idx = given.long()
    if idx.numel() == 0:
        raise ValueError(f"{what} needs at least one query position")
    if (idx < 0).any():
        raise ValueError(f"{what} takes positions from 0, got {int(idx.min())}")
    return idx


_QUERY_ROWS: contextvars.ContextVar[Tensor | None] = contextvars.ContextVar("poslens_query_rows", default=None)


def query_rows(rows):
    """Restrict materialised attention scores / patterns to these query positions (1-D integer indices).

    Indices must be whole numbers (2.7 is refused, never truncated to row 2); each is checked against the
    sequence length when an attention hook runs."""
    return setting(_QUERY_ROWS, whole_positions(rows, "query_rows"))


def current_query_rows(n_queries: int | None = None) -> Tensor | None:
    """The rows set by ``query_rows``, checked against ``n_queries`` query positions when given."""
    return checked_rows(_QUERY_ROWS.get(), n_queries)


def checked_rows(rows: Tensor | None, n_queries: int | None) -> Tensor | None:
    """``rows`` (query positions, or None: all), refused where one is past ``n_queries``."""
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

    def fork(self) -> KVCache:
        """A cache holding what this one holds, which grows apart from it (``append`` builds new tensors, so neither
        changes the other): one prefix run once, continued several ways."""
        other = KVCache()
        other._kv = dict(self._kv)
        return other

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
    return setting(_KV_CACHE, cache)


def current_kv_cache() -> KVCache | None:
    return _KV_CACHE.get()


class StopForward(Exception):
    """Raised inside a forward pass once everything asked for has been recorded."""


_KEY_WINDOWS: contextvars.ContextVar[dict[str, tuple[tuple[int, int], ...]] | None] = contextvars.ContextVar(
    "poslens_key_windows", default=None)


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
    with setting(_KEY_WINDOWS, current):
        yield


def current_key_windows(name: str | None) -> tuple[tuple[int, int], ...]:
    """The ``(window, sinks)`` conditions ``key_window`` set on the attention called ``name`` (none: ``()``)."""
    return (_KEY_WINDOWS.get() or {}).get(name, ()) if name else ()


def hooked(hook) -> bool:
    """Whether anything would see or keep this hook point's value: TransformerLens hooks or plain torch hooks."""
    return hook is not None and bool(hook._forward_hooks or hook._forward_pre_hooks or hook.has_hooks())
