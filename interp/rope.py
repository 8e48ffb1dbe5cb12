"""Rotary position embeddings at arbitrary real-valued positions.

Two layouts exist in the wild and checkpoints are only correct with their own:

- interleaved pairs (the learned-increment models): dims (0,1), (2,3), ... are rotated together;
- half split / ``rotate_half`` (OLMo-2, LLaMA, RePo): dim i is paired with dim i + d/2.

Both take positions of shape ``[batch, pos]`` (shared by all heads) or ``[batch, head, pos]``
(one position per head, as in RePo and the per-head increment variant) and queries or keys of
shape ``[batch, pos, head, d_head]``. Angles are computed in float32 on the fly, so positions may be
fractional, negative or beyond the training length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def inverse_frequencies(d_head: int, theta: float, device=None) -> Tensor:
    """``1 / theta^(2i/d_head)`` for i in 0..d_head/2-1, float32."""
    if d_head % 2:
        raise ValueError(f"RoPE needs an even head dimension, got d_head={d_head}")
    exponent = torch.arange(0, d_head, 2, device=device, dtype=torch.float32) / d_head
    return 1.0 / (theta**exponent)


def _angles(positions: Tensor, d_head: int, theta: float) -> Tensor:
    """Angles ``[batch, pos, head_or_1, d_head/2]`` for positions ``[batch, pos]`` or ``[batch, head, pos]``."""
    pos = positions.float()
    if pos.dim() == 2:
        pos = pos.unsqueeze(-1)
    elif pos.dim() == 3:
        pos = pos.transpose(1, 2)
    else:
        raise ValueError(f"positions must be [batch, pos] or [batch, head, pos], got shape {tuple(positions.shape)}")
    return pos.unsqueeze(-1) * inverse_frequencies(d_head, theta, positions.device)


def rotate_interleaved(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """Rotate pairs (2i, 2i+1) of ``x [batch, pos, head, d_head]`` by ``position * freq_i``."""
    ang = _angles(positions, x.shape[-1], theta)
    cos, sin = ang.cos(), ang.sin()
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2).type_as(x)


def rotate_half_split(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """Rotate dim i with dim i + d/2 of ``x [batch, pos, head, d_head]`` (the ``rotate_half`` convention)."""
    ang = _angles(positions, x.shape[-1], theta)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    xf = x.float()
    half = x.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos + rotated * sin).type_as(x)


def polar_interleaved(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """PoPE: each pair keeps only its magnitude (through softplus) and takes a position-only phase."""
    ang = _angles(positions, x.shape[-1], theta)
    magnitude = torch.nn.functional.softplus(x.float().unflatten(-1, (-1, 2)).norm(dim=-1))
    out = torch.stack((magnitude * ang.cos(), magnitude * ang.sin()), dim=-1)
    return out.flatten(-2).type_as(x)
