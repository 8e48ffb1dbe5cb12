"""A model without what something needs is refused one way: ``interp.capabilities.require`` (or ``missing`` for a
property no capability names), a ``CapabilityError`` whose message names what needs it, the capability and the
model, whether an analysis, an intervention or a model method asks."""

from __future__ import annotations

import re

import pytest

from interp import interventions
from interp.capabilities import Capability, CapabilityError, require


class Stub:
    """A model that has every capability but ``lacking`` (and a layer and two heads to name)."""

    model_name = "stub"
    n_layers, n_heads = 1, 2

    def __init__(self, lacking: Capability):
        self.capabilities = frozenset(Capability) - {lacking}

    def describe(self) -> str:
        return "a stub family"


def refusal(kind: str, needed_by: str, lacking: str, model: str = "stub", described: str = "a stub family") -> str:
    return re.escape(f"{kind} '{needed_by}' needs a model with {lacking}; '{model}' ({described}) has none")


def refusal_plan() -> list[tuple[interventions.Intervention, set]]:
    """Every registered intervention, built from its declared ``example``, with the capabilities it declares it
    ``needs``."""
    return [(cls(**cls.example), set(cls.needs)) for cls in interventions.registered().values()]


def check_refuses_exactly_what_it_needs(intervention, needed: set) -> None:
    name = type(intervention).__name__
    for capability in needed:
        with pytest.raises(CapabilityError, match=refusal("intervention", name, capability.value)):
            intervention.fwd_hooks(Stub(capability))
    for other in set(Capability) - needed:  # what it does not need is never what it refuses
        try:
            intervention.fwd_hooks(Stub(other))
        except CapabilityError as err:
            pytest.fail(f"{name} refused a model lacking only {other.value}: {err}")
        except (AttributeError, NotImplementedError, TypeError, ValueError):
            pass  # it went on to read the stub's weights: past the capability check


@pytest.mark.parametrize("intervention,needed", refusal_plan(),
                         ids=lambda v: v.name if isinstance(v, interventions.Intervention) else "")
def test_an_intervention_refuses_a_model_without_exactly_the_capabilities_it_declares(intervention, needed):
    check_refuses_exactly_what_it_needs(intervention, needed)


def test_the_refusal_plan_is_the_registry_and_a_wrong_declaration_fails_it():
    plan = refusal_plan()
    assert [iv.name for iv, _ in plan] == list(interventions.registered())
    assert dict((iv.name, needed)
                for iv, needed in plan)["unrotate-rotary-bands"] == {Capability.POSITIONS, Capability.ROTARY}
    window = interventions.KeyWindow(window=4)
    with pytest.raises(pytest.fail.Exception, match="KeyWindow refused a model lacking only attention patterns"):
        check_refuses_exactly_what_it_needs(window, set())  # a declaration that left out what it refuses
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        check_refuses_exactly_what_it_needs(window, {Capability.ATTENTION, Capability.ROTARY})  # one it never refuses


def test_an_analysis_refuses_through_its_declared_needs():
    from analyses import get

    analysis = get("rope-frequencies")
    assert Capability.ROTARY in analysis.needs
    with pytest.raises(CapabilityError, match=refusal("analysis", "rope-frequencies", Capability.ROTARY.value)):
        analysis.function(Stub(Capability.ROTARY))


def test_a_model_method_refuses_the_same_way():
    from tests.helpers import tiny_model

    model = tiny_model("per-layer", max_seq_len=64)
    model.capabilities = model.capabilities - {Capability.CAUSAL_LM}
    with pytest.raises(CapabilityError, match=refusal("method", "generate", Capability.CAUSAL_LM.value,
                                                      "tiny-per-layer", model.describe())):
        model.generate([[1, 2, 3]], 2)


def test_a_byte_analysis_refuses_increments_and_a_tokenizer_that_is_not_bytes_alike():
    from analyses.increment_hooks import byte_model
    from analyses.word_boundaries import word_boundaries
    from tests.helpers import tiny_model

    with pytest.raises(CapabilityError, match=refusal("analysis", "word-boundaries", Capability.INCREMENTS.value)):
        byte_model(Stub(Capability.INCREMENTS), "word-boundaries")
    model = tiny_model("per-layer", max_seq_len=64)
    byte_model(model, "word-boundaries")  # increments and bytes: nothing raised
    model.tokenizer = object()
    with pytest.raises(CapabilityError, match=refusal("analysis", "word-boundaries", "a byte-level tokenizer (UTF-8 "
                                                      "bytes as tokens)", "tiny-per-layer", model.describe())):
        word_boundaries(model, length=32)


def test_require_passes_a_model_with_the_capability_and_reads_any_model():
    require(Stub(Capability.ROTARY), Capability.ATTENTION, "x")
    with pytest.raises(CapabilityError, match=re.escape("analysis 'x' needs a model with attention patterns; 'object' "
                                                        "(object) has none")):
        require(object(), Capability.ATTENTION, "x")
