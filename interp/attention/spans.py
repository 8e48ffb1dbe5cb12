"""Attention mass of a few query rows on labelled parts of the keys: the ``span_mass`` statistic of those rows, kept
under the names the analyses use (``collecting_spans``, ``span_masses``, ``model_span_masses``)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.attention.call import AttentionCall
from interp.attention.dispatch import dispatch
from interp.attention.mask import Mask
from interp.attention.request import StatisticsRequest, collecting_statistics, model_statistics


@dataclass
class SpanRequest:
    """What ``collecting_spans`` yields: the ``span_mass`` statistic of its rows, in the order asked for."""

    rows: Tensor  # query positions, as asked for (repeats and order kept)
    key_parts: Tensor  # [k_pos] integer label per key
    n_parts: int
    stop_after: str | None = None
    statistics: StatisticsRequest | None = None  # the statistics request that records them

    @property
    def masses(self) -> dict[str, Tensor]:
        """hook_pattern name -> ``[batch, head, rows, n_parts]``."""
        order = torch.searchsorted(self.statistics.rows, self.rows)
        return {name: got["span_mass"].index_select(2, order) for name, got in self.statistics.results.items()}


@contextlib.contextmanager
def collecting_spans(rows, key_parts, n_parts: int, *, stop_after: str | None = None):
    """Record each attention's mass of these query rows on each key part; yields the ``SpanRequest``
    whose ``masses`` fill in during the forward pass. Pattern hooks, if any, see these rows only (sorted, once each).
    The ``span_mass`` statistic of ``collecting_statistics``, kept under this name."""
    request = SpanRequest(torch.as_tensor(rows, dtype=torch.long).flatten(),
                          torch.as_tensor(key_parts, dtype=torch.long).flatten(), int(n_parts), stop_after)
    if request.rows.numel() == 0:
        raise ValueError("collecting_spans needs at least one query position")
    with collecting_statistics(("span_mass",), key_parts=request.key_parts, n_parts=request.n_parts, rows=request.rows,
                               stop_after=stop_after) as statistics:
        request.statistics = statistics
        yield request


def span_masses(q: Tensor, k: Tensor, key_parts: Tensor, n_parts: int, *, scale: float | None = None,
                causal: bool = True, bias: Tensor | None = None, rows: Tensor | None = None) -> Tensor:
    """Attention mass of query rows on each key part, ``[batch, head, rows, n_parts]``, without the pattern.

    ``q [batch, head, q_pos, d]``, ``k [batch, kv_head, k_pos, d]`` (``kv_head`` divides ``head``: grouped
    query heads share a key head), ``key_parts [k_pos]`` integer labels, ``rows`` indices into ``q_pos``
    (all when None). Causal queries are the last ``q_pos`` of the ``k_pos`` positions (a KV cache);
    ``bias`` is added to the scores as in ``attend``. The ``span_mass`` statistic of ``StatisticsRequest``: the part
    indicators as values of a fused kernel, no pattern row built.
    """
    h, d = q.shape[1], q.shape[-1]
    kv, n_k = k.shape[1], k.shape[2]
    if h % kv:
        raise ValueError(f"span_masses: {h} query heads cannot share {kv} key heads")
    if key_parts.shape != (n_k,):
        raise ValueError(f"span_masses: key_parts has shape {tuple(key_parts.shape)}, expected ({n_k},) for {n_k} keys")
    given = None if rows is None else torch.as_tensor(rows, dtype=torch.long).flatten()
    request = StatisticsRequest(("span_mass",), key_parts=key_parts, n_parts=n_parts, rows=given)
    q, k = q.float(), k.float()
    dispatch(AttentionCall(q, k, k, Mask(causal, q.shape[-2], k.shape[-2], bias),
                           scale=scale if scale is not None else 1.0 / math.sqrt(d), softcap=None, scores=None,
                           name="span_masses", statistics=request))
    got = request.results["span_masses"]["span_mass"]
    if given is not None:
        got = got.index_select(2, torch.searchsorted(request.rows, given))
    return got.to(q.device)


@torch.no_grad()
def model_span_masses(model, tokens: Tensor, rows, key_parts, n_parts: int) -> Tensor:
    """``[layer, batch, head, rows, n_parts]``: every layer's attention mass of these query rows on each key
    part, for any model with ``blocks.{l}.attn.hook_pattern``: ``model_statistics``' ``span_mass`` of these rows, in the
    order asked for. The forward pass stops after the last layer's attention."""
    given = torch.as_tensor(rows, dtype=torch.long).flatten()
    got = model_statistics(model, tokens, ("span_mass",), key_parts=key_parts, n_parts=n_parts, rows=given)["span_mass"]
    return got.index_select(3, torch.searchsorted(torch.unique(given), given))
