"""Weights with NaN or infinity are named and refused at load time, unless the caller allows them.

A single NaN weight turns every downstream number into NaN (or, worse, into a plausible-looking number after
some ``nan_to_num``). ``check_finite`` lists each non-finite tensor with its NaN / inf counts, raises
``CheckpointError`` unless ``allow``, and otherwise warns and returns the names (recorded in ``model.source``).
``check_forward`` refuses a model whose forward pass gives non-finite outputs in the half-precision dtype it was loaded
in (Gemma 3's activations overflow float16's range where a document starts: transformers' own float16 forward of it is
NaN there too).
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


@torch.no_grad()
def check_forward(model, where: str) -> None:
    """Refuse a model whose forward pass gives NaN or infinity (finite weights, so the dtype's range: activations past
    float16's 65,504), naming the dtype and what to load instead. Probes: tokens 1..4 (Gemma's end and start of
    document among them) and, with a tokenizer, a short text after the start-of-document token (Gemma 3 in float16
    overflows only where a document starts, as transformers' own float16 forward does)."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    probes = [torch.arange(1, 5, device=model.device)[None] % model.d_vocab]
    if getattr(model, "tokenizer", None) is not None:
        try:
            probes.append(model.to_tokens("The history of Paris", prepend_bos=True)[:, :8].to(model.device))
        except Exception:  # noqa: BLE001 (a tokenizer that cannot say it: the other probe stands)
            pass
    for tokens in probes:
        out = model(tokens)
        out = out[0] if isinstance(out, tuple) else out
        if not bool(torch.isfinite(out).all()):
            name = str(dtype).removeprefix("torch.")
            instead = ("bfloat16 (float32's range at half the memory) or float32" if dtype == torch.float16
                       else "float32")
            raise CheckpointError(f"{where}: in {name} its forward pass gives non-finite outputs on "
                                  f"{tokens.shape[-1]} tokens ({tokens[0].tolist()}; activations beyond {name}'s "
                                  f"range of {torch.finfo(dtype).max:.6g}, with finite weights); load it in {instead}, "
                                  "or pass allow_nonfinite=True to load it anyway")
