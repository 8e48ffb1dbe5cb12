"""One attention call and its dispatch through the table of backends (``interp.attention.backends.BACKENDS``), the
way transformers looks up ``ALL_ATTENTION_FUNCTIONS``: the first backend whose ``serves(call)`` holds runs it."""

from __future__ import annotations

import contextlib
import math
from contextvars import ContextVar
from dataclasses import dataclass, replace

from torch import Tensor

from interp.attention.context import current_key_windows, hooked
from interp.attention.mask import Mask
from interp.attention.request import StatisticsRequest, current_statistics


@dataclass(frozen=True)
class AttentionCall:
    """Everything one attention asks for: ``q [batch, head, n_q, d]``, ``k, v [batch, kv_head, n_k, d(_v)]`` (grouped
    key heads), the ``Mask``, the ``scale``, Gemma 2's logit ``softcap``, given full ``scores`` (replacing ``q . k *
    scale``), the hook points, the attention's ``name`` (its ``hook_pattern`` name) and the ``statistics`` request
    in force for it."""

    q: Tensor
    k: Tensor
    v: Tensor
    mask: Mask
    scale: float
    softcap: float | None = None
    scores: Tensor | None = None
    hook_scores: object = None
    hook_pattern: object = None
    name: str | None = None
    statistics: StatisticsRequest | None = None

    @property
    def hooked(self) -> bool:
        return hooked(self.hook_scores) or hooked(self.hook_pattern)

    @property
    def causal(self) -> bool:
        return self.mask.causal

    @property
    def bias(self) -> Tensor | None:
        return self.mask.bias

    def folded(self) -> AttentionCall:
        """The call with its key windows folded into the mask's ``bias``."""
        return self if not self.mask.windows else replace(self, mask=self.mask.folded(self.q.device))


_RECORDING: ContextVar = ContextVar("interp_attention_recording", default=None)


@contextlib.contextmanager
def recording_calls(on_call):
    """Inside the block, ``on_call(call)`` for every ``AttentionCall`` that ``attend`` dispatches, before a backend
    runs it: the queries and keys as the family handed them (after rotation, learned positions, norms), the ``Mask``
    (causal, bias, key windows, cache offset; the windows as ``(window, sinks)`` conditions, not folded), the scale,
    soft-cap, given scores, hooks and name (``call.folded()`` gives the windows as a materialised mask). A
    ``ContextVar``: read once per call, nothing done when unset; nested blocks replace the outer callback."""
    token = _RECORDING.set(on_call)
    try:
        yield
    finally:
        _RECORDING.reset(token)


def dispatch(call: AttentionCall) -> Tensor:
    """Run ``call`` through the first backend of ``BACKENDS`` that serves it. A backend that does not read key windows
    itself (``reads_windows``) sees them folded into the mask."""
    from interp.attention.backends import BACKENDS

    folded = None
    for backend in BACKENDS.values():
        if not backend.reads_windows:
            folded = folded or call.folded()
        chosen = call if backend.reads_windows else folded
        if backend.serves(chosen):
            return backend(chosen)
    raise RuntimeError("no attention backend serves this call (the table should end with one that serves any)")


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    bias: Tensor | None = None,
    hook_scores=None,
    hook_pattern=None,
    scale: float | None = None,
    softcap: float | None = None,
    scores: Tensor | None = None,
) -> Tensor:
    """Attention output ``[batch, head, q_pos, d_v]`` from ``q, k [batch, head, pos, d]`` and ``v``; ``k`` and ``v``
    may have fewer heads (grouped-query attention: key head j serves query heads j*rep .. j*rep+rep-1). Every family
    attends through this function, so hooks, ``query_rows``, ``key_window``, ``collecting_spans`` and
    ``collecting_statistics`` hold for all of them.

    ``bias`` is an additive ``[batch or 1, head or 1, q_pos, k_pos]`` term (ALiBi, relative bias, a cache's mask) or a
    boolean mask (True: visible, as transformers' sdpa masks); masked entries are ``-inf`` in the scores handed to
    ``hook_scores`` and 0 in the pattern. ``softcap`` is Gemma 2's tanh logit cap. ``scores``, when given, are the
    full scaled logits (a model that sums hooked logit components) and replace ``q . k * scale``; ``q`` and ``k`` then
    only give shapes. The call is an ``AttentionCall`` run by the first backend of ``BACKENDS`` that serves it.
    """
    name = getattr(hook_pattern, "name", None) if hook_pattern is not None else None
    mask = Mask(causal, q.shape[-2], k.shape[-2], bias, current_key_windows(name))
    call = AttentionCall(q, k, v, mask, scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]), softcap, scores,
                         hook_scores, hook_pattern, name, current_statistics(name) if name else None)
    on_call = _RECORDING.get()
    if on_call is not None:
        on_call(call)
    return dispatch(call)
