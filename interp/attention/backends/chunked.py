"""The statistics any attention can give (every statistic; soft-capped logits; given scores): one chunk of query rows
at a time, the chunk's ``[batch, head, rows, keys]`` logits are built in float32, turned into the pattern in place,
reduced to the statistics (``interp.attention.statistics``) and, when every row is read, multiplied by the values: the
chunk's attention output, so the statistics ride the forward pass and no other ``[q, k]`` block exists. Causal chunks
stop at their last row's key and sliding windows start at their first visible one. A chunk's rows come from the
device's budget (``budget.rows_per_chunk``: free memory on CUDA)."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.attention.backends.base import Backend
from interp.attention.backends.private import softmax_
from interp.attention.backends.sdpa import fused
from interp.attention.budget import rows_per_chunk
from interp.attention.mask import first_visible, grouped_matmul, logits, rows_of


def float32(t: Tensor) -> Tensor:
    """Half precisions up to float32 (statistics accumulate in float32 whatever the model's dtype)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


class Chunked(Backend):
    name = "chunked"
    reads_windows = False

    def conditions(self):
        return [("statistics asked", lambda call: call.statistics is not None),
                ("no hooked point", lambda call: not call.hooked)]

    def __call__(self, call) -> Tensor:
        stats = call.statistics
        q, k, v = call.q, call.k, call.v
        b, h, n_q, _ = q.shape
        n_k = k.shape[-2]
        stats.check_keys(n_k)
        wanted = stats.rows_of(n_q)
        offset = n_k - n_q
        every = stats.rows is None
        causal, bias, scores = call.causal, call.bias, call.scores
        chunk = rows_per_chunk(q.device, 3 * 4 * b * h * n_k, stats.chunk_bytes)
        kf = float32(k)  # the queries are cast one chunk of rows at a time
        outputs, parts = [], []
        for start in range(0, wanted.numel(), chunk):
            rows = wanted[start:start + chunk].to(q.device)
            keys = min(n_k, int(rows[-1]) + offset + 1) if causal else n_k
            k0 = first_visible(bias, rows, keys)
            # keys k0 .. keys - 1 are read: causal positions shift by k0 on both sides, so n_q becomes
            # keys - k0 - offset
            qc = float32(q.index_select(-2, rows))
            s = logits(qc, kf[..., k0:keys, :], rows - k0, keys - k0 - offset, causal=causal,
                       bias=None if bias is None else rows_of(bias, rows, keys)[..., k0:], rows_selected=True,
                       scale=call.scale, softcap=call.softcap,
                       scores=None if scores is None else float32(scores.index_select(-2, rows)[..., k0:keys]))
            p = softmax_(s)
            parts.append(stats.of_pattern(p, rows, n_q, n_k, k0))
            if every:
                outputs.append(grouped_matmul(p.to(v.dtype), v[..., k0:keys, :]))
            if stats.progress is not None:
                stats.progress(call.name, start + rows.numel(), wanted.numel())
            del s, p
        z = torch.cat(outputs, -2) if every else fused(q, k, v, causal=causal, bias=bias, scale=call.scale,
                                                       softcap=call.softcap)
        stats.record(call.name, {stat: torch.cat([part[stat] for part in parts], 2) for stat in parts[0]})
        return z


BACKEND = Chunked()
