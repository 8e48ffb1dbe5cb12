"""What each intervention declares beside itself (``interp.interventions``): a docstring, ``needs`` and an ``example``,
checked by ``register`` when its module is imported; the example of every registered one is a whole description of
itself, as provenance stores it (its record, read back, builds the same edit)."""

import dataclasses
import json

import pytest

from interp import interventions
from interp.capabilities import Capability
from interp.interventions import Intervention, register


def check_record_is_the_whole_edit(cls) -> None:
    edit = cls(**cls.example)
    record = json.loads(json.dumps(edit.record()))  # as the provenance file holds it
    assert record.pop("intervention") == cls.name
    assert set(record) == {f.name for f in dataclasses.fields(cls)}
    assert cls(**record) == edit, f"{cls.__name__}: its record does not build the same edit"


@pytest.mark.parametrize("cls", list(interventions.registered().values()), ids=lambda c: c.name)
def test_every_registered_intervention_records_itself_whole(cls):
    check_record_is_the_whole_edit(cls)


def test_a_record_that_loses_a_field_is_caught():
    @dataclasses.dataclass(frozen=True)
    class Forgetful(Intervention):
        """Records its window but not its sinks."""
        window: int
        sinks: int = 0
        name = "forgetful"
        example = dict(window=4, sinks=2)

        def record(self):
            return {"intervention": self.name, "window": self.window}

    with pytest.raises(AssertionError):
        check_record_is_the_whole_edit(Forgetful)


def _declared(**attributes):
    namespace = {"__annotations__": {"factor": "float"}, "factor": 1.0, "name": "toy-scale", **attributes}
    return dataclasses.dataclass(frozen=True)(type("ToyScale", (Intervention,), namespace))


@pytest.mark.parametrize("attributes,message", [
    (dict(needs=(), example=dict(factor=2.0)), r"intervention ToyScale \('toy-scale'\) needs a docstring"),
    (dict(__doc__="Scales.", needs=()), r"\('toy-scale'\) needs an example: a dict of the keyword arguments of a small "
                                        r"instance \(fields: factor\), got None"),
    (dict(__doc__="Scales.", example=dict(scale=2.0)), r"its example \{'scale': 2.0\} does not build one: .*'scale'"),
    (dict(__doc__="Scales.", needs=("rotary positions",), example={}), r"needs must be a tuple of "
                                                                       r"interp.capabilities.Capability"),
    (dict(__doc__="Scales.", needs=Capability.ROTARY, example={}), r"needs must be a tuple"),
])
def test_register_refuses_a_missing_or_wrong_declaration_naming_the_intervention(attributes, message):
    with pytest.raises((TypeError, ValueError), match=message):
        register(_declared(**attributes))
    assert "toy-scale" not in interventions.REGISTRY


def test_register_takes_a_whole_declaration():
    cls = _declared(__doc__="Scales.", needs=(Capability.HIDDEN_STATES,), example=dict(factor=2.0))
    try:
        assert register(cls) is cls and interventions.get("toy-scale") is cls
        check_record_is_the_whole_edit(cls)
    finally:
        interventions.REGISTRY.pop("toy-scale", None)
