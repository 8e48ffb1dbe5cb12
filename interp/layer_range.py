"""TransformerLens' ``start_at_layer`` / ``stop_at_layer`` and generation from embeddings inside a family's forward.

``running(model, start, stop, residual, embeds)`` sets, for one forward pass of ``model``, the blocks that run
(``blocks[start:stop]``), the residual entering block ``start`` (the embedding stage is then skipped: its hooks do not
fire) and the token embeddings to use instead of the token-embedding table's rows (TransformerLens' ``generate`` from a
float ``[batch, pos, d_model]`` input). A family's forward reads it through ``PosLensModel.tl_token_rows``,
``tl_embedded``, ``tl_blocks`` and ``tl_final``; a pass stopped before the final norm ends with ``Stopped`` carrying
the residual, which ``model(...)`` returns.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

from torch import Tensor


@dataclasses.dataclass(frozen=True)
class LayerRange:
    model: object
    start: int = 0
    stop: int | None = None
    residual: Tensor | None = None
    embeds: Tensor | None = None


class Stopped(Exception):
    """The forward pass reached ``stop_at_layer``: ``residual`` is the residual entering that block."""

    def __init__(self, residual: Tensor):
        super().__init__("stop_at_layer")
        self.residual = residual


_RANGE: contextvars.ContextVar[LayerRange | None] = contextvars.ContextVar("poslens_layer_range", default=None)


@contextlib.contextmanager
def running(model, start: int = 0, stop: int | None = None, residual: Tensor | None = None,
            embeds: Tensor | None = None):
    token = _RANGE.set(LayerRange(model, start, stop, residual, embeds))
    try:
        yield
    finally:
        _RANGE.reset(token)


def current(model) -> LayerRange | None:
    """The range set for ``model``'s forward pass (None: all blocks, from the tokens)."""
    r = _RANGE.get()
    return r if r is not None and r.model is model else None


def skipping_embeddings() -> bool:
    """Whether the pass running starts from a given residual (the embedding stage's hooks stay silent)."""
    r = _RANGE.get()
    return r is not None and r.residual is not None
