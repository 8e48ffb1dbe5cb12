"""Attention under ``key_window`` conditions without hooks or statistics: one chunk of query rows at a time against
only the keys that chunk may see (the first ``sinks`` and the window's span), so no ``[q, k]`` mask exists and a window
runs at any length in the memory of one chunk. With hooks, statistics or spans the other backends see the window folded
into the mask (``Mask.folded``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.attention.backends.base import Backend
from interp.attention.budget import WINDOW_SHARE, rows_per_chunk
from interp.attention.mask import grouped_matmul, rows_of, window_visible


def windowed(q: Tensor, k: Tensor, v: Tensor, windows, *, causal: bool, bias: Tensor | None, scale: float,
             softcap: float | None, scores: Tensor | None) -> Tensor:
    """Attention output under key windows, one chunk of query rows at a time against only the keys that chunk may see
    (the first ``sinks`` and the window's span), so memory is one chunk's ``[rows, window + rows + sinks]`` scores."""
    b, h, n_q, _ = q.shape
    n_k = k.shape[-2]
    offset = n_k - n_q
    window, sinks = min(windows, key=lambda ws: ws[0] + ws[1])  # every visible key lies in this one's span
    rows_per = rows_per_chunk(q.device, WINDOW_SHARE * 4 * b * h * (max(window, 64) + window + sinks),
                              most=max(window, 64))
    out = []
    for a in range(0, n_q, rows_per):
        e = min(n_q, a + rows_per)
        lo = max(0, a + offset - window + 1)
        hi = min(n_k, e + offset) if causal else min(n_k, e + offset + window - 1)
        keys = torch.cat([torch.arange(min(sinks, lo)), torch.arange(lo, hi)]).to(q.device)
        q_abs = torch.arange(a + offset, e + offset, device=q.device)
        visible = window_visible(q_abs, keys, windows)
        if causal:
            visible &= keys[None, :] <= q_abs[:, None]
        mask = visible[None, None]
        if bias is not None:
            part = rows_of(bias, torch.arange(a, e), n_k).index_select(-1, keys.to(bias.device))
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


class KeyWindow(Backend):
    name = "key_window"
    reads_windows = True

    def conditions(self):
        return [("key windows", lambda call: bool(call.mask.windows)),
                ("no hooked point", lambda call: not call.hooked),
                ("no statistics asked", lambda call: call.statistics is None)]

    def __call__(self, call) -> Tensor:
        return windowed(call.q, call.k, call.v, call.mask.windows, causal=call.causal, bias=call.bias,
                        scale=call.scale, softcap=call.softcap, scores=call.scores)


BACKEND = KeyWindow()
