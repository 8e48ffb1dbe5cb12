"""Statistics on the CPU flash kernel (``private.flash_cpu``: the output and each row's log-sum-exp), where
``scaled_dot_product_attention`` would run it (``private.sdp_choice``). The private torch APIs it reads and their
fallbacks live in ``backends.private``."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.attention.backends.lse import LseStatistics
from interp.attention.backends.private import flash_cpu, sdp_choice, with_fallback
from interp.attention.mask import additive, key_spans, mask_rows


def flash_serves(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float) -> bool:
    """Whether ``scaled_dot_product_attention`` runs these inputs through the CPU flash kernel, whose log-sum-exp
    ``cpu_flash`` returns with the very output the plain backend gives."""
    if (q.device.type != "cpu" or q.dtype not in (torch.float32, torch.float64) or k.dtype != q.dtype
            or v.dtype != q.dtype):
        return False
    if q.requires_grad or k.requires_grad or v.requires_grad:
        return False
    return sdp_choice(q, k, v, mask, is_causal, scale) == "flash"


def cpu_flash(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
              scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp [batch, head, q])`` of the CPU flash kernel; ``mask`` boolean or additive, handed to the
    kernel additive in the chunks the plain backend calls it in (``key_spans``). Grouped key heads are repeated as
    ``scaled_dot_product_attention`` repeats them, so the output has its bits."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    spans = key_spans(mask, q.shape[-2], k.shape[-2])
    if spans is None:
        return flash_cpu(q, k, v, is_causal, additive(mask, q.dtype), scale)
    parts = [flash_cpu(q[..., a:e, :], k[..., lo:hi, :], v[..., lo:hi, :], False,
                       additive(mask_rows(mask, a, e)[..., lo:hi], q.dtype), scale)
             for a, e, lo, hi in spans]
    return torch.cat([z for z, _ in parts], -2), torch.cat([lse for _, lse in parts], -1)


BACKEND = LseStatistics("statistics_cpu_flash", "cpu", with_fallback(cpu_flash, "CPU flash"), accepts=flash_serves)
