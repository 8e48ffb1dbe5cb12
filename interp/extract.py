"""Streaming extraction of hook activations over many sequences.

``stream(model, sequences, names)`` runs the model batch by batch and yields, per sequence, a dict of
the requested hooks trimmed to that sequence's length, on the CPU (``to=None`` keeps them in float32 on the
model's device, for reductions that run there, e.g. on a GPU). Only one batch of activations exists at a
time, so memory does not grow with the number of sequences.

Each forward pass stops as soon as every requested hook has fired (every family fires each hook once per
pass): reading residual streams never runs the layers above the last one asked for, nor the unembedding.

Causal models take sequences of different lengths in one batch: right padding cannot change what a
position sees. Bidirectional models are run one length at a time (no padding ever enters attention).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence

import torch
from torch import Tensor

from interp.attention import StopForward
from interp.base import Capability

def _trim(model, name: str, t: Tensor, n: int) -> Tensor:
    """Cut every token axis (read off the hook's documented shape; a pattern's key axis too) to ``n``."""
    for ax in model.token_axes(name, t.dim()):
        t = t.narrow(ax, 0, n)
    return t


class HookNameError(KeyError):
    """A hook name the model does not have; the message lists the closest names it does have."""

    def __str__(self) -> str:
        return str(self.args[0])


def check_hook_names(model, names: Sequence[str]) -> None:
    if isinstance(names, str):
        raise TypeError(f"hook names must be a list of names, got the string {names!r} (write [{names!r}])")
    for name in names:
        if name in model.hook_dict:
            continue
        leaf = name.rsplit(".", 1)[-1]
        close = [n for n in model.hook_dict if n.endswith("." + leaf) or n == leaf]
        close = close or difflib.get_close_matches(name, list(model.hook_dict), n=5, cutoff=0.6)
        hint = f"; did you mean {', '.join(close[:6])}{' ...' if len(close) > 6 else ''}?" if close else ""
        raise HookNameError(f"{getattr(model, 'model_name', type(model).__name__)} has no hook {name!r}{hint} "
                            "(model.hook_dict lists every hook; the HOOKS table documents them)")


@torch.no_grad()
def run_and_collect(model, tokens: Tensor, names: Sequence[str], *, to: str | torch.device | None = "cpu") -> dict[str, Tensor]:
    """One forward pass, stopped once the named hooks have fired; their activations (after any hooks
    already attached, which see the same values) in float32, on ``to`` (``None``: where the model ran)."""
    check_hook_names(model, names)
    wanted, acts = set(names), {}

    def keep(t, hook):
        acts[hook.name] = t.detach()
        if len(acts) == len(wanted):
            raise StopForward(hook.name)

    with model.hooks(fwd_hooks=[(n, keep) for n in wanted]):
        try:
            model(tokens)
        except StopForward:
            pass
    silent = [n for n in names if n not in acts]
    if silent:
        leaf = silent[0].rsplit(".", 1)[-1]
        ran = [n for n in model.hook_dict if n.endswith("." + leaf) and n not in silent]
        hint = f" (this model computes it at {', '.join(ran[:6])}{' ...' if len(ran) > 6 else ''})" if ran else ""
        raise HookNameError(f"{model.model_name}: hook {silent[0]!r} exists but does not run in this model's forward pass{hint}")
    return {n: acts[n].to(device=to if to is not None else acts[n].device, dtype=torch.float32) for n in names}


@torch.no_grad()
def stream(
    model,
    sequences: Iterable[Sequence[int]],
    names: Sequence[str],
    *,
    batch_size: int = 8,
    to: str | torch.device | None = "cpu",
) -> Iterator[tuple[int, dict[str, Tensor]]]:
    """Yield ``(index, {hook: tensor without the batch axis})`` for each sequence, in order, on ``to``."""
    causal = Capability.CAUSAL_LM in model.capabilities
    buffer: list[tuple[int, Sequence[int]]] = []

    def flush():
        groups = [buffer] if causal else _same_length_groups(buffer)
        out = []
        for group in groups:
            longest = max(len(s) for _, s in group)
            tokens = torch.zeros((len(group), longest), dtype=torch.long)
            for row, (_, seq) in enumerate(group):
                tokens[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
            acts = run_and_collect(model, tokens.to(model.device), names, to=to)
            for row, (index, seq) in enumerate(group):
                out.append((index, {n: _trim(model, n, acts[n][row : row + 1], len(seq))[0] for n in names}))
        out.sort(key=lambda item: item[0])
        return out

    for index, seq in enumerate(sequences):
        buffer.append((index, seq))
        if len(buffer) == batch_size:
            yield from flush()
            buffer = []
    if buffer:
        yield from flush()


def _same_length_groups(items):
    groups: dict[int, list] = {}
    for item in items:
        groups.setdefault(len(item[1]), []).append(item)
    return list(groups.values())
