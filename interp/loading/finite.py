"""Weights with NaN or infinity are named and refused at load time, unless the caller allows them.

A single NaN weight turns every downstream number into NaN (or, worse, into a plausible-looking number after
some ``nan_to_num``). ``check_finite`` lists each non-finite tensor with its NaN / inf counts, raises
``CheckpointError`` unless ``allow``, and otherwise warns and returns the names (recorded in ``model.source``).
"""

from __future__ import annotations

import warnings

import torch

from interp.loading.errors import CheckpointError


def nonfinite_tensors(state_or_model) -> dict[str, tuple[int, int, int]]:
    """``{name: (n_nan, n_inf, numel)}`` for every floating tensor with a non-finite entry."""
    if isinstance(state_or_model, torch.nn.Module):
        items = list(state_or_model.named_parameters()) + list(state_or_model.named_buffers())
    else:
        items = list(state_or_model.items())
    out = {}
    for name, t in items:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not _finite(t):
            out[name] = (int(torch.isnan(t).sum()), int(torch.isinf(t).sum()), t.numel())
    return out


def _finite(t: torch.Tensor) -> bool:
    """Whether every entry is finite. A finite sum proves it in one pass without a mask as large as the tensor (NaN and
    inf propagate through a sum); a sum that overflows (or holds NaN) is looked at entry by entry."""
    total = t.detach().sum()
    return bool(torch.isfinite(total)) or bool(torch.isfinite(t).all())


def check_finite(state_or_model, where: str, allow: bool = False) -> list[str]:
    """Refuse (or, with ``allow``, warn about) non-finite weights; returns the names of the tensors concerned."""
    bad = nonfinite_tensors(state_or_model)
    if not bad:
        return []
    listed = ", ".join(f"{n} ({nan} NaN, {inf} inf of {numel})" for n, (nan, inf, numel) in list(bad.items())[:8])
    more = f" and {len(bad) - 8} more" if len(bad) > 8 else ""
    message = f"{where}: non-finite weights in {len(bad)} tensor(s): {listed}{more}"
    if not allow:
        raise CheckpointError(message + "; pass allow_nonfinite=True to load them anyway")
    warnings.warn(message + " (loaded because allow_nonfinite=True)", stacklevel=3)
    return list(bad)
