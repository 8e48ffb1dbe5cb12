"""Rotary frequency bands, removed or made position-free (Barbero et al., ICLR 2025, "Round and Round We Go! What makes
Rotary Positional Encodings useful?").

RoPE turns each pair of a head's query and key dims (a band) by ``position * frequency``; the attention logit is the sum
of the bands' terms ``q_b . R(p_k - p_q) k_b``. Barbero et al. find that the highest frequencies build positional heads
(previous-token, diagonal) and the lowest carry semantics, and propose p-RoPE: the lowest frequencies not rotated.

- ``RemoveRotaryBands``: the chosen bands of the chosen heads' queries (after rotation) are set to zero, so those bands
  add nothing to those heads' logits (keys are left alone: a key head that grouped-query heads share serves the others
  unchanged).
- ``UnrotateRotaryBands``: the chosen bands of queries and keys are turned back by their positions, so their term is
  ``q_b . k_b`` whatever the distance: content without position, as p-RoPE's truncated bands. Keys are shared by the
  query heads of a group, so the heads chosen must be whole groups.

Bands are chosen per layer as ``bands`` (indices in order of frequency, 0 the highest), or the ``highest`` or
``lowest`` fraction of the layer's bands.
"""

from __future__ import annotations

import dataclasses
import math

from interp.capabilities import Capability, require
from interp.interventions import Intervention, as_tuple, heads_of, layers_of, register


def _fraction(value: float, which: str, who: str) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"{who} {which}={value}: a fraction of the bands, between 0 and 1")
    return float(value)


@dataclasses.dataclass(frozen=True)
class _Bands(Intervention):
    bands: tuple | None = None  # indices in order of frequency, 0 = the highest
    highest: float = 0.0  # or this fraction of each layer's bands, from the highest frequency down
    lowest: float = 0.0  # or from the lowest frequency up
    layers: tuple | None = None  # None: every layer that rotates
    heads: tuple | None = None  # query heads; None: all

    def __post_init__(self):
        who = type(self).__name__
        object.__setattr__(self, "bands", as_tuple(self.bands))
        object.__setattr__(self, "layers", as_tuple(self.layers))
        object.__setattr__(self, "heads", as_tuple(self.heads))
        object.__setattr__(self, "highest", _fraction(self.highest, "highest", who))
        object.__setattr__(self, "lowest", _fraction(self.lowest, "lowest", who))
        given = [n for n, on in (("bands", self.bands is not None), ("highest", self.highest > 0),
                                 ("lowest", self.lowest > 0)) if on]
        if len(given) != 1:
            raise ValueError(f"{who}: give exactly one of bands=, highest= or lowest= "
                             f"(got {', '.join(given) or 'none'})")

    def chosen(self, spec) -> list[int]:
        """The bands of one layer's ``RotarySpec`` this edit takes, in the spec's own numbering."""
        order = spec.by_frequency().tolist()
        if self.bands is not None:
            bad = [b for b in self.bands if not 0 <= b < spec.n_bands]
            if bad:
                raise ValueError(f"{type(self).__name__} bands: {bad[0]} is not a band of a layer with "
                                 f"{spec.n_bands} bands")
            return [order[b] for b in self.bands]
        share = self.highest or self.lowest
        k = min(spec.n_bands, max(1, math.floor(share * spec.n_bands + 0.5)))
        return order[:k] if self.highest else order[-k:]

    def _targets(self, model) -> list[tuple[int, object, list[int]]]:
        """``(layer, spec, bands)`` for every chosen layer that rotates."""
        who = type(self).__name__
        require(model, Capability.ROTARY, who, kind="intervention")
        out = [(l, spec, self.chosen(spec)) for l in layers_of(model, self.layers, who)
               if (spec := model.rotation(l)) is not None]
        if not out:
            raise ValueError(f"{who}: none of the layers chosen in {model.model_name} rotates")
        return out


@register
@dataclasses.dataclass(frozen=True)
class RemoveRotaryBands(_Bands):
    """Rotary bands of the heads' queries, after rotation, set to zero (``bands``, or the ``highest`` or ``lowest``
    fraction of each layer's): those bands add nothing to the attention logit."""

    name = "remove-rotary-bands"
    needs = (Capability.ROTARY,)
    example = dict(highest=0.25)

    def fwd_hooks(self, model):
        import torch

        heads = heads_of(model, self.heads, type(self).__name__)
        hooks = []
        for layer, spec, bands in self._targets(model):
            dims = spec.pairs()[bands].flatten()

            def zero(q, hook, dims=dims):
                keep = torch.ones(q.shape[-2:], dtype=q.dtype, device=q.device)
                keep[torch.tensor(heads, device=q.device)[:, None], dims.to(q.device)[None, :]] = 0
                return q * keep
            hooks.append((f"blocks.{layer}.attn.hook_rot_q", zero))
        return hooks


@register
@dataclasses.dataclass(frozen=True)
class UnrotateRotaryBands(_Bands):
    """Rotary bands of queries and keys turned back to position 0 (chosen as ``RemoveRotaryBands`` chooses them, the
    heads whole key groups): content without position, as p-RoPE's truncated frequencies."""

    name = "unrotate-rotary-bands"
    needs = (Capability.POSITIONS, Capability.ROTARY)
    example = dict(lowest=0.25)

    def fwd_hooks(self, model):
        import torch

        who = type(self).__name__
        require(model, Capability.POSITIONS, who, kind="intervention")
        heads = heads_of(model, self.heads, who)
        hooks = []
        for layer, spec, bands in self._targets(model):
            seen = {}

            def positions(pos, hook, seen=seen):
                seen["pos"] = pos.detach().float()  # [batch, head, pos]
                return pos

            def turn_back(x, hook, seen=seen, spec=spec, bands=bands, keys=False):
                pos = seen["pos"]
                n_heads, n_kv = pos.shape[1], x.shape[2]
                rep = n_heads // n_kv
                chosen = heads
                if keys:
                    groups = sorted({h // rep for h in heads})
                    split = [g for g in groups if any(h not in heads for h in range(g * rep, (g + 1) * rep))]
                    if split:
                        g = split[0]
                        raise ValueError(f"{who} heads: query heads {g * rep}..{(g + 1) * rep - 1} share key head {g}, "
                                         "whose keys would turn for all of them; choose whole groups")
                    pos, chosen = pos[:, ::rep], groups
                if x.shape[1] != pos.shape[-1]:  # a KV cache hands over every cached key: positions 0..n-1
                    pos = torch.arange(x.shape[1], device=x.device,
                                       dtype=torch.float32).expand(pos.shape[0], pos.shape[1], -1)
                idx = torch.tensor(chosen, device=x.device)
                out = x.clone()
                out[:, :, idx] = spec.rotate(x[:, :, idx], -pos[:, idx], bands)
                return out
            hooks += [(f"blocks.{layer}.attn.hook_positions", positions),
                      (f"blocks.{layer}.attn.hook_rot_q", turn_back),
                      (f"blocks.{layer}.attn.hook_rot_k", lambda k, hook, f=turn_back: f(k, hook, keys=True))]
        return hooks
