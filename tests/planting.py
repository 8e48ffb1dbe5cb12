"""Hooks that overwrite a model's increments with values the test chose (planted ground truth)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def planted_increments(model, hook_name: str, plant):
    """While active, ``hook_name`` carries ``plant(ids_row) -> [pos] tensor`` for every batch row.

    ``ids_row`` is the row's token ids with right padding removed (padding id 0 never occurs in text).
    """
    seen = {}
    handle = model.register_forward_pre_hook(lambda mod, args: seen.__setitem__("ids", args[0]))

    def overwrite(t, hook):
        ids = torch.as_tensor(seen["ids"])
        out = torch.ones_like(t)
        for row in range(ids.shape[0]):
            tokens = ids[row].tolist()
            while tokens and tokens[-1] == 0:
                tokens.pop()
            values = torch.as_tensor(plant(tokens), dtype=t.dtype)
            out[row, ..., : len(values)] = values
        return out

    model.add_hook(hook_name, overwrite)
    try:
        yield
    finally:
        handle.remove()
        model.reset_hooks()
