"""Statistics on the CPU flash kernel: ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`` returns the
output and each row's log-sum-exp. The private torch APIs of the CPU live here only (this op and
``torch._fused_sdp_choice``), each with a fallback: ``lse.plain_lse`` for the kernel, "no" for the choice (the chunked
backend serves)."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.attention.backends.lse import LseStatistics, with_fallback
from interp.attention.mask import additive, key_spans, mask_rows


def flash_serves(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float) -> bool:
    """Whether ``scaled_dot_product_attention`` runs these inputs through the CPU flash kernel, whose log-sum-exp
    ``cpu_flash`` returns with the very output the plain backend gives."""
    if (q.device.type != "cpu" or q.dtype not in (torch.float32, torch.float64) or k.dtype != q.dtype
            or v.dtype != q.dtype):
        return False
    if q.requires_grad or k.requires_grad or v.requires_grad:
        return False
    try:
        from torch.nn.attention import SDPBackend

        choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=scale,
                                         enable_gqa=k.shape[1] != q.shape[1])
        return choice == int(SDPBackend.FLASH_ATTENTION)
    except (AttributeError, ImportError, RuntimeError, TypeError):
        return False


def cpu_flash(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
              scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp [batch, head, q])`` of the CPU flash kernel; ``mask`` boolean or additive, handed to the
    kernel additive in the chunks the plain backend calls it in (``key_spans``). Grouped key heads are repeated as
    ``scaled_dot_product_attention`` repeats them, so the output has its bits."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    spans = key_spans(mask, q.shape[-2], k.shape[-2])
    if spans is None:
        return flash(q, k, v, 0.0, is_causal, attn_mask=additive(mask, q.dtype), scale=scale)
    parts = [flash(q[..., a:e, :], k[..., lo:hi, :], v[..., lo:hi, :], 0.0, False,
                   attn_mask=additive(mask_rows(mask, a, e)[..., lo:hi], q.dtype), scale=scale)
             for a, e, lo, hi in spans]
    return torch.cat([z for z, _ in parts], -2), torch.cat([lse for _, lse in parts], -1)


BACKEND = LseStatistics("statistics_cpu_flash", "cpu", with_fallback(cpu_flash, "CPU flash"), accepts=flash_serves)
