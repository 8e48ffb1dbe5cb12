"""One attention call: everything a backend reads, explicit (``interp.attention.dispatch`` builds it in ``attend`` from
the family's tensors and what the context managers asked for, and runs it through the table of backends)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor

from interp.attention.context import hooked
from interp.attention.mask import Mask
from interp.attention.request import StatisticsRequest


@dataclass(frozen=True)
class AttentionCall:
    """Everything one attention asks for: ``q [batch, head, n_q, d]``, ``k, v [batch, kv_head, n_k, d(_v)]`` (grouped
    key heads), the ``Mask`` (causal, bias, key windows, cache offset), the ``scale``, Gemma 2's logit ``softcap``,
    given full ``scores`` (replacing ``q . k * scale``), the hook points, the attention's ``name`` (its
    ``hook_pattern`` name), the ``statistics`` request in force for it and the query ``rows`` hooks see (None: all).
    No backend reads anything else."""

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
    rows: Tensor | None = None

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
