"""A family is a plug-in: one file of the user's, holding a model and its checkpoint layout, and one registration line.
``interp.load`` then reads its checkpoints, ``interp.save`` writes and reads them back, its hooks are documented and
run, and every analysis whose capabilities it declares runs on it."""

import importlib
import sys
import textwrap

import pytest
import torch

TOY = textwrap.dedent('''
    """A toy family: one attention layer over learned token embeddings, read from a folder holding toy.json."""
    import json
    from dataclasses import asdict, dataclass

    import torch
    from safetensors.torch import load_file
    from torch import nn

    from interp.attention import attend
    from interp.base import PosLensModel
    from interp.capabilities import Capability
    from interp.families import Family, Layout, register
    from interp.hooks import AttentionHooks, BlockHooks, Hook


    @dataclass
    class ToyConfig:
        vocab: int = 50
        width: int = 16
        heads: int = 2
        length: int = 64


    class ToyAttention(AttentionHooks):
        hook_z = Hook("[batch, pos, head, d_head]", "per-head output")

        def __init__(self, cfg):
            super().__init__()
            self.cfg, self.qkv, self.out = cfg, nn.Linear(cfg.width, 3 * cfg.width), nn.Linear(cfg.width, cfg.width)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (t.view(b, n, self.cfg.heads, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
            z = attend(q, k, v, causal=True, hook_scores=self.hook_attn_scores, hook_pattern=self.hook_pattern)
            return self.out(self.hook_z(z.transpose(1, 2)).reshape(b, n, -1))


    class ToyBlock(BlockHooks):
        def __init__(self, cfg):
            super().__init__()
            self.attn = ToyAttention(cfg)

        def forward(self, x):
            x = self.hook_resid_pre(x)
            h = self.hook_resid_mid(x + self.hook_attn_out(self.attn(x)))
            return self.hook_resid_post(h + self.hook_mlp_out(torch.zeros_like(h)))


    class ToyModel(PosLensModel):
        family = "toy"
        hook_embed = Hook("[batch, pos, d_model]", "token embeddings")

        def __init__(self, cfg):
            super().__init__()
            self.cfg, self.n_layers, self.n_heads, self.d_model = cfg, 1, cfg.heads, cfg.width
            self.d_vocab, self.max_seq_len, self.tokenizer = cfg.vocab, cfg.length, None
            self.embed = nn.Embedding(cfg.vocab, cfg.width)
            self.blocks = nn.ModuleList([ToyBlock(cfg)])
            self.capabilities = frozenset({Capability.ATTENTION, Capability.CAUSAL_LM, Capability.HIDDEN_STATES})
            self.setup()

        def forward(self, tokens):
            x = self.hook_embed(self.embed(self.check_tokens(tokens)))
            for block in self.blocks:
                x = block(x)
            return x @ self.embed.weight.T

        def residual_subspaces(self):
            return {"full": slice(0, self.d_model)}


    def build(config, state, where):
        model = ToyModel(ToyConfig(**config))
        model.load_state_dict(state, strict=True)
        return model.eval()


    def read(checkpoint, place):
        return build(json.loads((checkpoint.path / "toy.json").read_text()), load_file(checkpoint.path / "weights.safetensors"),
                     str(checkpoint.path))


    register(Family("toy", layouts=(Layout("toy folder", lambda c: c.has("toy.json"), read),), build=build,
                    export=lambda m: (asdict(m.cfg), dict(m.state_dict())), examples=lambda: [ToyModel(ToyConfig())]))
''')  # noqa: E501 (the module's own source: wrapping it would change the string)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The user's one file on the path, imported: its last line registers the family."""
    (tmp_path / "toy_family.py").write_text(TOY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_family")
    yield module
    from interp import families

    families._REGISTRY.pop("toy", None)
    sys.modules.pop("toy_family", None)


def test_a_toy_family_from_one_file_loads_saves_hooks_and_analyses(toy, tmp_path):
    import json

    from safetensors.torch import save_file

    import interp
    from analyses.induction import induction
    from interp.hook_docs import models

    torch.manual_seed(0)
    original = toy.ToyModel(toy.ToyConfig())
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "toy.json").write_text(json.dumps({"vocab": 50, "width": 16, "heads": 2, "length": 64}))
    save_file({k: v.contiguous() for k, v in original.state_dict().items()}, folder / "weights.safetensors")

    model = interp.load(folder)  # the registered layout recognises the folder
    ids = torch.randint(0, 50, (2, 10))
    assert model.family == "toy" and model.source["format"] == "toy folder"
    torch.testing.assert_close(model(ids), original(ids))
    again = interp.load(interp.save(model, tmp_path / "saved"))  # a poslens directory, read back by the family's build
    torch.testing.assert_close(again(ids), model(ids), rtol=0, atol=0)
    with pytest.raises(interp.CheckpointError, match="this is a 'toy' checkpoint, not a 'llama' one"):
        interp.load(folder, family="llama")

    _, cache = model.run_with_cache(ids)
    assert model.undocumented_hooks() == [] and cache["blocks.0.attn.hook_pattern"].shape == (2, 2, 10, 10)
    with pytest.raises(interp.CapabilityError, match=r"\(toy family\) cannot start or stop at a layer"):
        model(ids, stop_at_layer=1)  # its forward reads no layer range: refused, not run whole
    assert any(type(m).__name__ == "ToyModel" for m in models())  # documented with the rest

    table = induction(model, half=8, n_docs=2)  # an analysis that needs attention patterns
    assert len(table) == 2 and table["induction_score"].between(0, 1).all()


def test_a_registered_family_enters_every_family_wide_matrix_with_no_test_edit(toy, tmp_path):
    """tests/integration/interp/test_families.py parametrizes over the registry's ``Family.examples``: the toy family,
    registered, is in its matrix and passes each of its checks."""
    from tests.integration.interp import test_families as matrix

    params = [p for p in matrix.examples() if p.values[0] == "toy"]
    assert [p.id for p in params] == ["toy-0"]
    for p in params:
        model = matrix.example(*p.values)
        matrix.check_hooks(model)
        matrix.check_save_load(model, tmp_path / "save")
        matrix.check_copies(model, tmp_path)


MATRICES = {  # family-wide tests that parametrize over the registry (test_span_masses.models); none names toy
    "tests/integration/interp/test_span_masses.py": "test_every_family_gives_the_pattern_masses_without_materialising",
    "tests/integration/interp/test_attention_statistics.py":
        "test_every_family_gives_the_statistics_of_its_own_full_pattern",
    "tests/integration/interp/test_key_window.py": "test_applied_key_window_gives_the_materialised_windows_output",
}


def test_a_registered_family_enters_the_attention_matrices_when_collected(toy, tmp_path):
    """The span-mass, attention-statistics and key-window matrices take every example of the registry: pytest, run
    with the user's file as a plug-in (``-p toy_family``, registered before collection as a conftest's import would
    be), collects a toy case of each and passes it."""
    import os
    import re
    import subprocess
    from pathlib import Path

    from tests.integration.interp.test_span_masses import models

    assert [p.id for p in models() if p.values[0] == "toy"] == ["toy-0"]  # registered here too: the function sees it
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", *MATRICES, "-p", "toy_family", "-p", "no:cacheprovider",
                          "-o", "addopts=", "-v", "-k", "toy"], cwd=root, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    passed = re.findall(r"^(\S+)::(\w+)\[([^\]]*)\] PASSED", run.stdout, re.M)
    for path, test in MATRICES.items():
        ids = [i for p, t, i in passed if p == path and t == test]
        assert ids and all("toy-0" in i for i in ids), (path, ids)
    assert sum("toy-0" in i for *_, i in passed) == 5  # one span-mass case, one statistics case, three key windows
