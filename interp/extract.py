"""Streaming extraction of hook activations over many sequences.

``stream(model, sequences, names)`` runs the model batch by batch and yields, per sequence, a dict of
the requested hooks trimmed to that sequence's length, on the CPU (``to=None`` keeps them in float32 on the
model's device, for reductions that run there, e.g. on a GPU). Only one batch of activations exists at a
time, so memory does not grow with the number of sequences.

Each forward pass stops as soon as every requested hook has fired (every family fires each hook once per
pass): reading residual streams never runs the layers above the last one asked for, nor the unembedding.

Causal models take sequences of different lengths in one batch: right padding cannot change what a
position sees. Bidirectional models are run one length at a time (no padding ever enters attention).

``moments(model, sequences, names)`` reduces ``[batch, pos, d]`` hooks to their float64 token count, sum and
Gram matrix ``X^T X`` (what means, covariances, PCA and linear probes need) as each hook fires: no
activation outlives its layer, and each batch adds its tokens' products to the upper triangle of the Gram
matrix in a few block products (about half the work of ``x.T @ x``), mirrored in place once at the end.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.attention import StopForward
from interp.capabilities import Capability
from interp.tl import HookNameError


def _trim(model, name: str, t: Tensor, n: int) -> Tensor:
    """Cut every token axis (read off the hook's documented shape; a pattern's key axis too) to ``n``."""
    for ax in model.token_axes(name, t.dim()):
        t = t.narrow(ax, 0, n)
    return t




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
                            "(model.hook_table() lists every hook this model has, with its shape and meaning)")


@torch.no_grad()
def run_and_collect(model, tokens: Tensor, names: Sequence[str], *,
                    to: str | torch.device | None = "cpu") -> dict[str, Tensor]:
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
        raise HookNameError(f"{model.model_name}: hook {silent[0]!r} exists but does not run in this model's forward "
                            f"pass{hint}")
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
    for groups in _chunks(model, sequences, batch_size):
        out = []
        for group in groups:
            acts = run_and_collect(model, _padded(group, model.device)[0], names, to=to)
            for row, (index, seq) in enumerate(group):
                out.append((index, {n: _trim(model, n, acts[n][row : row + 1], len(seq))[0] for n in names}))
        out.sort(key=lambda item: item[0])
        yield from out


def _chunks(model, sequences: Iterable[Sequence[int]],
            batch_size: int) -> Iterator[list[list[tuple[int, Sequence[int]]]]]:
    """``batch_size`` sequences at a time as ``(index, sequence)`` pairs, in the groups run as one batch: all of
    them for causal models (right padding cannot change what a position sees), one length per group otherwise."""
    causal = Capability.CAUSAL_LM in model.capabilities
    buffer: list[tuple[int, Sequence[int]]] = []
    for index, seq in enumerate(sequences):
        buffer.append((index, seq))
        if len(buffer) == batch_size:
            yield [buffer] if causal else _same_length_groups(buffer)
            buffer = []
    if buffer:
        yield [buffer] if causal else _same_length_groups(buffer)


def _padded(group, device) -> tuple[Tensor, Tensor | None]:
    """Right-padded token ids ``[batch, longest]`` and the mask of real tokens (None when none is padding)."""
    lengths = [len(s) for _, s in group]
    longest = max(lengths)
    tokens = torch.zeros((len(group), longest), dtype=torch.long)
    for row, (_, seq) in enumerate(group):
        tokens[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    if min(lengths) == longest:
        return tokens.to(device), None
    real = torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]
    return tokens.to(device), real.to(device)


@dataclass
class Moments:
    """Sums over the tokens of one hook's vectors x (its last axis), in float64: ``n`` tokens, ``sum`` of x
    ``[d]`` and ``gram``, the sum of x x^T ``[d, d]``."""

    n: int
    sum: Tensor
    gram: Tensor

    def mean(self) -> Tensor:
        return self.sum / self.n

    def covariance(self) -> Tensor:
        """The population covariance ``gram / n - mean mean^T``."""
        m = self.mean()
        return self.gram / self.n - torch.outer(m, m)


@torch.no_grad()
def moments(model, sequences: Iterable[Sequence[int]], names: Sequence[str], *,
            batch_size: int = 8) -> dict[str, Moments]:
    """``{hook: Moments}`` over every token of every sequence (padding excluded) for hooks shaped
    ``[batch, pos, d]`` (residual streams, attention and MLP outputs); results on the CPU."""
    check_hook_names(model, names)
    names = list(dict.fromkeys(names))
    for name in names:
        dims = model.hook_doc(name).dims()
        if len(dims) != 3 or model.token_axes(name) != (1,):
            raise ValueError(f"moments reduces hooks shaped [batch, pos, d]; {name} is {model.hook_doc(name).shape}")
    acc: dict[str, Moments] = {}
    real: list[Tensor | None] = [None]
    fired: set[str] = set()

    def reduce(t, hook):
        x = t.detach()
        x = (x.reshape(-1, x.shape[-1]) if real[0] is None else x[real[0]]).to(torch.float64)
        m = acc.get(hook.name)
        if m is None:
            d = x.shape[-1]
            m = acc[hook.name] = Moments(0, x.new_zeros(d), x.new_zeros(d, d))
        m.n += x.shape[0]
        m.sum += x.sum(0)
        _add_upper_gram(m.gram, x)
        fired.add(hook.name)
        if len(fired) == len(names):
            raise StopForward(hook.name)

    with model.hooks(fwd_hooks=[(n, reduce) for n in names]):
        for groups in _chunks(model, sequences, batch_size):
            for group in groups:
                tokens, real[0] = _padded(group, model.device)
                fired.clear()
                try:
                    model(tokens)
                except StopForward:
                    pass
                if len(fired) < len(names):
                    silent = next(n for n in names if n not in fired)
                    raise HookNameError(f"{model.model_name}: hook {silent!r} exists but does not run in this model's "
                                        "forward pass")
    if not acc:
        raise ValueError("moments got no sequences")
    return {n: Moments(acc[n].n, acc[n].sum.cpu(), _symmetric(acc[n].gram).cpu()) for n in names}


GRAM_BLOCK = 128


def _add_upper_gram(gram: Tensor, x: Tensor) -> None:
    """Add x^T x to the block rows of ``gram`` on and above the diagonal: each block row of columns is one
    product with the columns from its own on, about half the multiply-adds of the full product."""
    d = x.shape[1]
    for a in range(0, d, GRAM_BLOCK):
        gram[a : a + GRAM_BLOCK, a:].addmm_(x[:, a : a + GRAM_BLOCK].T, x[:, a:])


def _symmetric(gram: Tensor) -> Tensor:
    """Fill, in place, the blocks below the diagonal blocks that ``_add_upper_gram`` left out."""
    for a in range(0, gram.shape[0], GRAM_BLOCK):
        gram[a + GRAM_BLOCK :, a : a + GRAM_BLOCK] = gram[a : a + GRAM_BLOCK, a + GRAM_BLOCK :].T
    return gram


def _same_length_groups(items):
    groups: dict[int, list] = {}
    for item in items:
        groups.setdefault(len(item[1]), []).append(item)
    return list(groups.values())
