"""Every private torch API ``interp.attention`` calls, each behind one function with its fallback, so a torch release
that moves one changes this module only and never the numbers:

- ``softmax_``: ``torch._softmax(..., out=)`` (the softmax written over its own scores, no second ``[rows, keys]``
  block); fallback ``torch.softmax``, the same kernel out of place.
- ``sdp_choice``: ``torch._fused_sdp_choice`` (the kernel ``scaled_dot_product_attention`` would pick); fallback
  ``"unknown"``, so no log-sum-exp backend claims the call (the chunked backend serves it, or ``plain_lse``).
- ``flash_cpu``, ``flash_cuda``, ``efficient_cuda``: the ``torch.ops.aten`` kernels that return each row's log-sum-exp
  with the output; missing, they raise ``AttributeError``, and ``with_fallback`` (every log-sum-exp kernel is wrapped
  in it) serves ``plain_lse``: the public ``scaled_dot_product_attention`` and a float32 logsumexp, warned once."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from interp.attention.backends.sdpa import fused
from interp.attention.budget import rows_per_chunk
from interp.attention.mask import causal_mask, grouped_matmul, hide

LseKernel = Callable[..., tuple[Tensor, Tensor]]


def softmax_(s: Tensor) -> Tensor:
    """Softmax over the last dimension in float32: written over ``s`` where it is float32 and nothing tracks its
    gradient (a chunk's scores are its largest block), else a new tensor."""
    op = getattr(torch, "_softmax", None)
    if op is not None and s.dtype == torch.float32 and not s.requires_grad:
        try:
            return op(s, -1, False, out=s)
        except (RuntimeError, TypeError):
            pass
    return torch.softmax(s.float(), -1)


def sdp_choice(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float) -> str:
    """The kernel ``scaled_dot_product_attention`` picks for these inputs: ``"flash"``, ``"efficient"``, ``"other"``,
    or ``"unknown"`` where this torch cannot say."""
    try:
        from torch.nn.attention import SDPBackend

        picked = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=scale,
                                         enable_gqa=k.shape[1] != q.shape[1])
    except (AttributeError, ImportError, RuntimeError, TypeError):
        return "unknown"
    return {int(SDPBackend.FLASH_ATTENTION): "flash", int(SDPBackend.EFFICIENT_ATTENTION): "efficient"}.get(
        int(picked), "other")


def flash_cpu(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, attn_mask: Tensor | None,
              scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp)`` of the CPU flash kernel (additive ``attn_mask``)."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=attn_mask,
                                                                      scale=scale)[:2]


def flash_cuda(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp)`` of CUDA's flash kernel (no mask)."""
    return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, False, scale=scale)[:2]


def efficient_cuda(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, is_causal: bool,
                   scale: float) -> tuple[Tensor, Tensor]:
    """``(output, log-sum-exp)`` of CUDA's memory-efficient kernel (an aligned additive ``bias``)."""
    return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, is_causal,
                                                                  scale=scale)[:2]


def float32(t: Tensor) -> Tensor:
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def plain_lse(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
              scale: float) -> tuple[Tensor, Tensor]:
    """The fallback kernel, plain torch on any device: the output from ``scaled_dot_product_attention`` (the forward's
    own), ``L`` by a logsumexp of float32 logits one block of rows at a time (the device's budget)."""
    b, h, n_q, _ = q.shape
    n_k = k.shape[-2]
    out = fused(q, k, v, causal=is_causal, bias=mask, scale=scale, softcap=None)
    qf, kf = float32(q), float32(k).transpose(-1, -2)
    per = rows_per_chunk(q.device, 3 * 4 * b * h * n_k)
    lse = []
    for a in range(0, n_q, per):
        e = min(n_q, a + per)
        s = grouped_matmul(qf[..., a:e, :], kf).mul_(scale)
        if mask is not None:
            s = hide(s, mask[..., :n_k] if mask.shape[-2] == 1 else mask[..., a:e, :n_k])
        if is_causal:
            s = s.masked_fill_(~causal_mask(n_q, n_k, s.device, torch.arange(a, e, device=s.device)), float("-inf"))
        lse.append(torch.logsumexp(s, -1))
    return out, torch.cat(lse, -1).float()


_WARNED: set[str] = set()


def with_fallback(kernel: LseKernel, name: str) -> LseKernel:
    """``kernel``, or ``plain_lse`` where it is missing or raises (a torch release that moves a private op): warned
    once per kernel. Out-of-memory is raised, not retried."""

    def run(q, k, v, mask, is_causal, scale):
        try:
            return kernel(q, k, v, mask, is_causal, scale)
        except torch.OutOfMemoryError:
            raise
        except (AttributeError, NotImplementedError, RuntimeError, TypeError) as error:
            if name not in _WARNED:
                _WARNED.add(name)
                warnings.warn(f"interp.attention: the {name} log-sum-exp kernel failed ({type(error).__name__}: "
                              f"{error}); statistics use the plain-torch fallback (slower, same results)",
                              RuntimeWarning, stacklevel=2)
            return plain_lse(q, k, v, mask, is_causal, scale)

    run.kernel = kernel
    return run
