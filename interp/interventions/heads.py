"""Masking attention heads: each listed head's output (``blocks.{l}.attn.hook_z``) is set to zero before the output
projection, so the head writes nothing to the residual stream (the ablation of Wu et al. 2024's retrieval-head
experiment and of most head-knockout studies)."""

from __future__ import annotations

import dataclasses

from interp.interventions import Intervention, register


@register
@dataclasses.dataclass(frozen=True)
class MaskHeads(Intervention):
    """The listed heads' outputs (``hook_z``) set to zero: each head writes nothing to the residual stream."""

    heads: frozenset  # {(layer, head), ...}
    name = "mask-heads"
    example = dict(heads={(0, 1), (1, 0)})

    def __post_init__(self):
        object.__setattr__(self, "heads", frozenset((int(l), int(h)) for l, h in self.heads))

    def fwd_hooks(self, model):
        for layer, head in sorted(self.heads):
            if not (0 <= layer < model.n_layers and 0 <= head < model.n_heads):
                raise ValueError(f"MaskHeads heads: ({layer}, {head}) is not a head of {model.model_name} "
                                 f"({model.n_layers} layers x {model.n_heads} heads)")
        by_layer: dict[int, list[int]] = {}
        for layer, head in sorted(self.heads):
            by_layer.setdefault(layer, []).append(head)

        def zero(heads):
            def hook(z, hook):
                z[:, :, heads] = 0.0
                return z
            return hook

        return [(f"blocks.{layer}.attn.hook_z", zero(heads)) for layer, heads in by_layer.items()]
