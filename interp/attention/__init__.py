"""The one attention every family runs through (``attend``), with hookable scores and pattern that cost nothing unless
used, and per-head statistics of every query row in the memory of a forward pass.

``attend(q, k, v, causal=, bias=, hook_scores=, hook_pattern=, scale=, softcap=, scores=)`` (``dispatch``) builds one
``AttentionCall`` (``call``: the inputs, one ``Mask`` that knows causal, bias, key windows and the cache offset, the
hooks, the statistics request, the query rows hooks see: everything a backend reads) and runs it through the first
backend of the table ``backends.BACKENDS`` that serves it: the key window, the materialised (hooked) pattern, the
statistics on the CPU flash or CUDA kernels' log-sum-exp, the chunked statistics, plain
``scaled_dot_product_attention``. Each backend declares the whole condition it serves; ``explain(call)`` says which
runs a call and why the others do not. Without hooks no ``[q, k]`` matrix is built.

What a forward pass asks of every attention is set by context managers (``context``), read once per attention into
its call:

- ``query_rows(idx)``: hooks see ``[batch, head, len(idx), key_pos]`` rows only; the output of those rows is recomputed
  from the (possibly edited) pattern rows and every other row comes from the fused kernel.
- ``collecting_statistics(wanted, ...)`` (``request``): each attention records, under its ``hook_pattern`` name, the
  statistics of ``STATISTICS`` (declared once each in ``statistics``) for **every** query row, exact over every key, as
  float32 whatever the model's dtype; ``model_statistics`` runs it over a model and stops after the last attention (no
  logits). Masses on the first keys, the token itself, the previous one, a window and labelled key parts ride the
  forward's own kernel (``backends.lse``: each row's log-sum-exp and a band of keys, or value columns; no ``[q, k]``
  block); entropy, distances, far mass and the top key take chunks of rows sized to the device (``backends.chunked``).
  Every argument is checked before any work. Peers read a few rows (the research code of retrieval heads, SnapKV) or
  hold every ``[head, N, N]`` pattern (transformers' ``output_attentions``, TransformerLens).
- ``key_window(names, window, sinks)``: StreamingLLM's window with sinks (``interventions.KeyWindow``), attended one
  chunk of query rows at a time on that chunk's keys (``backends.key_window``); with hooks or statistics the window
  joins the mask.
- ``decoding(cache)``: each attention module that supports it appends its new tokens' keys and values to a ``KVCache``
  and attends from the new tokens only (``cache.visible``'s mask where it gives one).
- ``collecting_spans(rows, key_parts, n_parts)`` (``spans``): the ``span_mass`` statistic of those rows, as are
  ``span_masses`` and ``model_span_masses``. ``stop_after`` ends the forward pass (``StopForward``) once that hook name
  is recorded.
- ``recording_calls(on_call)``: ``on_call(call)`` for every ``AttentionCall`` ``attend`` dispatches (its queries, keys,
  ``Mask``, scale, soft-cap as the family built them); the viewer's live mode records one pass and computes clicked
  rows from it, the exactness bench builds its float64 references from it.
"""

from __future__ import annotations

import torch.nn.functional as F  # noqa: F401  (tests spy on F.scaled_dot_product_attention through this name)

from interp.attention.backends import BACKENDS, register
from interp.attention.budget import CHUNK_BYTES, CHUNK_ROWS, MASK_ROWS, chunk_budget, rows_per_chunk
from interp.attention.call import AttentionCall
from interp.attention.context import (
    KVCache,
    StopForward,
    current_key_windows,
    current_kv_cache,
    current_query_rows,
    decoding,
    hooked,
    key_window,
    query_rows,
)
from interp.attention.dispatch import attend, choose, dispatch, explain, recording_calls
from interp.attention.mask import Mask, causal_mask, grouped_matmul, logits
from interp.attention.mask import key_spans as _key_spans
from interp.attention.request import (
    StatisticsRequest,
    collecting_statistics,
    current_statistics,
    forward_statistics,
    model_statistics,
)
from interp.attention.spans import SpanRequest, collecting_spans, model_span_masses, span_masses
from interp.attention.statistics import DECLARED, FIRST_GATHERED, STATISTICS, Statistic, part_indicators, reference

__all__ = [
    "AttentionCall", "BACKENDS", "CHUNK_BYTES", "CHUNK_ROWS", "DECLARED", "FIRST_GATHERED", "KVCache", "MASK_ROWS",
    "Mask", "STATISTICS", "SpanRequest", "Statistic", "StatisticsRequest", "StopForward", "attend", "causal_mask",
    "choose", "chunk_budget", "collecting_spans", "collecting_statistics", "current_key_windows",
    "current_kv_cache", "current_query_rows", "current_statistics", "decoding", "dispatch", "explain",
    "forward_statistics", "grouped_matmul", "hooked", "key_window", "logits", "model_span_masses",
    "model_statistics", "part_indicators", "query_rows", "recording_calls", "reference", "register",
    "rows_per_chunk", "span_masses", "_key_spans",
]
