"""Which keys each query row sees: one ``Mask`` (causal, an additive or boolean ``bias``, ``key_window`` conditions, the
cache offset) and the helpers every backend reads it through, so the mask idiom is written once.

Conventions: queries are the last ``n_q`` of the ``n_k`` positions (a KV cache's offset ``n_k - n_q``); ``bias`` is
additive (``-inf`` hides a key) or boolean (True: visible), ``[batch or 1, head or 1, n_q or 1, >= n_k]``; a causal row
sees its own key and the ones before; a window ``(w, sinks)`` shows the keys less than ``w`` away and the first
``sinks``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp.attention import budget


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


def rows_of(mask: Tensor, rows: Tensor, n_k: int) -> Tensor:
    """The rows ``rows`` of a ``[..., q or 1, >= n_k]`` mask, its first ``n_k`` keys."""
    m = mask if mask.shape[-2] == 1 else mask.index_select(-2, rows.to(mask.device))
    return m[..., :n_k]


def mask_rows(mask: Tensor, a: int, e: int) -> Tensor:
    return mask if mask.shape[-2] == 1 else mask[..., a:e, :]


def hide(s: Tensor, m: Tensor) -> Tensor:
    """Scores ``s`` under mask ``m`` (boolean: True visible; else additive), out of place."""
    return s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m.to(s.dtype)


def additive(mask: Tensor | None, dtype) -> Tensor | None:
    """A boolean mask as 0 / ``-inf`` (what ``scaled_dot_product_attention`` hands its kernels)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


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
        s = hide(s, bias[..., :n_k] if rows_selected else rows_of(bias, rows, n_k))
    if causal:
        s = s.masked_fill_(~causal_mask(n_q, n_k, s.device, rows), float("-inf"))
    return s


def first_visible(bias: Tensor | None, rows: Tensor, keys: int) -> int:
    """The first key any of these rows may see under a boolean mask (a sliding window starts late), else 0."""
    if bias is None or bias.dtype != torch.bool:
        return 0
    seen = rows_of(bias, rows, keys).reshape(-1, keys).any(0)
    return int(seen.to(torch.uint8).argmax()) if bool(seen.any()) else 0


def key_spans(mask: Tensor | None, n_q: int, n_k: int) -> list[tuple[int, int, int, int]] | None:
    """Chunks of query rows ``[a, e)`` and the keys ``[lo, hi)`` that any of their rows may see under ``mask``, where
    calling the fused kernel per chunk on those keys only skips at least a quarter of the work (a sliding window, a
    materialised causal mask at length: the kernel cannot skip what a mask hides, and turns a boolean mask into a
    float ``[q, k]`` block). None where one call over every key is as good. Hidden keys add nothing to a row's softmax,
    so the result is the same up to float rounding."""
    if mask is None:
        return None
    step = budget.rows_per_chunk(mask.device, 4 * mask.shape[:-2].numel() * n_k, most=budget.MASK_ROWS)
    if n_q < 2 * step:
        return None
    spans, kept = [], 0
    for a in range(0, n_q, step):
        e = min(n_q, a + step)
        part = mask_rows(mask, a, e)[..., :n_k]
        seen = (part if part.dtype == torch.bool else part > float("-inf")).flatten(0, -2).any(0).nonzero()
        lo, hi = (int(seen[0]), int(seen[-1]) + 1) if seen.numel() else (0, n_k)
        spans.append((a, e, lo, hi))
        kept += (e - a) * (hi - lo)
    return spans if 4 * kept <= 3 * n_q * n_k else None


def sdpa_mask(q: Tensor, k: Tensor, *, causal: bool, bias: Tensor | None) -> tuple[Tensor | None, bool]:
    """The ``attn_mask`` and ``is_causal`` handed to a fused kernel (the forward's and the statistics' alike)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = None if bias is None else (bias if bias.dtype == torch.bool else bias.to(q.dtype))
    if mask is not None:
        mask = mask[..., :n_k]
    if causal and (mask is not None or n_q != n_k):
        visible = causal_mask(n_q, n_k, q.device)
        mask = visible if mask is None else (mask & visible if mask.dtype == torch.bool
                                             else mask.masked_fill(~visible, float("-inf")))
    return mask, causal and mask is None and n_q > 1


def window_visible(q_abs: Tensor, keys: Tensor, windows) -> Tensor:
    """Boolean ``[rows, keys]``: True where every ``(window, sinks)`` lets query ``q_abs`` see key ``keys``."""
    d = (q_abs[:, None] - keys[None, :]).abs()
    visible = torch.ones(d.shape, dtype=torch.bool, device=d.device)
    for window, sinks in windows:
        visible &= (d < window) | (keys[None, :] < sinks)
    return visible


def with_windows(bias: Tensor | None, windows, n_q: int, n_k: int, device) -> Tensor:
    """``bias`` with the key windows folded in as a materialised ``[q, k]`` mask (where hooks, statistics or spans read
    rows of the scores)."""
    visible = window_visible(torch.arange(n_k - n_q, n_k, device=device), torch.arange(n_k, device=device), windows)
    if bias is None:
        return visible[None, None]
    b = bias[..., :n_k]
    return b & visible if b.dtype == torch.bool else b.masked_fill(~visible, float("-inf"))


@dataclass(frozen=True)
class Mask:
    """The keys each of ``n_q`` query rows sees among ``n_k`` keys: ``causal``, an additive or boolean ``bias``, the
    ``key_window`` conditions ``windows`` (``(window, sinks)`` pairs, all of which hold) and the cache offset
    ``n_k - n_q``. ``folded()`` puts the windows into ``bias`` (a materialised ``[q, k]`` boolean) for the backends
    that read rows of the scores; ``fused()`` is what a fused kernel is handed."""

    causal: bool
    n_q: int
    n_k: int
    bias: Tensor | None = None
    windows: tuple[tuple[int, int], ...] = ()

    @property
    def offset(self) -> int:
        return self.n_k - self.n_q

    def folded(self, device) -> Mask:
        """This mask with its key windows in ``bias``."""
        if not self.windows:
            return self
        return Mask(self.causal, self.n_q, self.n_k, with_windows(self.bias, self.windows, self.n_q, self.n_k, device))

    def fused(self, q: Tensor, k: Tensor) -> tuple[Tensor | None, bool]:
        """``(attn_mask, is_causal)`` for a fused kernel (windows folded first)."""
        m = self.folded(q.device)
        return sdpa_mask(q, k, causal=m.causal, bias=m.bias)
