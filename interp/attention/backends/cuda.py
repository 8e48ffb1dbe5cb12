"""Statistics on CUDA: the flash and memory-efficient kernels return each row's log-sum-exp with the output
(``private.flash_cuda`` / ``private.efficient_cuda``); the one ``scaled_dot_product_attention`` would pick
(``private.sdp_choice``) is called, so the masses ride the forward's own kernel. Where one is missing, raises, or the
choice is another kernel (cuDNN, math), ``private.plain_lse`` serves (warned once). Every line but the raw op calls
runs in the CPU tests, which plug the CPU kernel into this backend."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.attention.backends.lse import LseStatistics
from interp.attention.backends.private import efficient_cuda, flash_cuda, sdp_choice, with_fallback
from interp.attention.mask import additive

ALIGNMENT = 8  # the memory-efficient kernel reads its bias in rows aligned to 8 elements (as sdpa pads them)


def aligned_bias(mask: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """An additive mask as the memory-efficient kernel takes it: padded to an aligned row stride, expanded to
    ``[batch, head, q, k]`` (what ``scaled_dot_product_attention``'s ``preprocess_mask`` does)."""
    n_k = mask.shape[-1]
    if n_k % ALIGNMENT:
        mask = F.pad(mask, (0, ALIGNMENT - n_k % ALIGNMENT))[..., :n_k]
    return mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


def cuda_lse(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
             scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp [batch, head, q] float32)`` of the kernel sdpa would pick. Grouped key heads go to the
    flash kernel as they are (FlashAttention reads them grouped; repeated where this torch's op refuses them) and
    repeated for the memory-efficient one."""
    rep = q.shape[1] // k.shape[1]
    mask = additive(mask, q.dtype)
    picked = sdp_choice(q, k, v, mask, is_causal, scale)
    if picked == "flash" and mask is None:
        try:
            out, lse = flash_cuda(q, k, v, is_causal, scale)
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:
            if rep == 1:
                raise
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            out, lse = flash_cuda(q, k, v, is_causal, scale)
    elif picked == "efficient":
        if rep > 1:
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        bias = None if mask is None else aligned_bias(mask, q, k)
        out, lse = efficient_cuda(q, k, v, bias, is_causal, scale)
    else:
        raise NotImplementedError(f"scaled_dot_product_attention picks the {picked} kernel here: no log-sum-exp")
    return out, lse[..., :q.shape[-2]].float()


BACKEND = LseStatistics("statistics_cuda", "cuda", with_fallback(cuda_lse, "CUDA"))
