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
the low frequencies by ``factor``, keeps the high ones and interpolates between. These are the types the
hand-written families implement (``SCALING_TYPES``). The others (yarn, longrope, dynamic, ...) depend on more
than fixed frequencies: yarn multiplies cos and sin by an attention factor, longrope switches frequency sets
past its original length, dynamic recomputes the base from the sequence length. A checkpoint that needs one is
run by the generic ``hf`` family with transformers' own rotary embedding (``interp.loading.hf_config.rope_type``
tells them apart before a family is chosen).

``RotarySpec`` describes one layer's rotation band by band (what ``Capability.ROTARY`` promises): band i is the
pair of dims that turns by ``position * inv_freq[i]``; ``rotate_bands`` turns chosen bands by chosen positions
(negative positions turn them back), whichever layout the model uses. It also says which ``rope_type`` made the
frequencies and the ``attention_scaling`` the model multiplies its rotated queries and keys by (yarn's and
longrope's attention factor; 1 otherwise). A rotation is linear, so turning an already scaled query keeps its scale.

Models whose positions are the plain integers ``start..start+n-1`` for every head (LLaMA without a hook on
its positions) rotate with ``rotate_half_split_range``: the same float32 angles and the same arithmetic, so
the same bits, but cos / sin come from a table computed once per (d_head, theta, scaling, device) instead of
once per head, layer and forward pass.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import torch
from torch import Tensor

SCALING_TYPES = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings")}


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
        factor, low, high = (float(scaling["factor"]), float(scaling["low_freq_factor"]),
                             float(scaling["high_freq_factor"]))
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


def half_split_table(end: int, d_head: int, theta: float, scaling: dict | None = None,
                     device=None) -> tuple[Tensor, Tensor]:
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


LAYOUTS = ("half_split", "interleaved")


@dataclass(frozen=True, eq=False)
class RotarySpec:
    """One layer's rotation, band by band: band i is the pair of dims ``pairs()[i]`` of ``[batch, pos, head, d_head]``
    that turns by ``position * inv_freq[i]`` (radians); dims past ``2 * len(inv_freq)`` are not rotated (partial
    rotary). ``layout`` pairs dim i with i + n_bands (``half_split``, ``rotate_half``) or 2i with 2i + 1
    (``interleaved``)."""

    inv_freq: Tensor  # [n_bands] float32, with any frequency scaling applied
    layout: str
    attention_scaling: float = 1.0  # factor on cos and sin (queries and keys after rotation), as the model applies it
    rope_type: str | None = None  # the scaling that made inv_freq ("default", "linear", "yarn", ...); None: not stated

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"rotary layout {self.layout!r} is not one of {LAYOUTS}")
        if not (math.isfinite(self.attention_scaling) and self.attention_scaling > 0):
            raise ValueError(f"rotary attention_scaling={self.attention_scaling!r} must be a finite number > 0")

    @property
    def n_bands(self) -> int:
        return int(self.inv_freq.numel())

    def pairs(self) -> Tensor:
        """``[n_bands, 2]``: the two dims of each band."""
        i = torch.arange(self.n_bands)
        if self.layout == "half_split":
            return torch.stack([i, i + self.n_bands], dim=1)
        return torch.stack([2 * i, 2 * i + 1], dim=1)

    def by_frequency(self) -> Tensor:
        """Band indices from the highest frequency (fastest turning) to the lowest."""
        return torch.argsort(self.inv_freq, descending=True, stable=True)

    def wavelengths(self) -> Tensor:
        """Tokens per full turn of each band (``2 pi / inv_freq``)."""
        return 2 * math.pi / self.inv_freq

    def rotate(self, x: Tensor, positions: Tensor, bands=None) -> Tensor:
        """``rotate_bands(x, positions, self, bands)``."""
        return rotate_bands(x, positions, self, bands)


def rotate_bands(x: Tensor, positions: Tensor, spec: RotarySpec, bands=None) -> Tensor:
    """``x [batch, pos, head, d_head]`` with bands ``bands`` (all when None) turned by ``positions`` (``[batch, pos]``
    or ``[batch, head_or_1, pos]``; negative values turn back), the other dims unchanged; computed in float32."""
    pairs = spec.pairs()
    chosen = torch.arange(spec.n_bands) if bands is None else torch.as_tensor(bands, dtype=torch.long).flatten()
    pos = positions.float()
    pos = pos.unsqueeze(-1) if pos.dim() == 2 else pos.transpose(1, 2) if pos.dim() == 3 else None
    if pos is None:
        raise ValueError(f"positions must be [batch, pos] or [batch, head, pos], got shape {tuple(positions.shape)}")
    ang = pos.unsqueeze(-1) * spec.inv_freq.to(x.device, torch.float32)[chosen]  # [batch, pos, head_or_1, bands]
    cos, sin = ang.cos(), ang.sin()
    a, b = pairs[chosen, 0].to(x.device), pairs[chosen, 1].to(x.device)
    out = x.float().clone()
    xa, xb = out[..., a], out[..., b]
    out[..., a] = xa * cos - xb * sin
    out[..., b] = xa * sin + xb * cos
    return out.type_as(x)
