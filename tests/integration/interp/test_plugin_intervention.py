"""Adding an intervention is one module and one line: a toy intervention written in a temporary module (its docstring,
``needs`` and ``example`` beside its fields), registered with ``@register`` and named in
``interp.interventions.MODULES``, is found by name, edits the forward pass as a planted edit of the weights does, is
recorded in the model's provenance, joins the README's intervention table and the tests that iterate the registry,
with no other file edited."""

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
        """The token embeddings multiplied by ``factor`` before the first block."""

        factor: float
        name = "scale-embeddings"
        example = dict(factor=3.0)

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
    from poslens.run.provenance import model_record

    assert "scale-embeddings" not in interventions.REGISTRY  # nothing imported it yet: the MODULES line does
    ScaleEmbeddings = interventions.get("scale-embeddings")
    assert list(interventions.registered())[-1] == "scale-embeddings" \
        and ScaleEmbeddings.__module__ == "toy_intervention"

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


def test_an_intervention_from_a_temporary_module_joins_the_readme_table_and_the_registry_tests(plugin, tmp_path):
    from interp import intervention_docs
    from poslens import readme as sections
    from tests.unit.interp.test_capabilities import check_refuses_exactly_what_it_needs, refusal_plan
    from tests.unit.interp.test_intervention_declarations import check_record_is_the_whole_edit

    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- interventions -->\nold\n<!-- /interventions -->\n<!-- hooks -->\nhooks\n"
                      "<!-- /hooks -->\n", encoding="utf-8")
    assert sections.write(readme, ["interventions"]) == ["interventions"]
    rows = sections.section(readme.read_text(encoding="utf-8"), "interventions").splitlines()
    assert rows[-1] == ("| `ScaleEmbeddings(factor)` | `scale-embeddings` | The token embeddings multiplied by "
                        "`factor` before the first block. | any model | `ScaleEmbeddings(factor=3.0)` |")
    assert rows[2:-1] == [intervention_docs.row(cls) for name, cls in interventions.REGISTRY.items()
                          if name != "scale-embeddings"]
    assert sections.section(readme.read_text(encoding="utf-8"), "hooks") == "hooks\n"  # the hooks' section untouched

    edit, needed = refusal_plan()[-1]
    assert (edit, needed) == (interventions.get("scale-embeddings")(3.0), set())
    check_refuses_exactly_what_it_needs(edit, needed)
    check_record_is_the_whole_edit(type(edit))
