"""Statistics that ride a fused kernel's log-sum-exp: no ``[q, k]`` block at all.

Protocol. A kernel ``lse_attention(q, k, v, attn_mask, is_causal, scale) -> (output, L [batch, head, q] float32)``
(per device: ``backends.cpu_flash``, ``backends.cuda``; ``private.plain_lse`` where the private op is missing or
raises) gives the forward's output and each row's log-sum-exp ``L``. Then a key's mass is ``exp(s - L)``:

- masses on the first keys, the token itself, the previous token and the keys within ``w`` (statistics that declare a
  ``band``) come from the logits of those keys alone: per row, the first keys and the ``O(w)`` keys around it are
  gathered, ``s = q . k * scale`` computed in float32 from the inputs' values (as the kernel accumulates its own) and
  the masses summed in float64;
- statistics that are an expectation of a per-key column (``columns``: part indicators, first-key indicators past
  ``FIRST_GATHERED``) ride one more kernel call with those columns as values, in float32 whatever the model's dtype (a
  bf16 output would round a mass to 3 digits).

Not served here (they take ``backends.chunked``), measured by ``bench.value_columns`` on SmolLM2-135M's own float32
queries and keys at 2,048 tokens against float64: entropy as ``L - scale q . E[k]`` (``E[k]``: the keys as values)
misses by 1.3e-5, past the 1e-5 target; the distance moments from the key index centred per block of 512 rows
(``j - a`` and its square as values) are within it in float32 on real rows (mean 1.0e-6 of its scale; variance 1.3e-6
of the scale squared) but miss a near-one-hot row's spread by ``eps * block^2`` (5e-4 on a 45-row sliding test); as
float64 columns they are exact (4.7e-8) but that kernel call took 1.5x the chunked pass on the CPU (16.8 s against
11.0 s at 2,048 tokens, one thread) and CUDA has no float64 kernel, so they stay chunked. A request with the top key
(every key of the row) or entropy runs the chunked pass anyway. Block sizes come from the device
(``budget.rows_per_chunk``). TF32 matmuls (``torch.backends.cuda.matmul.allow_tf32``) would round the band's
logits to 10 bits: leave it off (torch's default) for exact masses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.attention.backends.base import Backend
from interp.attention.backends.private import LseKernel, float32
from interp.attention.backends.sdpa import fused
from interp.attention.budget import rows_per_chunk
from interp.attention.mask import causal_mask, hide, rows_of
from interp.attention.statistics import DECLARED, Rows, reduce


def _padded(t: Tensor, width: int) -> Tensor:
    return t if t.shape[-1] == width else F.pad(t, (0, width - t.shape[-1]))


def _band_of(stat: str, request) -> tuple[int, int] | None:
    band = DECLARED[stat].band
    return None if band is None else band(request)


@dataclass
class LseStatistics(Backend):
    """The statistics backend on one device type: ``kernel`` gives the output and ``L``; ``accepts(q, k, v, mask,
    is_causal, scale)`` says whether it runs these inputs as the forward would (else the chunked backend serves)."""

    name: str
    device_type: str
    kernel: LseKernel
    accepts: Callable[..., bool] = lambda *args: True
    reads_windows = False

    def conditions(self):
        def kernel_runs_it(call) -> bool:
            mask, is_causal = call.mask.fused(call.q, call.k)
            return self.accepts(call.q, call.k, call.k, mask, is_causal, call.scale)

        return [("statistics asked", lambda call: call.statistics is not None),
                ("no hooked point", lambda call: not call.hooked),
                ("no soft-cap and no given scores", lambda call: call.softcap is None and call.scores is None),
                (f"tensors on {self.device_type}", lambda call: call.q.device.type == self.device_type),
                ("no gradients", lambda call: not (call.q.requires_grad or call.k.requires_grad)),
                ("every statistic asked read off each row's log-sum-exp and a band or value columns",
                 lambda call: all(DECLARED[s].lse_served(call.statistics) for s in call.statistics.wanted)),
                (f"the {self.name} kernel running this mask as the forward does", kernel_runs_it)]

    def __call__(self, call) -> Tensor:
        stats = call.statistics
        q, k, v = call.q, call.k, call.v
        d, n_k = q.shape[-1], k.shape[-2]
        stats.check_keys(n_k)
        rows = stats.rows_of(q.shape[-2]).to(q.device)
        mask, is_causal = call.mask.fused(q, k)
        lse = None
        if v.shape[-1] == d:
            z, lse = self.kernel(q, k, v, mask, is_causal, call.scale)
        else:
            z = fused(q, k, v, causal=call.causal, bias=call.bias, scale=call.scale, softcap=None)
        banded = [s for s in stats.wanted if _band_of(s, stats) is not None]
        by_columns = [s for s in stats.wanted if s not in banded]
        lse_rows = None if lse is None else lse.index_select(-1, rows).double()
        out: dict[str, Tensor] = {}
        if by_columns or lse is None:
            columns = [DECLARED[s].columns(stats, n_k).to(q.device) for s in by_columns]
            expect, lse_c = self.columns(q, k, mask, is_causal, call.scale, rows, stats.rows is None, columns)
            col = 0
            for stat, c in zip(by_columns, columns):
                out[stat] = expect[..., col:col + c.shape[-1]].float()
                col += c.shape[-1]
            if lse_rows is None:
                lse_rows = lse_c.double()
        if banded:
            out.update(self.band(call, rows, lse_rows, banded))
        stats.record(call.name, out)
        return z

    def columns(self, q: Tensor, k: Tensor, mask, is_causal: bool, scale: float, rows: Tensor, every: bool,
                columns: list[Tensor]) -> tuple[Tensor, Tensor]:
        """``(E[columns] [batch, head, rows, c], L [batch, head, rows])``: one kernel call in float32 with the per-key
        ``columns`` as values (the keys themselves when there are none: ``L`` alone)."""
        q, k = float32(q), float32(k)
        b, kv, n_k, d = k.shape
        values = (torch.cat(columns, -1).to(q.dtype)[None, None].expand(b, kv, n_k, -1) if columns else k)
        width = max(d, values.shape[-1])
        q_c, mask_c, causal_c = q, mask, is_causal
        if not every:  # the rows asked for only, against their rows of the mask
            q_c, causal_c = q.index_select(-2, rows), False
            mask_c = ((causal_mask(q.shape[-2], n_k, q.device, rows) if is_causal else None) if mask is None
                      else rows_of(mask, rows, n_k))
        if mask_c is not None and mask_c.is_floating_point():
            mask_c = mask_c.to(q.dtype)
        expect, lse = self.kernel(_padded(q_c, width), _padded(k, width), _padded(values, width), mask_c, causal_c,
                                  scale)
        if every:
            expect, lse = expect.index_select(-2, rows), lse.index_select(-1, rows)
        return expect, lse

    def band(self, call, rows: Tensor, lse: Tensor, banded: list[str]) -> dict[str, Tensor]:
        """The ``banded`` statistics of ``rows`` from the logits of each row's first keys and the keys within its reach:
        per row ``[first keys + band]`` gathered keys (a key among the first ones is not counted twice), one block of
        rows at a time."""
        stats = call.statistics
        q, k = call.q, call.k  # cast to float32 one block of rows (and their gathered keys) at a time
        b, h, n_q, d = q.shape
        kv, n_k = k.shape[1], k.shape[-2]
        g, offset = h // kv, n_k - n_q
        bands = [_band_of(s, stats) for s in banded]
        narrow = min(max(f for f, _ in bands), n_k)
        reach = max(w for _, w in bands)
        offsets = (torch.arange(0, reach + 1) if call.causal else torch.arange(-reach, reach + 1)) if reach >= 0 \
            else torch.arange(0)
        offsets = offsets.to(q.device)
        first = torch.arange(narrow, device=q.device)
        width = narrow + offsets.numel()
        bias = call.bias
        mask_row = 4 * n_k if bias is not None and bias.shape[-2] > 1 else 0  # a bias row per query row
        per_row = 4 * kv * width * d + 4 * h * d + 8 * 4 * h * width + mask_row
        per = rows_per_chunk(q.device, b * per_row, stats.chunk_bytes, most=rows.numel())
        parts: dict[str, list[Tensor]] = {}
        for i in range(0, rows.numel(), per):
            r = rows[i:i + per]
            q_abs = r + offset
            near = q_abs[:, None] - offsets[None, :]
            valid = torch.cat([torch.ones(r.numel(), narrow, dtype=torch.bool, device=q.device),
                               (near >= narrow) & (near < n_k)], -1)
            keys = torch.cat([first[None, :].expand(r.numel(), -1), near], -1)
            gather = keys.clamp(0, n_k - 1)
            kg = float32(k.index_select(-2, gather.flatten())).view(b, kv, r.numel(), width, d)
            qg = float32(q.index_select(-2, r)).view(b, kv, g, r.numel(), d).transpose(2, 3)  # [b, kv, r, g, d]
            s = torch.matmul(qg, kg.transpose(-1, -2)).mul_(call.scale)  # [b, kv, rows, g, width]
            s = s.permute(0, 1, 3, 2, 4).reshape(b, h, r.numel(), width).double()
            if bias is not None:
                m = rows_of(bias, r, n_k).to(s.device)
                m = m.expand(*m.shape[:-2], r.numel(), n_k).gather(-1, gather.expand(*m.shape[:-2], -1, -1))
                s = hide(s, m)
            hidden = ~valid | (keys > q_abs[:, None]) if call.causal else ~valid
            s = s.masked_fill(hidden, float("-inf"))
            p = torch.exp(s - lse[..., i:i + per, None])
            found = reduce(banded, Rows(p, q_abs, torch.where(valid, keys, -1)), stats)
            for stat, value in found.items():
                parts.setdefault(stat, []).append(value.float())
            if stats.progress is not None:
                stats.progress(call.name, i + r.numel(), rows.numel())
        return {stat: torch.cat(values, 2) for stat, values in parts.items()}
