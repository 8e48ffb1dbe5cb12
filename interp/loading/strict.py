"""No silent drops: every key and every shape of a checkpoint must match the model it is loaded into."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from interp.loading.errors import CheckpointError, shape_str


def verify(
    expected: Mapping[str, tuple],
    found: Mapping[str, tuple],
    where: str,
    *,
    to_native: Callable[[str], str] = lambda k: k,
    to_file: Callable[[str], str] = lambda k: k,
    config_note: str = "",
) -> dict[str, str]:
    """Compare shapes by key (``found`` in the file's layout); raise naming every mismatch.

    Returns the map native key -> file key.
    """
    native: dict[str, str] = {}
    for key in found:
        nkey = to_native(key)
        if nkey in native:
            raise CheckpointError(f"{where}: keys '{native[nkey]}' and '{key}' map to the same parameter '{nkey}'")
        native[nkey] = key
    problems = []
    missing = [k for k in expected if k not in native]
    unexpected = [native[k] for k in native if k not in expected]
    for k in missing[:8]:
        problems.append(f"missing key '{to_file(k)}' (expected shape {shape_str(expected[k])})")
    if len(missing) > 8:
        problems.append(f"... and {len(missing) - 8} more missing keys")
    for k in unexpected[:8]:
        problems.append(f"unexpected key '{k}' (shape {shape_str(found[k])})")
    if len(unexpected) > 8:
        problems.append(f"... and {len(unexpected) - 8} more unexpected keys")
    for nkey, fkey in native.items():
        if nkey in expected and tuple(found[fkey]) != tuple(expected[nkey]):
            problems.append(f"key '{fkey}': expected shape {shape_str(expected[nkey])}{config_note}, "
                            f"found {shape_str(found[fkey])}")
    if problems:
        raise CheckpointError(f"{where}: checkpoint does not match the model:\n  " + "\n  ".join(problems))
    return native


def load_strict(module: nn.Module, state: Mapping[str, torch.Tensor], where: str, **maps) -> None:
    """Copy ``state`` (keys in the file's layout) into ``module`` after ``verify``."""
    for key, value in state.items():
        if not torch.is_tensor(value):
            raise CheckpointError(f"{where}: key '{key}' holds a {type(value).__name__}, not a tensor")
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    native = verify(expected, {k: tuple(v.shape) for k, v in state.items()}, where, **maps)
    with torch.no_grad():
        module.load_state_dict({n: state[f] for n, f in native.items()}, strict=True)
