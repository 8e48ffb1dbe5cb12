"""Statistics on CUDA: the flash and memory-efficient kernels return each row's log-sum-exp with the output
(``torch.ops.aten._scaled_dot_product_flash_attention`` / ``_scaled_dot_product_efficient_attention``), the one
``scaled_dot_product_attention`` would pick (``torch._fused_sdp_choice``) is called, so the masses ride the forward's
own kernel. The private torch APIs of CUDA live here only; where one is missing, raises, or the choice is another
kernel (cuDNN, math), ``lse.plain_lse`` serves (warned once). Every line but the raw op calls runs in the CPU tests,
which plug the CPU kernel into this backend."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.attention.backends.lse import LseStatistics, with_fallback
from interp.attention.mask import additive

ALIGNMENT = 8  # the memory-efficient kernel reads its bias in rows aligned to 8 elements (as sdpa pads them)


def aligned_bias(mask: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """An additive mask as the memory-efficient kernel takes it: padded to an aligned row stride, expanded to
    ``[batch, head, q, k]`` (what ``scaled_dot_product_attention``'s ``preprocess_mask`` does)."""
    n_k = mask.shape[-1]
    if n_k % ALIGNMENT:
        mask = F.pad(mask, (0, ALIGNMENT - n_k % ALIGNMENT))[..., :n_k]
    return mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


def choice(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float) -> str:
    """The kernel ``scaled_dot_product_attention`` picks here: ``"flash"``, ``"efficient"`` or ``"other"``."""
    from torch.nn.attention import SDPBackend

    picked = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=scale, enable_gqa=k.shape[1] != q.shape[1])
    return {int(SDPBackend.FLASH_ATTENTION): "flash", int(SDPBackend.EFFICIENT_ATTENTION): "efficient"}.get(
        picked, "other")


def cuda_lse(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
             scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp [batch, head, q] float32)`` of the kernel sdpa would pick. Grouped key heads go to the
    flash kernel as they are (FlashAttention reads them grouped; repeated where this torch's op refuses them) and
    repeated for the memory-efficient one."""
    rep = q.shape[1] // k.shape[1]
    mask = additive(mask, q.dtype)
    picked = choice(q, k, v, mask, is_causal, scale)
    flash = torch.ops.aten._scaled_dot_product_flash_attention
    if picked == "flash" and mask is None:
        try:
            out, lse = flash(q, k, v, 0.0, is_causal, False, scale=scale)[:2]
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:
            if rep == 1:
                raise
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            out, lse = flash(q, k, v, 0.0, is_causal, False, scale=scale)[:2]
    elif picked == "efficient":
        if rep > 1:
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        bias = None if mask is None else aligned_bias(mask, q, k)
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, is_causal,
                                                                          scale=scale)[:2]
    else:
        raise NotImplementedError(f"scaled_dot_product_attention picks the {picked} kernel here: no log-sum-exp")
    return out, lse[..., :q.shape[-2]].float()


BACKEND = LseStatistics("statistics_cuda", "cuda", with_fallback(cuda_lse, "CUDA"))
