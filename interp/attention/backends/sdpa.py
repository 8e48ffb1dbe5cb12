"""Plain attention, no pattern kept: ``scaled_dot_product_attention`` (the fused kernel; per chunk of rows on the keys
they see where a mask hides stretches of keys; row chunks of logits where the logits are soft-capped), or the softmax of
given ``scores``. The last entry of the table: it serves any call."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.attention.backends.base import Backend
from interp.attention.budget import CHUNK_ROWS, rows_per_chunk
from interp.attention.mask import grouped_matmul, key_spans, logits, mask_rows, sdpa_mask


def fused(q: Tensor, k: Tensor, v: Tensor, *, causal: bool, bias: Tensor | None, scale: float,
          softcap: float | None) -> Tensor:
    """Attention output ``[batch, head, q, d_v]`` without a pattern: the fused kernel (row chunks when soft-capped)."""
    n_q = q.shape[-2]
    if softcap is not None:
        out = []
        per = rows_per_chunk(q.device, 3 * 4 * q.shape[0] * q.shape[1] * k.shape[-2], most=CHUNK_ROWS)
        for start in range(0, n_q, per):
            rows = torch.arange(start, min(start + per, n_q), device=q.device)
            s = logits(q[..., start:start + len(rows), :], k, rows, n_q, causal=causal, bias=bias, scale=scale,
                       softcap=softcap)
            out.append(grouped_matmul(torch.softmax(s.float(), -1).to(v.dtype), v))
        return torch.cat(out, -2)
    mask, is_causal = sdpa_mask(q, k, causal=causal, bias=bias)
    gqa = k.shape[1] != q.shape[1]
    spans = key_spans(mask, n_q, k.shape[-2])
    if spans is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    return torch.cat([F.scaled_dot_product_attention(q[..., a:e, :], k[..., lo:hi, :], v[..., lo:hi, :],
                                                     attn_mask=mask_rows(mask, a, e)[..., lo:hi], scale=scale,
                                                     enable_gqa=gqa)
                      for a, e, lo, hi in spans], -2)


def of_scores(q: Tensor, k: Tensor, v: Tensor, *, causal: bool, bias, scale: float, scores: Tensor,
              softcap: float | None = None) -> Tensor:
    """The output of given full ``scores`` (soft-capped as the logits they replace, masked, softmax in float32)."""
    n_q = q.shape[-2]
    return grouped_matmul(torch.softmax(logits(q, k, torch.arange(n_q), n_q, causal=causal, bias=bias, scale=scale,
                                               softcap=softcap, scores=scores).float(), -1).to(v.dtype), v)


class Sdpa(Backend):
    name = "sdpa"
    reads_windows = False

    def conditions(self):
        return [("no hooked point", lambda call: not call.hooked),
                ("no statistics asked", lambda call: call.statistics is None)]

    def __call__(self, call) -> Tensor:
        if call.scores is None:
            return fused(call.q, call.k, call.v, causal=call.causal, bias=call.bias, scale=call.scale,
                         softcap=call.softcap)
        return of_scores(call.q, call.k, call.v, causal=call.causal, bias=call.bias, scale=call.scale,
                         scores=call.scores, softcap=call.softcap)


BACKEND = Sdpa()
