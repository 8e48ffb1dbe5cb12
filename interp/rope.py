"""Rotary position embeddings at arbitrary real-valued positions.

Two layouts exist in the wild and checkpoints are only correct with their own:

- interleaved pairs (the learned-increment models): dims (0,1), (2,3), ... are rotated together;
- half split / ``rotate_half`` (OLMo-2, LLaMA, RePo): dim i is paired with dim i + d/2.

Both take positions of shape ``[batch, pos]`` (shared by all heads) or ``[batch, head, pos]``
(one position per head, as in RePo and the per-head increment variant) and queries or keys of
shape ``[batch, pos, head, d_head]``. Angles are computed in float32 on the fly, so positions may be
fractional, negative or beyond the training length.

``scaling`` (a Hugging Face ``rope_parameters`` dict without ``rope_theta``, or None) rescales the
frequencies as ``transformers`` does: ``linear`` divides every frequency by ``factor``; ``llama3`` divides
the low frequencies by ``factor``, keeps the high ones and interpolates between. Other types (yarn,
longrope, dynamic) depend on more than the frequencies and are refused where configs are read
(``interp.loading.hf_config``).

Models whose positions are the plain integers ``start..start+n-1`` for every head (LLaMA without a hook on
its positions) rotate with ``rotate_half_split_range``: the same float32 angles and the same arithmetic, so
the same bits, but cos / sin come from a table computed once per (d_head, theta, scaling, device) instead of
once per head, layer and forward pass.
"""

from __future__ import annotations

import math
import threading

import torch
from torch import Tensor

SCALING_TYPES = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}


def inverse_frequencies(d_head: int, theta: float, device=None, scaling: dict | None = None) -> Tensor:
    """``1 / theta^(2i/d_head)`` for i in 0..d_head/2-1, float32, rescaled by ``scaling``."""
    if d_head % 2:
        raise ValueError(f"RoPE needs an even head dimension, got d_head={d_head}")
    exponent = torch.arange(0, d_head, 2, device=device, dtype=torch.int64).float() / d_head
    inv = 1.0 / (theta**exponent)
    kind = (scaling or {}).get("rope_type", "default")
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / float(scaling["factor"])
    if kind == "llama3":
        factor, low, high = float(scaling["factor"]), float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    raise ValueError(f"rope_type {kind!r} is not supported (supported: default, {', '.join(SCALING_TYPES)})")


def _angles(positions: Tensor, d_head: int, theta: float, scaling: dict | None = None) -> Tensor:
    """Angles ``[batch, pos, head_or_1, d_head/2]`` for positions ``[batch, pos]`` or ``[batch, head, pos]``."""
    pos = positions.float()
    if pos.dim() == 2:
        pos = pos.unsqueeze(-1)
    elif pos.dim() == 3:
        pos = pos.transpose(1, 2)
    else:
        raise ValueError(f"positions must be [batch, pos] or [batch, head, pos], got shape {tuple(positions.shape)}")
    return pos.unsqueeze(-1) * inverse_frequencies(d_head, theta, positions.device, scaling)


def rotate_interleaved(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """Rotate pairs (2i, 2i+1) of ``x [batch, pos, head, d_head]`` by ``position * freq_i``."""
    ang = _angles(positions, x.shape[-1], theta)
    cos, sin = ang.cos(), ang.sin()
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2).type_as(x)


def rotate_half_split(x: Tensor, positions: Tensor, theta: float, scaling: dict | None = None) -> Tensor:
    """Rotate dim i with dim i + d/2 of ``x [batch, pos, head, d_head]`` (the ``rotate_half`` convention)."""
    ang = _angles(positions, x.shape[-1], theta, scaling)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    xf = x.float()
    half = x.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos + rotated * sin).type_as(x)


_TABLES: dict[tuple, tuple[Tensor, Tensor]] = {}
_TABLES_LOCK = threading.Lock()
_MAX_TABLES = 16


def half_split_table(end: int, d_head: int, theta: float, scaling: dict | None = None, device=None) -> tuple[Tensor, Tensor]:
    """cos and signed sin ``[>= end, d_head]`` (float32) of positions 0, 1, ... in the ``rotate_half`` layout: row p
    holds the cos ``rotate_half_split`` computes for position p, and its sin negated in the first half (so that
    ``x * cos + roll(x, d/2) * signed_sin`` is the rotation). Cached, and grown (to a power of two) on demand."""
    device = torch.device(device if device is not None else "cpu")
    key = (d_head, float(theta), tuple(sorted((scaling or {}).items())), device)
    table = _TABLES.get(key)
    if table is None or table[0].shape[0] < end:
        size = max(64, 1 << max(end - 1, 1).bit_length())
        pos = torch.arange(size, device=device, dtype=torch.float32)
        ang = pos.unsqueeze(-1) * inverse_frequencies(d_head, theta, device, scaling)
        table = (torch.cat((ang, ang), -1).cos(), torch.cat((-ang.sin(), ang.sin()), -1))
        with _TABLES_LOCK:
            if len(_TABLES) >= _MAX_TABLES and key not in _TABLES:
                _TABLES.clear()
            _TABLES[key] = table
    return table


def rotate_half_split_range(x: Tensor, start: int, theta: float, scaling: dict | None = None) -> Tensor:
    """``rotate_half_split`` of ``x [batch, pos, head, d_head]`` at positions ``start..start+pos-1`` (all heads),
    with cos / sin read from ``half_split_table``."""
    n, d = x.shape[1], x.shape[-1]
    cos, signed_sin = half_split_table(start + n, d, theta, scaling, x.device)
    xf = x.float()
    out = xf * cos[start : start + n, None, :]
    return out.add_(xf.roll(d // 2, -1).mul_(signed_sin[start : start + n, None, :])).type_as(x)


def polar_interleaved(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """PoPE: each pair keeps only its magnitude (through softplus) and takes a position-only phase."""
    ang = _angles(positions, x.shape[-1], theta)
    magnitude = torch.nn.functional.softplus(x.float().unflatten(-1, (-1, 2)).norm(dim=-1))
    out = torch.stack((magnitude * ang.cos(), magnitude * ang.sin()), dim=-1)
    return out.flatten(-2).type_as(x)
