"""Adding an intervention is one module and one line: a toy intervention written in a temporary module, registered
with ``@register`` and named in ``interp.interventions.MODULES``, is found by name, edits the forward pass as a
planted edit of the weights does, and is recorded in the model's provenance."""

import sys
import textwrap

import pytest
import torch

from interp import interventions
from tests.repo_helpers import tiny_repo

MODULE = textwrap.dedent('''
    """A toy intervention: the token embeddings multiplied by ``factor`` before the first block."""
    import dataclasses

    from interp.interventions import Intervention, register


    @register
    @dataclasses.dataclass(frozen=True)
    class ScaleEmbeddings(Intervention):
        factor: float
        name = "scale-embeddings"

        def fwd_hooks(self, model):
            return [("hook_embed", lambda x, hook: x * self.factor)]
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "toy_intervention.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(interventions, "MODULES", interventions.MODULES + ("toy_intervention",))  # the one line
    yield
    interventions.REGISTRY.pop("scale-embeddings", None)
    sys.modules.pop("toy_intervention", None)


def test_an_intervention_from_a_temporary_module_is_found_applied_and_recorded(plugin):
    from poslens.provenance import model_record

    assert "scale-embeddings" not in interventions.REGISTRY  # nothing imported it yet: the MODULES line does
    ScaleEmbeddings = interventions.get("scale-embeddings")
    assert list(interventions.registered())[-1] == "scale-embeddings" and ScaleEmbeddings.__module__ == "toy_intervention"

    model = tiny_repo("repo")
    ids = torch.randint(0, 257, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        with interventions.applied(model, ScaleEmbeddings(3.0)):
            edited = model(ids)
        plain = model(ids)
        model.embed_tokens.weight.mul_(3.0)  # the planted edit: the same scaling, in the weights
        torch.testing.assert_close(edited, model(ids))
    assert not torch.allclose(edited, plain, atol=1e-4)
    assert model_record(model)["interventions"] == [{"intervention": "scale-embeddings", "factor": 3.0}]
    with pytest.raises(KeyError, match=r"unknown intervention 'scale-embedding' \(known: .*scale-embeddings"):
        interventions.get("scale-embedding")
