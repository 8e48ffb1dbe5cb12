"""Relative-position logit terms, beside ``interp.rope``: T5 bucketed bias and learned [CLS]/[SEP] logits.

``t5_buckets`` is T5's bidirectional bucketing of ``key - query``; ``RelativePositionBias`` holds one learned
value per bucket and head (buckets in the persistent buffer ``bucket_indices``, as the development DSTG code
saves them); ``SpecialTokenThetas`` holds per-head logits for the rows and columns of [CLS] (index 0) and
[SEP] (index n-1) of unpadded sequences; ``rp_logits`` combines them into one ``[head, q, k]`` term.

In the encoder family, T5 bidirectional buckets of ``key - query``
(32 buckets, max distance 128: 16 per direction, 8 of them exact) index ``relative_pos_bias.relative_attention_bias``
``[buckets, H]``; the buckets live in the persistent buffer ``relative_pos_bias.bucket_indices``. Sequences are
unpadded, so [CLS] is index 0 and [SEP] index n-1. With ``untie_cls`` the logits of the [CLS]/[SEP] rows and columns
take learned per-head values ``cls_sep_override.thetas`` ``[4, H]`` (rows: CLS row, SEP row, CLS column, SEP column;
where a special row meets a special column the column wins).

The development code writes these thetas *over the AP logits* of those rows and columns, the bucketed bias
being 0 there. The paper instead counts them as the RP bias of special tokens and has no AP term for them.
The total logit is the same either way; the *decomposition* here follows the paper: ``hook_logits_rp``
carries the thetas at special rows/columns (the bucketed bias elsewhere) and ``hook_logits_ap`` is 0 there.
The semantic logit is never overwritten. ``rp_at_special=True`` also adds the bucketed bias at special
rows/columns (what one snapshot of the development code does); it is off by default, as the paper says.
Without thetas the bucketed bias covers every row and column, unless ``rp_skip_special=True``: the transformers
fork's ``RelativePositionBucketedBias`` zeroes it on the [CLS]/[SEP] rows and columns, thetas or not (its loader
sets the flag for configs without thetas). The RP bias and thetas are one module shared by all layers
(``rp_per_layer=False``, how the reference lists them) or one per layer (``rp_per_layer=True``, how the development
code builds them inside each block).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def t5_buckets(relative_position: Tensor, num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """T5's bidirectional bucket of ``relative_position = key - query``.

    Half the buckets per direction (keys after the query take the upper half); within a direction the first
    half of the buckets are exact distances, the rest log-spaced up to ``max_distance`` (farther: last bucket).
    """
    half = num_buckets // 2
    exact = half // 2
    direction = (relative_position > 0).long() * half
    dist = relative_position.abs()
    far = exact + (torch.log(dist.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                   * (half - exact)).long()
    return direction + torch.where(dist < exact, dist, far.clamp(max=half - 1))


def special_mask(n: int, device=None, ends: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """``[n, n]`` bool, True on the rows and columns of [CLS] (index 0) and [SEP] (index n-1); with ``ends`` (each
    row's [CLS] and [SEP] index ``[batch]``, a padded batch: ``special_ends``) ``[batch, n, n]``."""
    if ends is not None:
        edge = special_edges(n, ends)
        return edge[:, :, None] | edge[:, None, :]
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    mask[0, :] = mask[n - 1, :] = True
    mask[:, 0] = mask[:, n - 1] = True
    return mask


def special_ends(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's [CLS] and [SEP] index in a padded batch (``mask`` ``[batch, n]``, True on real tokens): its first
    and last real token."""
    n = mask.shape[-1]
    first = mask.long().argmax(-1)
    return first, n - 1 - mask.flip(-1).long().argmax(-1)


def special_edges(n: int, ends: tuple[Tensor, Tensor]) -> Tensor:
    """``[batch, n]`` bool, True at each row's [CLS] and [SEP] index."""
    first, last = ends
    at = torch.arange(n, device=first.device)[None]
    return (at == first[:, None]) | (at == last[:, None])


class RelativePositionBias(nn.Module):
    """T5 bucketed bias, per head, for queries and keys at 0..n-1."""

    def __init__(self, n_heads: int, max_length: int, num_buckets: int, max_distance: int):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.relative_attention_bias = nn.Parameter(torch.zeros(num_buckets, n_heads))
        pos = torch.arange(max_length)
        self.register_buffer("bucket_indices", t5_buckets(pos[None, :] - pos[:, None], num_buckets, max_distance),
                             persistent=True)

    def forward(self, n: int, positions: Tensor | None = None) -> Tensor:
        """``[head, q, k]`` bias of the bucket of ``k - q``; with ``positions`` (``[batch, n]``, a padded batch's real
        tokens counted from 0 in each row) ``[batch, head, q, k]`` of the bucket of ``positions[k] - positions[q]``."""
        if positions is None:
            return self.relative_attention_bias[self.bucket_indices[:n, :n]].permute(2, 0, 1)
        positions = positions.to(self.bucket_indices.device)
        buckets = self.bucket_indices[positions[:, :, None], positions[:, None, :]]  # [batch, q, k]
        return self.relative_attention_bias[buckets].permute(0, 3, 1, 2)


class SpecialTokenThetas(nn.Module):
    """Per-head logits of the [CLS]/[SEP] rows and columns, ``thetas`` rows in ``THETA_ROWS`` order."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.thetas = nn.Parameter(torch.zeros(4, n_heads))

    def forward(self, n: int, ends: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """``[head, q, k]``: theta on special rows / columns (columns written last, so they win), 0 elsewhere; with
        ``ends`` (each row's [CLS] and [SEP] index) ``[batch, head, q, k]``."""
        if ends is not None:
            at = torch.arange(n, device=self.thetas.device)
            first, last = (e.to(at.device)[:, None, None, None] for e in ends)
            rows, cols = at[None, None, :, None], at[None, None, None, :]
            t = self.thetas[:, None, :, None, None]  # [4, 1, head, 1, 1]
            out = self.thetas.new_zeros(len(first), self.thetas.shape[1], n, n)
            for which, hit in enumerate((rows == first, rows == last, cols == first, cols == last)):
                out = torch.where(hit, t[which], out)
            return out
        out = self.thetas.new_zeros(self.thetas.shape[1], n, n)
        out[:, 0, :] = self.thetas[0][:, None]
        out[:, n - 1, :] = self.thetas[1][:, None]
        out[:, :, 0] = self.thetas[2][:, None]
        out[:, :, n - 1] = self.thetas[3][:, None]
        return out


def rp_logits(n: int, n_heads: int, bias: RelativePositionBias | None, thetas: SpecialTokenThetas | None, *,
              add_bias_at_special: bool, skip_special: bool = False, device=None,
              ends: tuple[Tensor, Tensor] | None = None, positions: Tensor | None = None) -> Tensor:
    """``[head, q, k]``: the bucketed bias, with the thetas on the special rows / columns (replacing the bias
    there unless ``add_bias_at_special``); without thetas, 0 there when ``skip_special``. With ``ends`` (each row's
    [CLS] and [SEP] index in a padded batch) and ``positions`` (its real tokens counted from 0 in each row)
    ``[batch, head, q, k]``: the bias reads the distance in ``positions``, and the special rows / columns are each
    row's own."""
    out = bias(n, positions) if bias is not None else torch.zeros(n_heads, n, n, device=device)
    mask = special_mask(n, device, ends)
    mask = mask[:, None] if ends is not None else mask
    if thetas is not None:
        base = out if add_bias_at_special else torch.zeros_like(out)
        out = torch.where(mask, base + thetas(n, ends), out)
    elif skip_special:
        out = torch.where(mask, torch.zeros((), dtype=out.dtype, device=out.device), out)
    return out
