"""Hook tables: the standard block hooks are declared once on the base, every family is in the README generator,
and every hook's documented shape has the real rank with tokens on the axes it names."""

import ast
from pathlib import Path

import pytest
import torch

from interp.base import BLOCK_HOOKS, HookDoc, PosLensModel
from interp.hook_docs import families
from tests.encoder_helpers import token_ids, tiny_encoder
from tests.helpers import tiny_model
from tests.repo_helpers import tiny_repo

MODELS = Path(__file__).resolve().parents[3] / "interp" / "models"


def _family_classes_in_source() -> set[str]:
    """Classes in interp/models/*.py that subclass PosLensModel (read from the source, not imported)."""
    out = set()
    for file in MODELS.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "PosLensModel" for b in node.bases):
                out.add(node.name)
    return out


def test_the_readme_generator_finds_every_family():
    found = {c.__name__ for c in families()}
    assert found == _family_classes_in_source() and len(found) >= 5
    assert len({c.family for c in families()}) == len(found)


def test_a_new_family_is_picked_up_without_being_listed(monkeypatch):
    import interp.models.llama as module

    class Forgotten(PosLensModel):
        family = "forgotten"
        HOOKS = (HookDoc("hook_x", "[batch, pos, d_model]", "x"),)

    monkeypatch.setattr(Forgotten, "__module__", module.__name__)
    assert Forgotten in families()
    assert [h.pattern for h in Forgotten.hook_table()].count("blocks.{l}.hook_resid_post") == 1


def test_block_hooks_are_declared_once_and_families_only_add_their_own():
    standard = {h.pattern: h for h in BLOCK_HOOKS}
    for cls in families():
        table = cls.hook_table()
        assert len({h.pattern for h in table}) == len(table), cls.family
        assert set(standard) - set(cls.ABSENT_HOOKS) <= {h.pattern for h in table}, cls.family
        assert not set(cls.ABSENT_HOOKS) & {h.pattern for h in table}, cls.family
        for own in cls.HOOKS:  # a family re-declares a standard hook only to say more than the standard does
            assert own != standard.get(own.pattern), (cls.family, own.pattern)


def test_token_axes_come_from_the_documented_shape():
    assert HookDoc("a", "[batch, pos, d_model]", "").token_axes() == (1,)
    assert HookDoc("a", "[batch, head, q, k]", "").token_axes() == (2, 3)
    doc = HookDoc("a", "[batch, pos] or [batch, head, pos]", "")
    assert doc.token_axes(2) == (1,) and doc.token_axes(3) == (2,)
    with pytest.raises(ValueError, match="not 4-dimensional"):
        doc.token_axes(4)


def _tiny(kind):
    if kind == "encoder-dstg":
        model = tiny_encoder("disentangled")
        return model, token_ids(model, batch=2, n=7)
    if kind == "encoder-rope":
        model = tiny_encoder("rope")
        return model, token_ids(model, batch=2, n=7)
    if kind == "llama":
        from interp.models.llama import LlamaConfig, LlamaTransformer

        return LlamaTransformer(LlamaConfig(32, 48, 2, 4, 2, 97, 64, 10000.0, 1e-6, True)).eval(), torch.randint(0, 97, (2, 7))
    if kind == "bert":
        from interp.models.bert import BertConfig, BertEncoder

        return BertEncoder(BertConfig(32, 2, 4, 48, 97, 40)).eval(), torch.randint(1, 97, (2, 7))
    model = tiny_repo("repo") if kind == "repo" else tiny_model("per-layer-per-head", decay="alibi")
    return model, torch.randint(0, 257, (2, 7))


@pytest.mark.parametrize("kind", ["increments", "repo", "encoder-dstg", "encoder-rope", "llama", "bert"])
def test_every_hook_has_its_documented_rank_and_token_axes(kind):
    model, ids = _tiny(kind)
    _, cache = model.run_with_cache(ids)
    assert model.undocumented_hooks() == []
    for name, t in cache.items():
        axes = model.token_axes(name, t.dim())
        assert axes, name
        assert all(t.shape[a] == ids.shape[1] for a in axes), (name, tuple(t.shape))
        assert t.shape[0] == ids.shape[0], name
