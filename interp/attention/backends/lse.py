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
  bf16 output would round a mass to 3 digits);
- the attended distance's mean and spread of causal rows (``moments``: the distance ``q - k`` is linear in the key)
  ride kernel calls with the key index centred on a block of rows and its square as values, in float64 where the
  backend's kernel runs it (``moments_dtype``: the CPU flash kernel; CUDA's kernels have none, the chunked backend
  serves distances there). float32 would not do: the spread of a near-one-hot row is ``E[u^2] - E[u]^2`` of the
  centred index ``u``, which cancels to ``eps * block^2`` (5e-4 positions^2 on a 45-row sliding-window test, where
  the 1e-5 target of its scale allows 3.5e-5). On SmolLM2-135M at 1,024 tokens against float64 of the same queries
  and keys (``bench.exactness``' own reference) the float64 columns miss the mean by 4.7e-8 of its scale and the
  variance by 9.5e-8 of the scale squared (chunked: 1.4e-6 and 1.6e-6); at 2,048 tokens on one CPU thread the pass
  for the two distances took 16.8 s against the chunked 11.0 s (the float64 kernel call costs twice a float32 one).

Not served here (they take ``backends.chunked``), measured by ``bench.value_columns`` on SmolLM2-135M's own float32
queries and keys at 2,048 tokens against float64: entropy as ``L - scale q . E[k]`` (``E[k]``: the keys as values)
misses by 1.3e-5, past the 1e-5 target; a request with the top key (every key of the row), far mass or entropy runs
the chunked pass for all its statistics. Block sizes come from the device
(``budget.rows_per_chunk``). TF32 matmuls (``torch.backends.cuda.matmul.allow_tf32``) would round the band's
logits to 10 bits: leave it off (torch's default) for exact masses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

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
class LseStatistics:
    """The statistics backend on one device type: ``kernel`` gives the output and ``L``; ``accepts(q, k, v, mask,
    is_causal, scale)`` says whether it runs these inputs as the forward would (else the chunked backend serves)."""

    name: str
    device_type: str
    kernel: LseKernel
    accepts: Callable[..., bool] = lambda *args: True
    moments_dtype: torch.dtype | None = None
    reads_windows = False

    def serves(self, call) -> bool:
        stats = call.statistics
        if stats is None or call.hooked or call.softcap is not None or call.scores is not None:
            return False
        if call.q.device.type != self.device_type or call.q.requires_grad or call.k.requires_grad:
            return False
        moments = call.causal and self.moments_dtype is not None
        if not all(DECLARED[s].lse_served(stats, moments) for s in stats.wanted):
            return False
        mask, is_causal = call.mask.fused(call.q, call.k)
        return self.accepts(call.q, call.k, call.k, mask, is_causal, call.scale)

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
        by_moments = [s for s in stats.wanted if s not in banded and DECLARED[s].moments is not None]
        by_columns = [s for s in stats.wanted if s not in banded and s not in by_moments]
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
        if by_moments:
            mean, var = self.moments(q, k, mask, is_causal, call.scale, rows,
                                     rows_per_chunk(q.device, 9 * q.shape[0] * n_k, stats.chunk_bytes))
            out.update({s: DECLARED[s].moments(mean, var).float() for s in by_moments})
        stats.record(call.name, out)
        return z

    def moments(self, q: Tensor, k: Tensor, mask, is_causal: bool, scale: float, rows: Tensor,
                per: int) -> tuple[Tensor, Tensor]:
        """The attended distance's mean and variance ``[batch, head, rows]`` of causal ``rows``: per block of ``per``
        rows (their masks' rows within the budget), one float64 kernel call on the keys up to the block's last row
        with the columns ``u = key - c`` and ``u ** 2`` as values, ``c`` the block's first query position; the
        distance is ``q - c - u``. float64, as the variance ``E[u^2] - E[u]^2`` of a near-one-hot row cancels: in
        float32 it missed by ``eps * block^2`` (5e-4 for 45 rows, a spread of 0.1 position)."""
        n_k = k.shape[-2]
        offset = n_k - q.shape[-2]
        k = k.to(self.moments_dtype)
        means, variances = [], []
        for i in range(0, rows.numel(), per):
            r = rows[i:i + per]
            at = r + offset
            c, keys = int(at[0]), int(at[-1]) + 1
            u = torch.arange(keys, device=q.device, dtype=self.moments_dtype) - c
            e, _ = self.columns(q, k, mask, is_causal, scale, r, False, [torch.stack([u, u * u], -1)], keys,
                                self.moments_dtype)
            first, second = e[..., 0].double(), e[..., 1].double()
            means.append((at - c).to(first) - first)
            variances.append((second - first.square()).clamp_(min=0))
        return torch.cat(means, -1), torch.cat(variances, -1)

    def columns(self, q: Tensor, k: Tensor, mask, is_causal: bool, scale: float, rows: Tensor, every: bool,
                columns: list[Tensor], keys: int | None = None,
                dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
        """``(E[columns] [batch, head, rows, c], L [batch, head, rows])``: one kernel call in float32 (or ``dtype``)
        with the per-key ``columns`` as values (the keys themselves when there are none: ``L`` alone). ``keys``: the
        ``rows`` (not ``every``) see none past the first ``keys``, which are all the call reads."""
        n_k = k.shape[-2]
        q_c, mask_c, causal_c = q, mask, is_causal
        if not every:  # the rows asked for only, against their rows of the mask
            q_c, causal_c = q.index_select(-2, rows), False
            mask_c = ((causal_mask(q.shape[-2], n_k, q.device, rows) if is_causal else None) if mask is None
                      else rows_of(mask, rows, n_k))
            if keys is not None:
                k, mask_c = k[..., :keys, :], None if mask_c is None else mask_c[..., :keys]
        q_c, k = (float32(q_c), float32(k)) if dtype is None else (q_c.to(dtype), k.to(dtype))
        b, kv, n, d = k.shape
        values = (torch.cat(columns, -1).to(q_c.dtype)[None, None].expand(b, kv, n, -1) if columns else k)
        width = max(d, values.shape[-1])
        if mask_c is not None and mask_c.is_floating_point():
            mask_c = mask_c.to(q_c.dtype)
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
