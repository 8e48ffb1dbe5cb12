"""Load a state dict into a module with no silent drops: every key and shape must match."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from interp.loading.errors import CheckpointError, shape_str


def load_strict(
    module: nn.Module,
    state: Mapping[str, torch.Tensor],
    where: str,
    *,
    to_native: Callable[[str], str] = lambda k: k,
    to_file: Callable[[str], str] = lambda k: k,
    config_note: str = "",
) -> None:
    """Copy ``state`` (keys in the file's layout) into ``module``; raise naming every mismatch.

    ``to_native`` maps a file key to the module's key, ``to_file`` the reverse (for messages).
    """
    expected = module.state_dict()
    native = {}
    for key, value in state.items():
        nkey = to_native(key)
        if nkey in native:
            raise CheckpointError(f"{where}: keys map to the same parameter '{nkey}' twice (duplicate '{key}')")
        native[nkey] = (key, value)
    problems = []
    missing = [k for k in expected if k not in native]
    unexpected = [native[k][0] for k in native if k not in expected]
    for k in missing[:8]:
        problems.append(f"missing key '{to_file(k)}' (expected shape {shape_str(expected[k].shape)})")
    if len(missing) > 8:
        problems.append(f"... and {len(missing) - 8} more missing keys")
    for k in unexpected[:8]:
        problems.append(f"unexpected key '{k}' (shape {shape_str(state[k].shape)})")
    if len(unexpected) > 8:
        problems.append(f"... and {len(unexpected) - 8} more unexpected keys")
    for nkey, (fkey, value) in native.items():
        if nkey in expected and tuple(value.shape) != tuple(expected[nkey].shape):
            problems.append(
                f"key '{fkey}': expected shape {shape_str(expected[nkey].shape)}{config_note}, "
                f"found {shape_str(value.shape)}"
            )
    if problems:
        raise CheckpointError(f"{where}: checkpoint does not match the model:\n  " + "\n  ".join(problems))
    for nkey, (_fkey, value) in native.items():
        if not torch.is_tensor(value):
            raise CheckpointError(f"{where}: key '{_fkey}' holds a {type(value).__name__}, not a tensor")
    with torch.no_grad():
        module.load_state_dict({k: v for k, (_, v) in native.items()}, strict=True)
