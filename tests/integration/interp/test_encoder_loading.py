import json

import pytest
import torch
from safetensors.torch import save_file

from interp.loading import CheckpointError, load, save
from interp.families.encoder.checkpoints import export, save_pretrained
from tests.encoder_helpers import old_layout, reference_logits, tiny_encoder, token_ids


def _write(directory, state, config=None, name="state_dict.pt"):
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(state, directory / name)
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config))
    return directory / name


def _same(loaded, model, n=9, **kwargs):
    ids = token_ids(model, batch=2, n=n)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, **kwargs), model(ids, **kwargs))


def test_development_layout_keys_and_shapes():
    """The reference's key layout, at small width (pos 8, semantic 24, 4 heads of d_qk 8, SwiGLU 40)."""
    _, state = export(tiny_encoder("disentangled"))
    shapes = {k: tuple(v.shape) for k, v in state.items() if ".1." not in k}
    assert shapes == {
        "model.encoder.weight": (64, 24), "model.positional_embedding.weight": (49, 8),
        "model.transformer_encoder.0.qkv_pos.weight": (2 * 32 + 8, 8), "model.transformer_encoder.0.qkv_sem.weight": (2 * 32 + 24, 24),
        "model.transformer_encoder.0.wo_pos.weight": (8, 8), "model.transformer_encoder.0.wo_sem.weight": (24, 24),
        "model.transformer_encoder.0.pos_attention_norm.weight": (8,), "model.transformer_encoder.0.sem_attention_norm.weight": (24,),
        "model.transformer_encoder.0.pos_ffn_norm.weight": (8,), "model.transformer_encoder.0.sem_ffn_norm.weight": (24,),
        "model.transformer_encoder.0.ffn.w12.weight": (80, 32), "model.transformer_encoder.0.ffn.w3.weight": (32, 40),
        "model.relative_pos_bias.relative_attention_bias": (32, 4), "model.relative_pos_bias.bucket_indices": (48, 48),
        "model.cls_sep_override.thetas": (4, 4), "model.pos_layer_norm.weight": (8,), "model.sem_layer_norm.weight": (24,),
        "decoder.weight": (64, 24), "decoder.bias": (64,),
    }
    _, rp_state = export(tiny_encoder("rp", mlm_head=False, rp_per_layer=True))
    assert "transformer_encoder.1.relative_pos_bias.relative_attention_bias" in rp_state and "transformer_encoder.0.qkv.weight" in rp_state
    assert not any(k.startswith(("model.", "decoder.")) for k in rp_state)


@pytest.mark.parametrize("case", ["mlm-head", "backbone-only", "per-layer-rp", "compiled", "full-head", "no-thetas"])
def test_state_dict_pt_loads_to_the_same_model(tmp_path, case):
    overrides = {"mlm-head": {}, "backbone-only": dict(mlm_head=False), "per-layer-rp": dict(rp_per_layer=True),
                 "compiled": {}, "full-head": dict(mlm_input="full"), "no-thetas": dict(untie_cls=False)}[case]
    model = tiny_encoder("disentangled", **overrides)
    _, state = export(model)
    if case == "compiled":
        state = {"_orig_mod." + k: v for k, v in state.items()}
    loaded = load(_write(tmp_path / "dstg", state))
    _same(loaded, model, position_offset=4)
    assert loaded.cfg.to_dict() == model.cfg.to_dict()
    assert loaded.model_name == "dstg" and loaded.source["format"] == "development state_dict.pt"
    assert len(loaded.source["sha256"]) == 64


@pytest.mark.parametrize("theta_shape", ["[H]", "[1,H]"])
def test_older_key_variants_load_and_match_the_reference_read_the_old_way(tmp_path, theta_shape):
    model = tiny_encoder("disentangled")
    config, state = export(model)
    old = old_layout(state, 4, 8, theta_shape=theta_shape, embedding_rab=True)
    assert "model.transformer_encoder.0.qk_pos.weight" in old and "model.cls_sep_override.theta_sep_in" in old
    assert "model.relative_pos_bias.relative_attention_bias.weight" in old and not any("qkv_" in k for k in old)
    ids = token_ids(model, n=10)
    torch.testing.assert_close(reference_logits(old, config, ids), model(ids), atol=1e-4, rtol=1e-4)  # the helper reads qk per head
    _same(load(_write(tmp_path / "old", old)), model)


@pytest.mark.parametrize("variant", ["ap", "rope", "rp"])
def test_baseline_state_dicts_take_heads_from_a_sidecar_or_the_rp_table(tmp_path, variant):
    model = tiny_encoder(variant, rope_style="interleaved") if variant == "rope" else tiny_encoder(variant)
    _, state = export(model)
    path = _write(tmp_path / variant, state)
    if variant == "rp":  # relative_attention_bias [buckets, heads] shows the heads
        _same(load(path), model)
        return
    with pytest.raises(CheckpointError, match="cannot read num_attention_heads off the shapes"):
        load(path)
    (tmp_path / variant / "config.json").write_text(json.dumps({"num_attention_heads": 4, "max_length": 48}))
    loaded = load(path)
    assert loaded.cfg.residual == "prenorm" and loaded.cfg.variant == variant
    if variant == "rope":
        assert loaded.cfg.rope_style == "interleaved"  # the development code's complex-number rotary
    _same(loaded, model, position_offset=2)


def _dev_config(**extra):
    """config.json as the development NeoBERTConfig writes it, for the tiny DSTG (SwiGLU 88 by the 2/3 rule)."""
    cfg = {"model_type": "neobert", "architectures": ["NeoBERTLMHead"], "hidden_size": 24, "pos_size": 8, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 64, "max_length": 48, "norm_eps": 1e-6, "pad_token_id": 0,
           "posneobert": True, "rope": False, "relative_pos_bias": True, "AP_embeddings": True, "untie_cls": True,
           "use_only_sem_for_decoding": True, "mixed_feed_forward": True, "hidden_act": "SwiGLU", "rms_norm": True,
           "intermediate_size": None, "pos_intermediate_size": None, "ngpt": False, "shared_pos_keys": False,
           "mix_attentions": "sum", "attention_activation": "softmax", "positional_embed_init": "random",
           "transformers_version": "4.48.0", "torch_dtype": "float32"}
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
@pytest.mark.parametrize("prefixed", [True, False])
def test_a_development_save_pretrained_directory_loads(tmp_path, weights, prefixed):
    model = tiny_encoder("disentangled", intermediate_size=88)  # int(2 * (4*8 + 4*24) / 3) = 85 -> 88
    _, state = export(model)
    if not prefixed:
        state = {k.removeprefix("model."): v for k, v in state.items()}
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(_dev_config()))
    if weights.endswith(".safetensors"):
        save_file(state, str(d / weights))
    else:
        torch.save(state, d / weights)
    loaded = load(d)
    _same(loaded, model)
    assert loaded.source["format"] == "huggingface neobert directory" and loaded.model_name == "hf"
    assert loaded.cfg.rp_per_layer is False and loaded.cfg.residual == "normalized"


def test_development_config_switches(tmp_path):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(_dev_config(use_only_sem_for_decoding=False)))
    _, state = export(tiny_encoder("disentangled", intermediate_size=88))
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"key 'decoder\.weight': expected shape \[64, 32\] \(from .*config\.json: variant=disentangled"):
        load(d)  # the config says the head reads [AP | sem]: 32 wide, the weights are 24 wide
    for edit, message in [(dict(ngpt=True), "sets ngpt=True; poslens loads only ngpt=False"),
                          (dict(hidden_act="gelu"), "hidden_act='gelu'; poslens loads only hidden_act='swiglu'"),
                          (dict(rope=True), "posneobert and rope"),
                          (dict(model_type="bert"), r"config\.json: transformers cannot read it as a 'bert' config")]:
        (d / "config.json").write_text(json.dumps(_dev_config(**edit)))
        with pytest.raises(CheckpointError, match=message):
            load(d)


@pytest.mark.parametrize("variant", ["disentangled", "ap", "rp", "rope"])
def test_save_pretrained_and_poslens_directories_round_trip(tmp_path, variant):
    model = tiny_encoder(variant, intermediate_size=36, rp_per_layer=variant == "rp")
    save_pretrained(model, tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["model_type"] == "neobert" and written["posneobert"] == (variant == "disentangled")
    hf = load(tmp_path / "hf")
    assert hf.cfg.to_dict() == model.cfg.to_dict()
    _same(hf, model)
    save(model, tmp_path / "p", name="tiny")
    meta = json.loads((tmp_path / "p" / "poslens.json").read_text())
    assert meta["family"] == "encoder" and meta["config"]["variant"] == variant
    back = load(tmp_path / "p")
    assert back.model_name == "tiny" and back.cfg.to_dict() == model.cfg.to_dict()
    _same(back, model)


def test_a_sidecar_overrides_and_contradictions_are_named(tmp_path):
    model = tiny_encoder("disentangled", residual="prenorm")
    _, state = export(model)
    path = _write(tmp_path / "m", state)
    assert not torch.allclose(load(path)(token_ids(model)), model(token_ids(model)), atol=1e-3)  # inferred: normalized
    (tmp_path / "m" / "config.json").write_text(json.dumps({"residual": "prenorm"}))
    _same(load(path), model)
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_size": 32}))
    with pytest.raises(CheckpointError, match=r"(?s)state_dict\.pt: checkpoint does not match the model:.*"
                                              r"key 'model\.encoder\.weight': expected shape \[64, 32\] \(from .*config\.json: "
                                              r"variant=disentangled, hidden_size=32.*found \[64, 24\]"):
        load(path)
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_sise": 24}))
    with pytest.raises(CheckpointError, match=r"has fields \['hidden_sise'\] that no encoder config has"):
        load(path)


def test_a_poslens_config_contradicting_the_weights(tmp_path):
    save(tiny_encoder("disentangled"), tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "poslens.json").read_text())
    meta["config"]["intermediate_size"] = 44
    (tmp_path / "m" / "poslens.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.ffn\.w12\.weight': expected shape \[88, 32\] "
                                              r"\(from poslens\.json.*found \[80, 32\]"):
        load(tmp_path / "m")
    meta["config"]["intermediate_size"] = 40
    meta["config"]["rp_per_layer"] = True
    (tmp_path / "m" / "poslens.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"missing key 'model\.transformer_encoder\.0\.relative_pos_bias\.relative_attention_bias' "
                                              r"\(expected shape \[32, 4\]\)"):
        load(tmp_path / "m")


def _edited(tmp_path, edit, *, variant="disentangled", old=False):
    model = tiny_encoder(variant)
    _, state = export(model)
    if old:
        state = old_layout(state, 4, 8)
    edit(state)
    return _write(tmp_path / "m", state)


def test_missing_unexpected_and_misshaped_keys_are_named(tmp_path):
    with pytest.raises(CheckpointError, match=r"(?s)state_dict\.pt: .*missing key 'model\.transformer_encoder\.1\.sem_ffn_norm\.weight' "
                                              r"\(expected shape \[24\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.transformer_encoder.1.sem_ffn_norm.weight")))
    with pytest.raises(CheckpointError, match=r"unexpected key 'model\.transformer_encoder\.0\.rogue\.weight' \(shape \[3\]\)"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.rogue.weight", torch.zeros(3))))
    with pytest.raises(CheckpointError, match=r"key 'model\.transformer_encoder\.1\.wo_sem\.weight': expected shape \[24, 24\].*found \[24, 20\]"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.1.wo_sem.weight", torch.zeros(24, 20))))
    with pytest.raises(CheckpointError, match=r"missing key 'decoder\.bias' \(expected shape \[64\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("decoder.bias")))


def test_errors_on_older_keys_name_them_as_the_file_spells_them(tmp_path):
    with pytest.raises(CheckpointError, match=r"missing key 'model\.transformer_encoder\.1\.v_sem\.weight' \(expected shape \[24, 24\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.transformer_encoder.1.v_sem.weight"), old=True))
    with pytest.raises(CheckpointError, match=r"key 'model\.cls_sep_override\.theta_cls_in': expected shape \[4\].*found \[5\]"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.cls_sep_override.theta_cls_in", torch.zeros(5)), old=True))
    with pytest.raises(CheckpointError, match=r"missing key 'model\.cls_sep_override\.theta_sep_out' \(expected shape \[4\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.cls_sep_override.theta_sep_out"), old=True))
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.qk\.weight' is an early development layout"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.qk.weight", torch.zeros(64, 32))))


def test_inconsistent_shapes_and_prefixes(tmp_path):
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.qkv_pos\.weight' has 70 rows, which is not "
                                              r"2 \* heads \(4\) \* d_qk \+ pos_size \(8\) for any whole d_qk"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.qkv_pos.weight", torch.zeros(70, 8))))
    with pytest.raises(CheckpointError, match=r"key 'pos_layer_norm\.weight' lacks the 'model\.' prefix the other keys carry"):
        load(_edited(tmp_path, lambda s: s.__setitem__("pos_layer_norm.weight", s.pop("model.pos_layer_norm.weight"))))
    with pytest.raises(CheckpointError, match=r"key 'model\.encoder\.weight' holds a str, not a tensor"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.encoder.weight", "oops")))


def test_a_bucket_table_that_is_not_t5_is_refused(tmp_path):
    def tamper(s):
        s["model.relative_pos_bias.bucket_indices"] = s["model.relative_pos_bias.bucket_indices"].clone()
        s["model.relative_pos_bias.bucket_indices"][3, 1] = 20
    with pytest.raises(CheckpointError, match=r"key 'model\.relative_pos_bias\.bucket_indices' is not the T5 bucketing of key - query "
                                              r"\(32 buckets, max distance 128\): at query 3, key 1 it holds 20, T5 gives 2"):
        load(_edited(tmp_path, tamper))


def test_truncated_foreign_and_other_family_files(tmp_path):
    path = _edited(tmp_path, lambda s: None)
    with pytest.raises(CheckpointError, match="is a 'encoder' checkpoint, not a 'increments' one"):
        load(path, family="increments")
    path.write_bytes(path.read_bytes()[:3000])
    with pytest.raises(CheckpointError, match=r"state_dict\.pt: cannot be read as a torch checkpoint \(truncated or corrupt\?\)"):
        load(path)
    torch.save({"model.layers.0.self_attn.q_proj.weight": torch.zeros(2, 2)}, tmp_path / "olmo.pt")
    with pytest.raises(CheckpointError, match=r"olmo\.pt: a torch file of no layout poslens reads \(it reads: upstream step_N\.pt \(increments family: a dict with 'model_state_dict' and 'model_config'\); development state_dict\.pt \(encoder family: 'encoder\.weight' or 'transformer_encoder\.\{i\}\.\*' keys, optionally under 'model\.'\)\); found \['model\.layers\.0\.self_attn\.q_proj\.weight'\]"):
        load(tmp_path / "olmo.pt")
    save_pretrained(tiny_encoder("rp"), tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:400])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot be read as safetensors \(truncated or corrupt\?\)"):
        load(tmp_path / "hf")
    save(tiny_encoder("ap"), tmp_path / "p")
    with pytest.raises(CheckpointError, match="is a 'encoder' checkpoint, not a 'repo' one"):
        load(tmp_path / "p", family="repo")


def test_the_bert_vocabulary_size_attaches_the_tokenizer(tmp_path):
    from interp.tokenizers import WordPieceTokenizer

    model = tiny_encoder("disentangled", vocab_size=30522, num_hidden_layers=1)
    loaded = load(_write(tmp_path / "m", export(model)[1]))
    assert loaded.cfg.tokenizer == "bert-uncased" and isinstance(loaded.tokenizer, WordPieceTokenizer)
    ids = loaded.to_tokens("Positions, disentangled.")
    assert ids[0, 0].item() == 101 and ids[0, -1].item() == 102
    torch.testing.assert_close(loaded(ids), model(ids))
