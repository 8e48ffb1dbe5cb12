"""Hugging Face configs are read completely or refused: rope spellings and scalings checked against transformers'
own rotary embedding, and every field a family does not understand is an error naming it."""

import json

import pytest
import torch

from interp.families.repo.checkpoints import save_pretrained as save_repo_dir
from interp.loading import CheckpointError, load
from tests.hf_helpers import tiny_hf_bert, tiny_hf_llama
from tests.repo_helpers import tiny_repo


def _edit(directory, fn):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    fn(config)
    path.write_text(json.dumps(config))


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 4.0}, LLAMA3],
                         ids=["default", "linear", "llama3"])
def test_llama_rope_scalings_match_transformers(tmp_path, scaling):
    extra = {"rope_parameters": {"rope_theta": 5000.0, **scaling}} if scaling else {"rope_theta": 5000.0}
    hf = tiny_hf_llama(tmp_path, attention_bias=True, head_dim=16, max_position_embeddings=128, **extra)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["rope_parameters"]["rope_theta"] == 5000.0 and "rope_theta" not in saved  # the transformers 5 spelling
    model = load(tmp_path)
    ids = torch.randint(0, 97, (1, 100))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=2e-5, rtol=1e-4)
    assert (model.cfg.rope_scaling or {}).get("rope_type") == (scaling or {}).get("rope_type")


def test_scaling_changes_the_numbers(tmp_path):
    """The scaled model differs from the unscaled one, so the test above could fail."""
    tiny_hf_llama(tmp_path / "a", rope_parameters={"rope_theta": 5000.0, "rope_type": "linear", "factor": 4.0})
    tiny_hf_llama(tmp_path / "b", rope_parameters={"rope_theta": 5000.0, "rope_type": "default"})
    ids = torch.randint(0, 97, (1, 40))
    assert not torch.allclose(load(tmp_path / "a")(ids), load(tmp_path / "b")(ids), atol=1e-3)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["rope_parameters"].update(rope_type="longrope"), "Missing required keys .* 'rope_type'='longrope'"),
    (lambda c: c["rope_parameters"].update(rope_type="linear"), r"rope_type 'linear' lacks \['factor'\]"),
    (lambda c: c["rope_parameters"].update(factor=2.0), "rope_type 'default' with scaling fields"),
    (lambda c: c.update(rope_theta=1.0), "rope_theta=1.0 but rope_parameters.rope_theta=10000.0"),
    (lambda c: c.update(sliding_window=8), "config field 'sliding_window' .* may change the forward pass"),
    (lambda c: c.update(hidden_act="gelu"), "hidden_act='gelu' is not supported by the llama family"),
    (lambda c: c.update(quantization_config={"quant_method": "bitsandbytes"}), "quantization_config="),
    (lambda c: c.pop("rope_parameters"), "no rope_theta"),
])
def test_llama_refuses_what_it_does_not_understand(tmp_path, edit, message):
    tiny_hf_llama(tmp_path)
    load(tmp_path)
    _edit(tmp_path, edit)
    with pytest.raises(CheckpointError, match=message):
        load(tmp_path)


def test_transformers4_spelling_of_rope_loads_the_same(tmp_path):
    hf = tiny_hf_llama(tmp_path, rope_parameters={"rope_theta": 5000.0, "rope_type": "linear", "factor": 2.0})
    _edit(tmp_path, lambda c: c.update(rope_theta=5000.0, rope_scaling={"type": "linear", "factor": 2.0},
                                       rope_parameters=None))
    ids = torch.randint(0, 97, (1, 30))
    with torch.no_grad():
        torch.testing.assert_close(load(tmp_path)(ids), hf(ids).logits, atol=2e-5, rtol=1e-4)


def test_olmo2_reads_rope_parameters_and_refuses_unknown_fields(tmp_path):
    model = tiny_repo("repo")
    save_repo_dir(model, tmp_path)
    ids = torch.randint(0, 257, (1, 20))
    _edit(tmp_path, lambda c: (c.pop("rope_theta"), c.pop("rope_scaling"),
                               c.update(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})))
    assert torch.equal(load(tmp_path)(ids), model(ids))
    _edit(tmp_path, lambda c: c["rope_parameters"].update(rope_theta=500000.0))
    assert not torch.allclose(load(tmp_path)(ids), model(ids))  # theta is really read from there
    for edit, message in [(lambda c: c.update(qk_layernorm=False), "config field 'qk_layernorm'"),
                          (lambda c: c["pe_config"].update(dynamic_pe_clamp=4), "pe_config field 'dynamic_pe_clamp'"),
                          (lambda c: c.update(hidden_act="relu"), "hidden_act='relu' is not supported by the repo")]:
        save_repo_dir(model, tmp_path)
        _edit(tmp_path, edit)
        with pytest.raises(CheckpointError, match=message):
            load(tmp_path)


def test_bert_directory_matches_transformers_and_refuses_other_position_types(tmp_path):
    hf = tiny_hf_bert(tmp_path)
    ids = torch.randint(1, 97, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(load(tmp_path)(ids), hf(ids).last_hidden_state, atol=1e-5, rtol=1e-5)
    for edit, message in [(lambda c: c.update(position_embedding_type="relative_key"),
                           "position_embedding_type='relative_key'"),
                          (lambda c: c.update(is_decoder=True), "is_decoder=True"),
                          (lambda c: c.update(hidden_act="gelu_new"), "hidden_act='gelu_new'"),
                          (lambda c: c.update(layer_norm_type="rms"), "config field 'layer_norm_type'")]:
        tiny_hf_bert(tmp_path)
        _edit(tmp_path, edit)
        with pytest.raises(CheckpointError, match=message):
            load(tmp_path)


def test_encoder_directory_refuses_unknown_fields(tmp_path):
    from interp.families.encoder.checkpoints import save_pretrained
    from tests.encoder_helpers import tiny_encoder, token_ids

    model = tiny_encoder("rope")
    save_pretrained(model, tmp_path)
    ids = token_ids(model)
    assert torch.equal(load(tmp_path)(ids), model(ids))
    # the development schema has no such field: not silently 10000
    _edit(tmp_path, lambda c: c.update(rope_theta=500000.0))
    with pytest.raises(CheckpointError, match="config field 'rope_theta' .* encoder"):
        load(tmp_path)


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_a_refused_config_names_config_json_before_any_weight_is_read(tmp_path, monkeypatch, family):
    import interp.loading.hf_files as hf_files
    from tests.hf_helpers import write_tiny_hf

    if family == "llama":
        tiny_hf_llama(tmp_path)
    else:
        write_tiny_hf("bert", tmp_path)
    _edit(tmp_path, lambda c: c.update(hidden_act="mish"))
    monkeypatch.setattr(hf_files, "read_state",
                        lambda *a, **k: pytest.fail("weights read before the config was checked"))
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'config.json'}: .*hidden_act='mish'"):
        load(tmp_path)
