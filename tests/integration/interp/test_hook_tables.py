"""Hooks are declared once, on the module classes that fire them: the hook points, the README's tables and the token
axes all come from those declarations, and every registered family's models are documented."""

import ast
from pathlib import Path

import pytest
import torch

from interp.base import PosLensModel
from interp.hook_docs import markdown, models
from interp.hooks import BlockHooks, Hook, HookDoc, declared

FAMILIES = Path(__file__).resolve().parents[3] / "interp" / "families"


def test_no_family_builds_a_hook_point_by_hand():
    """A ``HookPoint()`` written in a family would be a hook without a declaration: none is."""
    for file in FAMILIES.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "HookPoint":
                pytest.fail(f"{file.relative_to(FAMILIES)}:{node.lineno} builds a HookPoint; declare a Hook instead")


def test_every_model_class_of_the_registered_families_is_documented():
    import importlib
    import pkgutil

    import interp.families

    for info in pkgutil.walk_packages(interp.families.__path__, "interp.families."):
        importlib.import_module(info.name)
    classes, stack = set(), list(PosLensModel.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("interp.families.") and not cls.__subclasses__():
            classes.add(cls)
    documented = {type(m) for m in models()}
    assert classes == documented and len(documented) >= 6
    text = markdown()
    assert all(f"**{m.family}: {type(m).__name__}**" in text for m in models())
    for variant in ("disentangled", "ap", "rp", "rope"):  # one class whose variants differ in their hooks: a table each
        assert f"**encoder: EncoderModel** (`interp.families.encoder.model`, variant `{variant}`)" in text


def test_standard_block_hooks_are_declared_once_and_a_family_only_says_more():
    standard = declared(BlockHooks)
    assert set(standard) == {"hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post"}
    for model in models():
        table = model.hook_table()
        assert len({h.pattern for h in table}) == len(table), type(model).__name__
        for block in {type(b) for b in model.blocks}:
            for name, hook in declared(block).items():
                if name in standard and hook is not standard[name]:  # re-declared: only to say more than the standard
                    assert hook.meaning != standard[name].meaning and hook.shape == standard[name].shape, (block, name)


def test_a_declaration_makes_the_hook_point_and_its_table_row():
    from interp.hooks import hook_table, make_hook_points

    class Inner(BlockHooks):
        hook_extra = Hook("[batch, pos]", "an extra one", when=lambda m: m.wanted)

        def __init__(self, wanted):
            super().__init__()
            self.wanted = wanted

    class Outer(torch.nn.Module):
        hook_top = Hook("[batch, pos, d_model]", "top")

        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Inner(True), Inner(False)])

    root = Outer()
    make_hook_points(root)
    assert "hook_extra" in root.blocks[0]._modules and "hook_extra" not in root.blocks[1]._modules
    rows = {h.pattern: h for h in hook_table(root)}
    assert rows["blocks.{l}.hook_extra"] == HookDoc("blocks.{l}.hook_extra", "[batch, pos]", "an extra one")
    assert list(rows)[0] == "hook_top" and "blocks.{l}.hook_resid_post" in rows
    with pytest.raises(AttributeError, match="hook_extra"):
        root.blocks[1].hook_extra


def test_token_axes_come_from_the_documented_shape():
    assert HookDoc("a", "[batch, pos, d_model]", "").token_axes() == (1,)
    assert HookDoc("a", "[batch, head, q, k]", "").token_axes() == (2, 3)
    doc = HookDoc("a", "[batch, pos] or [batch, head, pos]", "")
    assert doc.token_axes(2) == (1,) and doc.token_axes(3) == (2,)
    with pytest.raises(ValueError, match="not 4-dimensional"):
        doc.token_axes(4)


@pytest.mark.parametrize("model", models(), ids=lambda m: type(m).__name__)
def test_every_hook_has_its_documented_rank_and_token_axes(model):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, min(model.d_vocab, 60), (2, 7), generator=g)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids)
    assert model.undocumented_hooks() == []
    assert sorted(set(model.hook_dict) - set(cache)) == []  # a hook point this config never fires is left out (when=)
    for name, t in cache.items():
        axes = model.token_axes(name, t.dim())
        assert axes, name
        assert all(t.shape[a] == ids.shape[1] for a in axes), (name, tuple(t.shape))
        assert t.shape[0] == ids.shape[0], name
