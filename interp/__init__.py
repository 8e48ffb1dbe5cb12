"""Hooked models with learned positions, their loaders and the capabilities analyses rely on.

    import interp
    model = interp.load("increments-per-layer")          # a name from `poslens models`, or a path
    logits, cache = model.run_with_cache(model.to_tokens("New York", doc_start=True))
"""

from interp.base import Capability, CapabilityError, InputError, PosLensModel, require
from interp.loading import CheckpointError, load, save
from interp.registry import entries as models

__all__ = ["Capability", "CapabilityError", "InputError", "PosLensModel", "require", "CheckpointError", "load", "save", "models"]
