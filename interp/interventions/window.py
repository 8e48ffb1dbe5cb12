"""Window attention with attention sinks (Xiao et al., ICLR 2024, "Efficient Streaming Language Models with Attention
Sinks", StreamingLLM): each query sees only the keys less than ``window`` tokens away and the first ``sinks`` tokens.

Applied (``interventions.applied``), the window is a condition of ``interp.attention.attend`` (``key_window``) on every
chosen layer: each chunk of query rows attends to the keys it may see only (the sinks and the window's span), so no
``[query, key]`` mask is built and the window runs at any length in the memory of one chunk; hooks, statistics and
``query_rows`` see the windowed scores; every family attends through ``attend``, so the window serves them all.
``fwd_hooks`` (for ``run_with_hooks``) masks each layer's materialised ``hook_attn_scores`` instead, which holds a
``[query, key]`` matrix and cannot run inside ``query_rows``. Both give the same output.

Every layer reads through the window, as a rolling KV cache of that size would have it; unlike StreamingLLM's cache,
tokens keep their own positions (a sink at token 0 is ``q`` tokens back, not ``window``), which changes nothing for
rotary models within their trained length. A causal model looks back ``window - 1`` tokens; a bidirectional one as far
both ways.
"""

from __future__ import annotations

import dataclasses

from interp.capabilities import Capability, require
from interp.interventions import Intervention, as_tuple, layers_of, register


@register
@dataclasses.dataclass(frozen=True)
class KeyWindow(Intervention):
    """Each query sees only the keys less than ``window`` tokens away and the first ``sinks`` tokens (StreamingLLM's
    window attention with attention sinks); applied, the attention reads each chunk of query rows against its window's
    keys only, so it runs at any length."""

    window: int  # keys a query sees behind it (itself included); both ways in a bidirectional model
    sinks: int = 0  # the first tokens every query sees as well
    layers: tuple | None = None  # None: every layer
    name = "key-window"
    needs = (Capability.ATTENTION,)
    example = dict(window=8, sinks=1)

    def __post_init__(self):
        object.__setattr__(self, "layers", as_tuple(self.layers))
        if int(self.window) < 1 or int(self.sinks) < 0:
            raise ValueError(f"KeyWindow: window={self.window} must be at least 1 and sinks={self.sinks} at least 0")

    def condition(self, model):
        """``attend``'s chunked key window on the chosen layers (every family attends through ``attend``)."""
        from interp.attention import key_window

        require(model, Capability.ATTENTION, "KeyWindow", kind="intervention")
        layers = layers_of(model, self.layers, "KeyWindow")
        return key_window([f"blocks.{layer}.attn.hook_pattern" for layer in layers], self.window, self.sinks)

    def fwd_hooks(self, model):
        import torch

        from interp.attention import current_query_rows

        require(model, Capability.ATTENTION, "KeyWindow", kind="intervention")
        causal = Capability.CAUSAL_LM in model.capabilities

        def mask(scores, hook):
            if current_query_rows() is not None:
                raise ValueError("KeyWindow's hooks edit every query row; they cannot run inside model.query_rows "
                                 "(the rows not listed come from a fused kernel that never sees the window): apply it "
                                 "with interventions.applied, whose window attend applies to every row")
            n_q, n_k = scores.shape[-2:]
            # with a KV cache the queries are the last keys
            q = torch.arange(n_k - n_q, n_k, device=scores.device)[:, None]
            k = torch.arange(n_k, device=scores.device)[None, :]
            far = (q - k >= self.window) if causal else ((q - k).abs() >= self.window)
            return scores.masked_fill(far & (k >= self.sinks), float("-inf"))

        return [(f"blocks.{layer}.attn.hook_attn_scores", mask) for layer in layers_of(model, self.layers, "KeyWindow")]
