"""Padded batches, as TransformerLens runs them: texts of different lengths padded to one (``padding_side`` "right" or
"left") and an ``attention_mask`` ``[batch, pos]`` (1: a real token, 0: padding) that every family's attention honours,
so each row's outputs are those of its text run alone.

``padded(mask)`` sets the mask for a forward pass; ``interp.attention.attend`` (through which every family attends)
hides the padding keys from every query (a padding query sees the keys its mask would let it see, so no row of the
pattern is empty). A padding token takes no place: every family's positions read ``position_ids`` (each row's real
tokens at 0, 1, ..., as TransformerLens' ``get_offset_position_ids``, so a zero inside a row renumbers the tokens after
it, learned, rotary, ALiBi and relative-bias positions alike), and what accumulates along the sequence (learned
increments, forget-gate decays) skips the padding (``real_tokens``). A row with an interior zero thus gives what the row
without that token gives. Inside ``interp.attention.decoding`` the mask covers the cached tokens and the new ones
(``[batch, past + new]``).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import Tensor

_PADDING: contextvars.ContextVar[Tensor | None] = contextvars.ContextVar("poslens_padding", default=None)


def check_mask(mask, tokens: Tensor, cached: int = 0) -> Tensor:
    """``mask`` as a boolean ``[batch, cached + pos]`` tensor of ``tokens``' shape, checked (0/1 values, every row with
    a real token); a clear error naming the shapes otherwise."""
    mask = torch.as_tensor(mask, device=tokens.device)
    mask = mask[None] if mask.dim() == 1 else mask
    want = (tokens.shape[0], cached + tokens.shape[1])
    if tuple(mask.shape) != want:
        raise ValueError(f"attention_mask of shape {tuple(mask.shape)} for tokens of shape {tuple(tokens.shape)}"
                         + (f" after {cached} cached tokens" if cached else "") + f": it must be {list(want)}")
    if mask.dtype != torch.bool:
        if mask.is_floating_point() or not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("attention_mask takes 0 (padding) and 1 (a real token), or booleans")
        mask = mask.bool()
    if not bool(mask.any(-1).all()):
        raise ValueError(f"attention_mask rows {(~mask.any(-1)).nonzero().flatten().tolist()} have no real token")
    return mask


@contextlib.contextmanager
def padded(mask: Tensor | None):
    """Inside, forward passes treat the positions where ``mask`` (boolean ``[batch, pos]``) is False as padding. None,
    or a mask without padding, changes nothing."""
    token = _PADDING.set(None if mask is None or bool(mask.all()) else mask)
    try:
        yield
    finally:
        _PADDING.reset(token)


def current_padding() -> Tensor | None:
    """The boolean ``[batch, pos]`` mask of the forward pass running (None: no padding)."""
    return _PADDING.get()


def position_ids(n: int, device=None) -> Tensor | None:
    """Each row's positions ``[batch, n]`` of the last ``n`` tokens, counting real tokens only (a padding token takes
    the position of the real token before it, or 0), or None without padding."""
    mask = _PADDING.get()
    if mask is None:
        return None
    return counted(mask)[:, -n:].to(device if device is not None else mask.device)


def counted(mask: Tensor) -> Tensor:
    """Each row's positions under the boolean ``mask`` ``[batch, pos]``: its real tokens at 0, 1, ... (a padding token
    at the position of the real token before it, or 0): TransformerLens' ``get_offset_position_ids``."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def positions(n: int, start: int = 0, device=None) -> Tensor:
    """The integer positions ``[batch or 1, n]`` of the last ``n`` tokens: ``start..start+n-1``, or in a padded batch
    each row's (``position_ids``)."""
    padded = position_ids(n, device)
    return torch.arange(start, start + n, device=device)[None] if padded is None else padded


def real_tokens(n: int, device=None) -> Tensor | None:
    """Boolean ``[batch, n]`` of the last ``n`` tokens, True where real, or None without padding."""
    mask = _PADDING.get()
    return None if mask is None else mask[:, -n:].to(device if device is not None else mask.device)


def with_padding(bias: Tensor | None, n_q: int, n_k: int, device) -> Tensor | None:
    """``bias`` (None, boolean or additive ``[batch or 1, head or 1, q or 1, >= n_k]``) with the padding keys hidden
    from every real query; a padding query keeps every key (no empty softmax row)."""
    mask = _PADDING.get()
    if mask is None:
        return bias
    if mask.shape[-1] != n_k:
        raise ValueError(f"attention_mask covers {mask.shape[-1]} positions, the attention {n_k} keys")
    mask = mask.to(device)
    visible = mask[:, None, None, :] | ~mask[:, None, -n_q:, None]  # [batch, 1, q, k]
    if bias is None:
        return visible
    b = bias[..., :n_k]
    return b & visible if b.dtype == torch.bool else torch.where(visible, b, torch.tensor(float("-inf"), dtype=b.dtype,
                                                                                          device=b.device))


def mask_from_pads(tokens: Tensor, pad_id: int, side: str, bos_is_pad: bool = False) -> Tensor:
    """The boolean ``[batch, pos]`` mask TransformerLens reads off padded tokens (``utils.get_attention_mask``): on
    ``side`` "right" the trailing pad ids are padding, on "left" the leading ones (a pad id elsewhere is a real
    token); with ``bos_is_pad`` (BOS prepended and BOS's id is the pad id) the last leading pad of each row is its BOS,
    a real token."""
    if side not in ("right", "left"):
        raise ValueError(f"padding_side={side!r} is not 'right' or 'left'")
    real = tokens != int(pad_id)
    if side == "right":
        return real.flip(-1).long().cumsum(-1).flip(-1) > 0
    pad = real.long().cumsum(-1) == 0
    if bos_is_pad:
        pad[torch.arange(len(pad), device=pad.device), pad.sum(-1) - 1] = False
    return ~pad


def pad_rows(rows: list[list[int]], pad_id: int, side: str) -> tuple[Tensor, Tensor]:
    """Token rows of different lengths as ``([batch, longest] tokens, [batch, longest] boolean mask)``, padded on
    ``side`` ("right" or "left") with ``pad_id``."""
    if side not in ("right", "left"):
        raise ValueError(f"padding_side={side!r} is not 'right' or 'left'")
    width = max((len(r) for r in rows), default=0)
    tokens = torch.full((len(rows), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        span = slice(0, len(r)) if side == "right" else slice(width - len(r), width)
        tokens[i, span] = torch.tensor(r, dtype=torch.long)
        mask[i, span] = True
    return tokens, mask
