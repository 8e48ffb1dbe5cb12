"""Layers shared by the Hugging-Face-style decoders (OLMo-2 / RePo, LLaMA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """RMSNorm normalised in float32, as OLMo-2 and LLaMA do; they differ only in where bf16 is cast back.

    ``olmo``: ``(weight * x_f32).to(dtype)``; ``llama``: ``weight * x_f32.to(dtype)``.
    """

    def __init__(self, dim: int, eps: float = 1e-6, style: str = "olmo"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.style = style

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        if self.style == "llama":
            return self.weight * normed.to(dtype)
        return (self.weight * normed).to(dtype)


class SwiGLU(nn.Module):
    """``down_proj(silu(gate_proj x) * up_proj x)``."""

    def __init__(self, dim: int, hidden: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``[batch, kv_head, pos, d]`` -> ``[batch, kv_head * n_rep, pos, d]`` (grouped-query attention)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)
