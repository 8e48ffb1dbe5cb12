"""Running attention: ``attend`` builds one ``AttentionCall`` (the family's tensors, and what the context managers asked
of this attention: its key windows, its statistics request, the query rows hooks see) and ``dispatch`` runs it through
the first backend of the table (``backends.BACKENDS``) that serves it, as transformers looks up
``ALL_ATTENTION_FUNCTIONS``.

Each backend declares the whole condition it serves (``conditions``: named tests of the call), so the table's order only
breaks ties; ``explain(call)`` says which backend runs a call and, for each one before it, the condition it lacks.
``recording_calls(on_call)`` hands every dispatched call to an observer (the viewer's live mode, the exactness bench).
"""

from __future__ import annotations

import contextlib
import math
from contextvars import ContextVar

from torch import Tensor

from interp.attention import backends
from interp.attention.call import AttentionCall
from interp.attention.context import current_key_windows, current_query_rows
from interp.attention.mask import Mask
from interp.attention.request import current_statistics
from interp.padding import with_padding

_RECORDING: ContextVar = ContextVar("interp_attention_recording", default=None)


@contextlib.contextmanager
def recording_calls(on_call):
    """Inside the block, ``on_call(call)`` for every ``AttentionCall`` that ``attend`` dispatches, before a backend
    runs it: the queries and keys as the family handed them (after rotation, learned positions, norms), the ``Mask``
    (causal, bias, key windows, cache offset; the windows as ``(window, sinks)`` conditions, not folded), the scale,
    soft-cap, given scores, hooks and name (``call.folded()`` gives the windows as a materialised mask). Nested blocks
    replace the outer callback."""
    token = _RECORDING.set(on_call)
    try:
        yield
    finally:
        _RECORDING.reset(token)


def _seen_by(backend, call: AttentionCall) -> AttentionCall:
    """The call as ``backend`` reads it: with its key windows, or folded into the mask for one that does not read
    them itself."""
    return call if backend.reads_windows else call.folded()


def unmet(backend, call: AttentionCall) -> str | None:
    """The first condition of ``backend`` that ``call`` does not meet (None: it serves the call)."""
    seen = _seen_by(backend, call)
    return next((what for what, test in backend.conditions() if not test(seen)), None)


def choose(call: AttentionCall):
    """The backend that runs ``call``: the first of ``backends.BACKENDS`` that serves it."""
    for backend in backends.BACKENDS.values():
        if unmet(backend, call) is None:
            return backend
    raise RuntimeError("no attention backend serves this call (the table should end with one that serves any)")


def explain(call: AttentionCall) -> str:
    """Which backend runs ``call`` and why: each backend before it with the condition it lacks, then the chosen one
    with the conditions it meets."""
    chosen = choose(call)
    lines = []
    for backend in backends.BACKENDS.values():
        if backend is chosen:
            met = "; ".join(what for what, _ in backend.conditions()) or "any call"
            return "\n".join(lines + [f"{backend.name}: runs it ({met})"])
        lines.append(f"{backend.name}: no, it needs {unmet(backend, call)}")
    raise AssertionError("unreachable")


def dispatch(call: AttentionCall) -> Tensor:
    """Run ``call`` through the backend that serves it (``choose``), which sees key windows folded into the mask
    unless it reads them itself."""
    backend = choose(call)
    return backend(_seen_by(backend, call))


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
    ``collecting_statistics`` hold for all of them, and so does a padded batch's mask (``interp.padding``).

    ``bias`` is an additive ``[batch or 1, head or 1, q_pos, k_pos]`` term (ALiBi, relative bias, a cache's mask) or a
    boolean mask (True: visible, as transformers' sdpa masks); masked entries are ``-inf`` in the scores handed to
    ``hook_scores`` and 0 in the pattern. ``softcap`` is Gemma 2's tanh logit cap. ``scores``, when given, are the
    full scaled logits (a model that sums hooked logit components) and replace ``q . k * scale``; ``q`` and ``k`` then
    only give shapes. What the context managers ask of this attention is read here, once, into the call.
    """
    name = getattr(hook_pattern, "name", None) if hook_pattern is not None else None
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = Mask(causal, n_q, n_k, with_padding(bias, n_q, n_k, q.device), current_key_windows(name))
    call = AttentionCall(q, k, v, mask, scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]), softcap, scores,
                         hook_scores, hook_pattern, name, current_statistics(name) if name else None,
                         current_query_rows())
    on_call = _RECORDING.get()
    if on_call is not None:
        on_call(call)
    return dispatch(call)
