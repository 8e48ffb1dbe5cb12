"""Hooked attention: the scores and pattern are materialised (the rows of ``query_rows`` only, when set) and passed
through ``hook_scores`` / ``hook_pattern``, so edits change the output; the statistics asked for are those of the
(possibly edited) pattern rows. Rows not materialised come from the fused kernel."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.attention.backends.base import Backend
from interp.attention.backends.private import softmax_
from interp.attention.backends.sdpa import fused, of_scores
from interp.attention.context import checked_rows, hooked
from interp.attention.mask import grouped_matmul, logits


class Materialised(Backend):
    name = "materialised"
    reads_windows = False

    def conditions(self):
        return [("a hooked scores or pattern point", lambda call: call.hooked)]

    def __call__(self, call) -> Tensor:
        q, k, v = call.q, call.k, call.v
        n_q, n_k = q.shape[-2], k.shape[-2]
        kw = dict(causal=call.causal, bias=call.bias, scale=call.scale)
        if k.shape[1] != q.shape[1]:  # materialised anyway: repeated key heads give a repeating model's bits
            k, v = k.repeat_interleave(q.shape[1] // k.shape[1], 1), v.repeat_interleave(q.shape[1] // v.shape[1], 1)
        rows = checked_rows(call.rows, n_q)
        sel = torch.arange(n_q, device=q.device) if rows is None else rows.to(q.device)
        s = logits(q if rows is None else q.index_select(-2, sel), k, sel, n_q, softcap=call.softcap,
                   scores=call.scores, **kw)
        if call.hook_scores is not None:
            s = call.hook_scores(s)
        # in place where no hook holds these scores
        pattern = (torch.softmax(s.float(), -1) if hooked(call.hook_scores) else softmax_(s)).to(v.dtype)
        if call.hook_pattern is not None:
            pattern = call.hook_pattern(pattern)
        stats = call.statistics
        if stats is not None:
            stats.check_keys(n_k)
            stats.record(call.name, stats.of_pattern(pattern, sel, n_q, n_k))
        z_sel = grouped_matmul(pattern, v)
        if rows is None:
            return z_sel
        if call.scores is not None:
            rest = of_scores(q, k, v, scores=call.scores, softcap=call.softcap, **kw)
        else:
            rest = fused(q, k, v, softcap=call.softcap, **kw)
        return rest.index_copy(-2, sel, z_sel)


BACKEND = Materialised()
