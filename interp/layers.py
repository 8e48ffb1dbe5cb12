"""Layers shared by the Hugging-Face-style decoders (OLMo-2 / RePo, LLaMA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.attention import hooked
from interp.hooks import Hook
from interp.tl_modules import MLPWeights


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


class SwiGLU(nn.Module, MLPWeights):
    """``down_proj(silu(gate_proj x) * up_proj x)``, hooked as TransformerLens' gated MLP."""

    hook_pre = Hook("[batch, pos, d_mlp]", "gate_proj x, before the SiLU")
    hook_pre_linear = Hook("[batch, pos, d_mlp]", "up_proj x")
    hook_post = Hook("[batch, pos, d_mlp]", "silu(gate) * up: what down_proj reads")

    def __init__(self, dim: int, hidden: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def tl_mlp_parts(self) -> dict:
        return {"gate": self.gate_proj, "in": self.up_proj, "out": self.down_proj}

    def forward(self, x: Tensor) -> Tensor:
        if not (hooked(self.hook_pre) or hooked(self.hook_pre_linear) or hooked(self.hook_post)):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # no hook-point calls unless hooked
        gate, up = self.hook_pre(self.gate_proj(x)), self.hook_pre_linear(self.up_proj(x))
        return self.down_proj(self.hook_post(F.silu(gate) * up))


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``[batch, kv_head, pos, d]`` -> ``[batch, kv_head * n_rep, pos, d]`` (grouped-query attention)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


def normal_init(root: nn.Module, std: float, extra: dict | None = None) -> None:
    """Every Linear / Embedding weight drawn from N(0, std) and its bias zeroed, and for a module of a type in ``extra``
    (``{type: parameter name}``) that parameter drawn from N(0, std): one pass in module order, which fixes what a seed
    draws."""
    for m in root.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=std)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
            continue
        name = next((n for cls, n in (extra or {}).items() if isinstance(m, cls)), None)
        if name is not None:
            nn.init.normal_(getattr(m, name), std=std)
