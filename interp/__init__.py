"""Hooked models with learned positions, their loaders and the capabilities analyses rely on.

    import interp
    model = interp.load("increments-per-layer")          # a name from `poslens models`, a path or a hub id
    logits, cache = model.run_with_cache(model.to_tokens("New York", prepend_bos=True))

Names are imported on first use, so ``import interp.catalog`` (the models loadable by name, ``poslens models``)
stays free of torch.
"""

import importlib

_EXPORTS = {
    "Capability": "interp.capabilities", "CapabilityError": "interp.capabilities", "InputError": "interp.base",
    "PosLensModel": "interp.base",
    "require": "interp.capabilities", "CheckpointError": "interp.loading.errors", "load": "interp.loading",
    "save": "interp.loading", "load_tokenizer": "interp.loading", "attach_tokenizer": "interp.loading",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'interp' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    value = getattr(module, name)
    globals()[name] = value
    return value
