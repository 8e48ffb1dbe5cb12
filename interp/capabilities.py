"""The capabilities analyses ask a model for (the promises are listed in ``interp.base``), and the one way a model
without one is refused. Light on purpose: the command line reads analyses' needs without importing torch."""

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
    """A model lacks what an analysis, an intervention or a method needs."""


def missing(model, lacking: str, needed_by: str, kind: str = "analysis") -> CapabilityError:
    """The refusal of ``model`` for lacking ``lacking`` (a capability's description, or a property no capability
    names, such as a byte-level tokenizer), in the one format every refusal uses:
    ``analysis 'sink-rate' needs a model with attention patterns; 'm' (description) has none``."""
    name = getattr(model, "model_name", type(model).__name__)
    describe = model.describe() if hasattr(model, "describe") else type(model).__name__
    return CapabilityError(f"{kind} '{needed_by}' needs a model with {lacking}; '{name}' ({describe}) has none")


def require(model, capability: Capability, needed_by: str, *, kind: str = "analysis") -> None:
    """Refuse a model without ``capability`` (``missing``'s ``CapabilityError``), naming what needs it: ``kind`` is
    analysis (``needed_by`` its name), intervention (its class name) or method."""
    if capability not in getattr(model, "capabilities", frozenset()):
        raise missing(model, capability.value, needed_by, kind)
