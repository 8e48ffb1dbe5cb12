import json

import pytest
import torch

from interp.families.increments.checkpoints import export
from interp.loading import CheckpointError, load, save
from tests.helpers import reference_logits, tiny_model


def _write_step(path, model, *, prefix="", config_edit=None, state_edit=None, step=123):
    config, state = export(model)
    state = {prefix + k: v for k, v in state.items()}
    if config_edit:
        config_edit(config)
    if state_edit:
        state_edit(state)
    torch.save({"step": step, "model_state_dict": state, "model_config": config}, path)
    return path


def test_blog_layout_keys_and_shapes(tmp_path):
    """The exact upstream key layout of the blog's per-layer model, at small width."""
    model = tiny_model("per-layer")
    _, state = export(model)
    assert {k: tuple(v.shape) for k, v in state.items()
            if k.startswith(("delta_mlps.1.", "layers.0.", "tok_emb", "final"))} == {
        "tok_emb.weight": (257, 32), "final_norm.weight": (32,),
        "layers.0.attn_norm.weight": (32,), "layers.0.ffn_norm.weight": (32,),
        "layers.0.attn.wq.weight": (32, 32), "layers.0.attn.wk.weight": (32, 32),
        "layers.0.attn.wv.weight": (32, 32), "layers.0.attn.wo.weight": (32, 32),
        "layers.0.ffn.w_gate.weight": (64, 32), "layers.0.ffn.w_up.weight": (64, 32),
        "layers.0.ffn.w_down.weight": (32, 64),
        "delta_mlps.1.norm.weight": (32,), "delta_mlps.1.fc1.weight": (8, 32), "delta_mlps.1.fc1.bias": (8,),
        "delta_mlps.1.fc2.weight": (1, 8), "delta_mlps.1.fc2.bias": (1,),
    }
    assert not any(k.startswith("blocks.") for k in state)


@pytest.mark.parametrize("prefix", ["", "_orig_mod."])
@pytest.mark.parametrize("variant", ["shared", "per-layer", "per-layer-per-head", "rope"])
def test_upstream_step_pt_loads_to_the_same_model(tmp_path, variant, prefix):
    model = tiny_model(variant)
    path = _write_step(tmp_path / "step_123.pt", model, prefix=prefix)
    loaded = load(path)
    ids = torch.randint(0, 257, (2, 17))
    torch.testing.assert_close(loaded(ids), model(ids))
    assert loaded.source["format"] == "upstream step_N.pt"
    assert len(loaded.source["sha256"]) == 64


# SelectivePEModelConfig.model_dump() of the tiny per-layer model: every field upstream's step_N.pt carries, the
# computed head_dim and effective_delta_hidden_dim included; dropout and init_std act only in training.
AUTHORS_MODEL_CONFIG = {
    "dim": 32, "n_heads": 4, "n_layers": 2, "intermediate_dim": 64, "vocab_size": 257, "max_seq_len": 64,
    "rope_theta": 10000.0,
    "norm_eps": 1e-05, "dropout": 0.1, "pos_encoding": "selective_rope", "norm_type": "rmsnorm", "activation": "swiglu",
    "init_std": 0.02, "delta_hidden_dim": None, "per_layer_delta": True, "per_head_delta": False, "decay": "none",
    "head_dim": 8, "effective_delta_hidden_dim": 8}


def test_the_authors_whole_model_config_loads(tmp_path):
    model = tiny_model("per-layer")
    _, state = export(model)
    torch.save({"step": 50000, "model_state_dict": state, "model_config": dict(AUTHORS_MODEL_CONFIG)},
               tmp_path / "step_50000.pt")
    loaded = load(tmp_path / "step_50000.pt")
    ids = torch.randint(0, 257, (2, 15), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids), model(ids))
        torch.testing.assert_close(loaded(ids), reference_logits(state, AUTHORS_MODEL_CONFIG, ids),
                                   atol=1e-4, rtol=1e-4)
    assert loaded.cfg.to_dict() == AUTHORS_MODEL_CONFIG  # and poslens writes it back whole


def test_poslens_directory_round_trip_and_no_silent_overwrite(tmp_path):
    model = tiny_model("per-layer")
    save(model, tmp_path / "m", training={"steps": 5})
    loaded = load(tmp_path / "m")
    ids = torch.randint(0, 257, (1, 9))
    torch.testing.assert_close(loaded(ids), model(ids))
    assert json.loads((tmp_path / "m" / "training.json").read_text())["steps"] == 5
    with pytest.raises(FileExistsError, match="already holds a checkpoint"):
        save(model, tmp_path / "m")


def test_missing_key_is_named_with_its_expected_shape(tmp_path):
    path = _write_step(tmp_path / "step_1.pt", tiny_model("per-layer"),
                       state_edit=lambda s: s.pop("delta_mlps.1.fc2.bias"))
    with pytest.raises(CheckpointError, match=r"(?s)step_1\.pt.*missing key 'delta_mlps\.1\.fc2\.bias' "
                                              r"\(expected shape \[1\]\)"):
        load(path)


def test_unexpected_key_is_named(tmp_path):
    def add(s):
        s["layers.0.attn.rogue.weight"] = torch.zeros(3, 3)
    with pytest.raises(CheckpointError, match=r"unexpected key 'layers\.0\.attn\.rogue\.weight' \(shape \[3, 3\]\)"):
        load(_write_step(tmp_path / "step_1.pt", tiny_model("shared"), state_edit=add))


def test_wrong_shape_names_key_expected_and_found(tmp_path):
    def shrink(s):
        s["layers.1.ffn.w_up.weight"] = torch.zeros(48, 32)
    with pytest.raises(CheckpointError, match=r"(?s)'layers\.1\.ffn\.w_up\.weight': "
                                              r"expected shape \[64, 32\].*found \[48, 32\]"):
        load(_write_step(tmp_path / "step_1.pt", tiny_model("shared"), state_edit=shrink))


def test_config_that_contradicts_the_weights(tmp_path):
    def wider(c):
        c["dim"] = 64
        c.pop("head_dim")
        c.pop("effective_delta_hidden_dim")
    with pytest.raises(CheckpointError, match=r"tok_emb\.weight': expected shape \[257, 64\] "
                                              r"\(from model_config: dim=64"):
        load(_write_step(tmp_path / "step_1.pt", tiny_model("shared"), config_edit=wider))


def test_config_whose_computed_fields_disagree(tmp_path):
    with pytest.raises(CheckpointError, match="head_dim=16 contradicts"):
        load(_write_step(tmp_path / "step_1.pt", tiny_model("shared"), config_edit=lambda c: c.update(head_dim=16)))


def test_config_says_rope_but_file_has_increment_weights(tmp_path):
    with pytest.raises(CheckpointError, match="unexpected key 'delta_mlp.fc1.weight'"):
        load(_write_step(tmp_path / "step_1.pt", tiny_model("shared"),
                         config_edit=lambda c: c.update(pos_encoding="rope")))


def test_checkpoint_of_another_family(tmp_path):
    olmo_like = {"model_state_dict": {"model.layers.0.self_attn.gate_map.weight": torch.zeros(2, 2)},
                 "model_config": {"hidden_size": 2, "num_hidden_layers": 1, "pe_config": {}}}
    torch.save(olmo_like, tmp_path / "step_9.pt")
    with pytest.raises(CheckpointError, match="another family"):
        load(tmp_path / "step_9.pt")
    model = tiny_model("shared")
    save(model, tmp_path / "m")
    with pytest.raises(CheckpointError, match="is a 'increments' checkpoint, not a 'repo' one"):
        load(tmp_path / "m", family="repo")


def test_truncated_files(tmp_path):
    path = _write_step(tmp_path / "step_1.pt", tiny_model("shared"))
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CheckpointError, match=r"step_1\.pt: cannot be read as a torch checkpoint"):
        load(path)
    save(tiny_model("shared"), tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:500])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot be read as safetensors"):
        load(tmp_path / "m")


def test_not_a_step_dict_and_unknown_names(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match=r"a torch file of no layout poslens reads "
                                              r"\(it reads: upstream step_N\.pt "
                                              r"\(increments family: a dict with 'model_state_dict' and "
                                              r"'model_config'\); "
                                              r"development state_dict\.pt \(encoder family: 'encoder\.weight' or "
                                              r"'transformer_encoder\.\{i\}\.\*' keys, optionally under 'model\.'\)\)"):
        load(tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="no such file or directory, and not a model name"):
        load("no-such-model")
