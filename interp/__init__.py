"""Hooked models with learned positions, their loaders and the capabilities analyses rely on.

    import interp
    model = interp.load("increments-per-layer")          # a name from `poslens models`, or a path
    logits, cache = model.run_with_cache(model.to_tokens("New York", doc_start=True))

Names are imported on first use, so ``import interp.registry`` (``poslens models``) stays free of torch.
"""

import importlib

_WHERE = {"Capability": "interp.capabilities", "CapabilityError": "interp.capabilities", "InputError": "interp.base",
          "PosLensModel": "interp.base", "require": "interp.base", "CheckpointError": "interp.loading",
          "load": "interp.loading", "save": "interp.loading"}

__all__ = [*_WHERE, "models"]


def __getattr__(name):
    if name == "models":
        from interp.registry import entries

        return entries
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")
