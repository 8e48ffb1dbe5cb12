"""Masking attention heads by their queries (Wu et al. 2024, "Retrieval Head Mechanistically Explains Long-Context
Factuality"): each listed head's query is set to zero, so its every score ``q . k`` is 0 and it attends uniformly to
the keys it can see (1 / (t + 1) on each at row t of a causal model, 1 / window inside a sliding window). The head
still writes to the residual stream, the mean of the visible values; ``MaskHeads`` instead zeroes what it writes.

The authors' code zeroes ``query_states[:, head]`` after rotation (``faiss_attn/source/modeling_llama.py``), and only
while decoding: the prompt is prefilled unmasked and the edit applies from the last prompt token on
(``needle_in_haystack_with_mask.py``). Here:

- ``from_position=0`` (default): every query row. The edit is on ``blocks.{l}.attn.hook_rot_q`` where the model
  rotates and on ``hook_q`` where it does not (rotation and QK-norm keep a zero query zero), so it holds inside
  ``model.query_rows`` too. A model that adds a position bias to its scores (ALiBi) keeps it: the head then attends as
  the bias alone says, as zeroing the query does there.
- ``from_position=p``: only the query rows at positions p and after (the authors' protocol with p the last prompt
  token). The edit is on ``hook_attn_scores``: the head's visible scores in those rows are set to 0 (masked keys,
  -inf or the large negative a transformers mask adds, stay masked), which is zeroing their queries for a model without
  a score bias, and uniform attention over the visible keys for one with. With a KV cache the new rows are the last
  positions. Rows chosen by ``model.query_rows`` would leave the others to a fused kernel that never sees the edit, so
  that is refused.
"""

from __future__ import annotations

import dataclasses

from interp.interventions import Intervention, register


@register
@dataclasses.dataclass(frozen=True)
class MaskHeadQueries(Intervention):
    """The listed heads' queries set to zero, in every row or from ``from_position`` on: each attends uniformly to the
    keys it sees (Wu et al. 2024's masking of retrieval heads), and still writes the mean of their values."""

    heads: frozenset  # {(layer, head), ...}
    from_position: int = 0  # query positions before this one are left alone
    name = "mask-head-queries"
    example = dict(heads={(0, 1)}, from_position=2)

    def __post_init__(self):
        object.__setattr__(self, "heads", frozenset((int(l), int(h)) for l, h in self.heads))
        if int(self.from_position) < 0:
            raise ValueError(f"MaskHeadQueries from_position={self.from_position}: a position, at least 0")
        object.__setattr__(self, "from_position", int(self.from_position))

    def fwd_hooks(self, model):
        for layer, head in sorted(self.heads):
            if not (0 <= layer < model.n_layers and 0 <= head < model.n_heads):
                raise ValueError(f"MaskHeadQueries heads: ({layer}, {head}) is not a head of {model.model_name} "
                                 f"({model.n_layers} layers x {model.n_heads} heads)")
        by_layer: dict[int, list[int]] = {}
        for layer, head in sorted(self.heads):
            by_layer.setdefault(layer, []).append(head)
        if self.from_position:
            return [(f"blocks.{layer}.attn.hook_attn_scores", self._scores_hook(heads))
                    for layer, heads in by_layer.items()]
        hooks = []
        for layer, heads in by_layer.items():
            names = [f"blocks.{layer}.attn.{h}" for h in ("hook_rot_q", "hook_q")]
            name = next((n for n in names if n in model.hook_dict), None)
            if name is None:
                raise ValueError(f"MaskHeadQueries: {model.model_name} ({model.describe()}) offers no queries to zero "
                                 f"in layer {layer} (neither {names[0]} nor {names[1]})")

            def zero(q, hook, heads=heads):
                keep = q.new_ones(q.shape[-2])
                keep[heads] = 0
                return q * keep[:, None]

            hooks.append((name, zero))
        return hooks

    def _scores_hook(self, heads):
        import torch

        from interp.attention import current_query_rows

        def flatten(scores, hook):
            if current_query_rows() is not None:
                raise ValueError("MaskHeadQueries with from_position edits every query row from there on; it cannot "
                                 "run inside model.query_rows (the rows not listed come from a fused kernel that never "
                                 "sees it)")
            n_q, n_k = scores.shape[-2:]
            rows = torch.arange(n_k - n_q, n_k, device=scores.device) >= self.from_position  # cached keys come first
            if not bool(rows.any()):
                return scores
            idx = torch.tensor(heads, device=scores.device)
            part = scores[:, idx][:, :, rows]
            visible = part > torch.finfo(part.dtype).min / 2
            edited = scores[:, idx]
            edited[:, :, rows] = torch.where(visible, torch.zeros_like(part), part)
            scores[:, idx] = edited
            return scores

        return flatten
