"""Edits of the positions heads rotate by (``blocks.{l}.attn.hook_positions``): shifted, stretched or shuffled.

Rotary attention sees only differences of positions, so a shift changes nothing in exact arithmetic (a check of that
claim, and of float error at large offsets); a stretch rescales every distance (context extension by position
interpolation is a stretch by ``train length / new length``); a shuffle keeps the set of positions but breaks their
order (what is left of a model's skill without word order). Families whose rotation ignores edits of the hook
(``positions_read_only``: the generic Hugging Face family) are refused.
"""

from __future__ import annotations

import dataclasses

from interp.capabilities import Capability, require
from interp.interventions import Intervention, as_tuple, layers_of, register


@dataclasses.dataclass(frozen=True)
class _Positions(Intervention):
    layers: tuple | None = None  # None: every layer
    needs = (Capability.POSITIONS,)

    def __post_init__(self):
        object.__setattr__(self, "layers", as_tuple(self.layers))

    def edit(self, pos):
        raise NotImplementedError

    def fwd_hooks(self, model):
        who = type(self).__name__
        require(model, Capability.POSITIONS, who, kind="intervention")
        if model.positions_read_only:
            raise ValueError(f"{who}: {model.model_name}'s positions are read-only (its rotation is computed inside "
                             "transformers' layers), so an edit would change nothing")
        return [(f"blocks.{layer}.attn.hook_positions", lambda pos, hook: self.edit(pos))
                for layer in layers_of(model, self.layers, who)]


@register
@dataclasses.dataclass(frozen=True)
class ShiftPositions(_Positions):
    """The positions heads rotate by moved by ``offset``: rotary attention, which sees only their differences,
    changes by float error alone."""

    offset: float = 0.0
    name = "shift-positions"
    example = dict(offset=3.0)

    def edit(self, pos):
        return pos + float(self.offset)


@register
@dataclasses.dataclass(frozen=True)
class StretchPositions(_Positions):
    """The positions heads rotate by multiplied by ``factor``: every distance rescaled (position interpolation)."""

    factor: float = 1.0
    name = "stretch-positions"
    example = dict(factor=0.5)

    def edit(self, pos):
        return pos * float(self.factor)


@register
@dataclasses.dataclass(frozen=True)
class ShufflePositions(_Positions):
    """The positions heads rotate by permuted along the sequence (``seed``): the set kept, the order broken."""

    seed: int = 0
    name = "shuffle-positions"
    example = dict(seed=1)

    def edit(self, pos):
        """The same permutation of the sequence axis for every batch row and head, drawn from ``seed`` and the
        length."""
        import torch

        g = torch.Generator().manual_seed(int(self.seed))
        order = torch.randperm(pos.shape[-1], generator=g).to(pos.device)
        return pos[..., order]
