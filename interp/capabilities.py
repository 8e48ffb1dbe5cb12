"""The capabilities analyses ask a model for (the promises are listed in ``interp.base``). Light on purpose:
the command line reads analyses' needs without importing torch."""

import enum


class Capability(str, enum.Enum):
    INCREMENTS = "learned increments"
    POSITIONS = "per-head positions"
    ROTARY = "rotary positions"
    ATTENTION = "attention patterns"
    HIDDEN_STATES = "hidden states"
    CAUSAL_LM = "next-token logits"
    MASKED_LM = "masked-token logits"
    AP_STREAM = "an absolute-position stream"
    LOGIT_COMPONENTS = "decomposable attention logits"


class CapabilityError(TypeError):
    """An analysis was given a model that lacks what it needs."""


def require(model, capability: Capability, analysis: str) -> None:
    """Refuse, naming the analysis (or method) and the model, a model without ``capability``."""
    if capability not in getattr(model, "capabilities", frozenset()):
        describe = model.describe() if hasattr(model, "describe") else type(model).__name__
        raise CapabilityError(f"analysis '{analysis}' needs a model with {capability.value}; "
                              f"'{getattr(model, 'model_name', type(model).__name__)}' ({describe}) has none")
