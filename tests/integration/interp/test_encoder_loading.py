import json

import pytest
import torch
from safetensors.torch import save_file

from interp.families.encoder.checkpoints import export, save_pretrained
from interp.loading import CheckpointError, load, save
from tests.encoder_helpers import (
    FORK_FIELDS,
    FORK_INERT,
    FORK_MODELS,
    FORK_TRAINING,
    authors_config,
    authors_model,
    fork_reference_config,
    old_layout,
    reference_logits,
    tiny_encoder,
    token_ids,
)


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
        "model.transformer_encoder.0.qkv_pos.weight": (2 * 32 + 8, 8),
        "model.transformer_encoder.0.qkv_sem.weight": (2 * 32 + 24, 24),
        "model.transformer_encoder.0.wo_pos.weight": (8, 8), "model.transformer_encoder.0.wo_sem.weight": (24, 24),
        "model.transformer_encoder.0.pos_attention_norm.weight": (8,),
        "model.transformer_encoder.0.sem_attention_norm.weight": (24,),
        "model.transformer_encoder.0.pos_ffn_norm.weight": (8,),
        "model.transformer_encoder.0.sem_ffn_norm.weight": (24,),
        "model.transformer_encoder.0.ffn.w12.weight": (80, 32), "model.transformer_encoder.0.ffn.w3.weight": (32, 40),
        "model.relative_pos_bias.relative_attention_bias": (32, 4), "model.relative_pos_bias.bucket_indices": (48, 48),
        "model.cls_sep_override.thetas": (4, 4), "model.pos_layer_norm.weight": (8,),
        "model.sem_layer_norm.weight": (24,),
        "decoder.weight": (64, 24), "decoder.bias": (64,),
    }
    _, rp_state = export(tiny_encoder("rp", mlm_head=False, rp_per_layer=True))
    assert "transformer_encoder.1.relative_pos_bias.relative_attention_bias" in rp_state \
        and "transformer_encoder.0.qkv.weight" in rp_state
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
    # the helper reads qk per head
    torch.testing.assert_close(reference_logits(old, config, ids), model(ids), atol=1e-4, rtol=1e-4)
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
    cfg = {"model_type": "neobert", "architectures": ["NeoBERTLMHead"], "hidden_size": 24, "pos_size": 8,
           "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 64, "max_length": 48, "norm_eps": 1e-6,
           "pad_token_id": 0,
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
    with pytest.raises(CheckpointError, match=r"key 'decoder\.weight': expected shape \[64, 32\] "
                                              r"\(from .*config\.json: variant=disentangled"):
        load(d)  # the config says the head reads [AP | sem]: 32 wide, the weights are 24 wide
    for edit, message in [(dict(ngpt=True), "config field ngpt=True is not False"),
                          (dict(hidden_act="gelu"), "hidden_act='gelu': a GELU MLP, .*poslens loads only 'SwiGLU'"),
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
                                              r"key 'model\.encoder\.weight': expected shape \[64, 32\] "
                                              r"\(from .*config\.json: variant=disentangled, hidden_size=32.*"
                                              r"found \[64, 24\]"):
        load(path)
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_sise": 24}))
    with pytest.raises(CheckpointError, match=r"has fields \['hidden_sise'\] that no encoder config has"):
        load(path)


def test_a_poslens_config_contradicting_the_weights(tmp_path):
    save(tiny_encoder("disentangled"), tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "poslens.json").read_text())
    meta["config"]["intermediate_size"] = 44
    (tmp_path / "m" / "poslens.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.ffn\.w12\.weight': "
                                              r"expected shape \[88, 32\] \(from poslens\.json.*found \[80, 32\]"):
        load(tmp_path / "m")
    meta["config"]["intermediate_size"] = 40
    meta["config"]["rp_per_layer"] = True
    (tmp_path / "m" / "poslens.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"missing key 'model\.transformer_encoder\.0\."
                                              r"relative_pos_bias\.relative_attention_bias' "
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
    with pytest.raises(CheckpointError, match=r"(?s)state_dict\.pt: .*missing key "
                                              r"'model\.transformer_encoder\.1\.sem_ffn_norm\.weight' "
                                              r"\(expected shape \[24\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.transformer_encoder.1.sem_ffn_norm.weight")))
    with pytest.raises(CheckpointError, match=r"unexpected key 'model\.transformer_encoder\.0\.rogue\.weight' "
                                              r"\(shape \[3\]\)"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.rogue.weight",
                                                       torch.zeros(3))))
    with pytest.raises(CheckpointError, match=r"key 'model\.transformer_encoder\.1\.wo_sem\.weight': "
                                              r"expected shape \[24, 24\].*found \[24, 20\]"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.1.wo_sem.weight",
                                                       torch.zeros(24, 20))))
    with pytest.raises(CheckpointError, match=r"missing key 'decoder\.bias' \(expected shape \[64\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("decoder.bias")))


def test_errors_on_older_keys_name_them_as_the_file_spells_them(tmp_path):
    with pytest.raises(CheckpointError, match=r"missing key 'model\.transformer_encoder\.1\.v_sem\.weight' "
                                              r"\(expected shape \[24, 24\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.transformer_encoder.1.v_sem.weight"), old=True))
    with pytest.raises(CheckpointError, match=r"key 'model\.cls_sep_override\.theta_cls_in': "
                                              r"expected shape \[4\].*found \[5\]"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.cls_sep_override.theta_cls_in", torch.zeros(5)),
                     old=True))
    with pytest.raises(CheckpointError, match=r"missing key 'model\.cls_sep_override\.theta_sep_out' "
                                              r"\(expected shape \[4\]\)"):
        load(_edited(tmp_path, lambda s: s.pop("model.cls_sep_override.theta_sep_out"), old=True))
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.qk\.weight' "
                                              r"is an early development layout"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.qk.weight",
                                                       torch.zeros(64, 32))))


def test_inconsistent_shapes_and_prefixes(tmp_path):
    with pytest.raises(CheckpointError, match=r"'model\.transformer_encoder\.0\.qkv_pos\.weight' has 70 rows, "
                                              r"which is not 2 \* heads \(4\) \* d_qk \+ pos_size \(8\) "
                                              r"for any whole d_qk"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.transformer_encoder.0.qkv_pos.weight",
                                                       torch.zeros(70, 8))))
    with pytest.raises(CheckpointError, match=r"key 'pos_layer_norm\.weight' lacks the 'model\.' prefix "
                                              r"the other keys carry"):
        load(_edited(tmp_path, lambda s: s.__setitem__("pos_layer_norm.weight",
                                                       s.pop("model.pos_layer_norm.weight"))))
    with pytest.raises(CheckpointError, match=r"key 'model\.encoder\.weight' holds a str, not a tensor"):
        load(_edited(tmp_path, lambda s: s.__setitem__("model.encoder.weight", "oops")))


def test_a_bucket_table_that_is_not_t5_is_refused(tmp_path):
    def tamper(s):
        s["model.relative_pos_bias.bucket_indices"] = s["model.relative_pos_bias.bucket_indices"].clone()
        s["model.relative_pos_bias.bucket_indices"][3, 1] = 20
    with pytest.raises(CheckpointError, match=r"key 'model\.relative_pos_bias\.bucket_indices' "
                                              r"is not the T5 bucketing of key - query "
                                              r"\(32 buckets, max distance 128\): "
                                              r"at query 3, key 1 it holds 20, T5 gives 2"):
        load(_edited(tmp_path, tamper))


def test_truncated_foreign_and_other_family_files(tmp_path):
    path = _edited(tmp_path, lambda s: None)
    with pytest.raises(CheckpointError, match="is a 'encoder' checkpoint, not a 'increments' one"):
        load(path, family="increments")
    path.write_bytes(path.read_bytes()[:3000])
    with pytest.raises(CheckpointError, match=r"state_dict\.pt: cannot be read as a torch checkpoint "
                                              r"\(truncated or corrupt\?\)"):
        load(path)
    torch.save({"model.layers.0.self_attn.q_proj.weight": torch.zeros(2, 2)}, tmp_path / "olmo.pt")
    with pytest.raises(CheckpointError, match=r"olmo\.pt: a torch file of no layout poslens reads "
                                              r"\(it reads: upstream step_N\.pt "
                                              r"\(increments family: a dict with 'model_state_dict' and "
                                              r"'model_config'\); "
                                              r"development state_dict\.pt \(encoder family: 'encoder\.weight' or "
                                              r"'transformer_encoder\.\{i\}\.\*' keys, optionally under 'model\.'\)\); "
                                              r"found \['model\.layers\.0\.self_attn\.q_proj\.weight'\]"):
        load(tmp_path / "olmo.pt")
    save_pretrained(tiny_encoder("rp"), tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:400])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot be read as safetensors "
                                              r"\(truncated or corrupt\?\)"):
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


# ---- the fork's whole NeoBERTConfig ----------------------------------------------------------------------------


def _fork_files(directory, variant="disentangled", *, config=None, weights="state_dict.pt", state_edit=None,
                model=None):
    """A checkpoint as the authors leave it: the trainer's state_dict.pt (or a save_pretrained weights file) with the
    fork's config.json beside it. Returns (the path to load, the model written, its state dict)."""
    model = model or authors_model(variant)
    _, state = export(model)  # NeoBERTLMHead's state dict: 'model.'-prefixed backbone + decoder.*
    if state_edit:
        state_edit(state)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config if config is not None else authors_config(variant)))
    if weights.endswith(".safetensors"):
        save_file(state, str(directory / weights))
    else:
        torch.save(state, directory / weights)
    return (directory / weights if weights == "state_dict.pt" else directory), model, state


@pytest.mark.parametrize("variant", ["disentangled", "ap", "rp", "rope"])
def test_a_development_checkpoint_with_the_forks_whole_config_loads_and_records_it(tmp_path, variant):
    from poslens.run.provenance import model_record

    path, model, state = _fork_files(tmp_path / "ckpt", variant)
    loaded = load(path)
    ids = token_ids(model, n=11)
    with torch.no_grad():
        out = loaded(ids)
        torch.testing.assert_close(out, model(ids))
        reference = reference_logits(state, fork_reference_config(authors_config(variant)), ids)
        torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)
    assert model_record(loaded)["training_only_config"] == FORK_TRAINING
    assert loaded.cfg.inert_config == FORK_INERT
    recorded = ("training_only", "inert_config")
    assert {k: v for k, v in loaded.cfg.to_dict().items() if k not in recorded} == \
        {k: v for k, v in model.cfg.to_dict().items() if k not in recorded}


def test_the_forks_config_gives_the_model_the_shapes_give_and_its_norm_eps(tmp_path):
    """The shapes alone give everything but norm_eps (1e-6 assumed); the config's 1e-5 is read, not ignored."""
    model = tiny_encoder("disentangled", **{**FORK_MODELS["disentangled"], "norm_eps": 1e-6})
    path, _, state = _fork_files(tmp_path / "ckpt", config=authors_config(norm_eps=1e-6), model=model)
    bare = tmp_path / "bare" / "state_dict.pt"
    bare.parent.mkdir()
    torch.save(state, bare)
    ids = token_ids(model, n=13)
    with torch.no_grad():
        torch.testing.assert_close(load(path)(ids, position_offset=3), load(bare)(ids, position_offset=3),
                                   atol=0, rtol=0)
        path, model, _ = _fork_files(tmp_path / "eps", config=authors_config(norm_eps=1e-5))
        torch.testing.assert_close(load(path)(ids), model(ids))
        assert not torch.allclose(load(path)(ids), load(bare)(ids), atol=1e-4)
    assert load(bare).cfg.training_only is None  # nothing to record without the config


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_a_forks_save_pretrained_directory_loads_with_its_whole_config(tmp_path, weights):
    d, model, state = _fork_files(tmp_path / "hf", weights=weights)
    pt, _, _ = _fork_files(tmp_path / "pt")
    loaded = load(d)
    assert loaded.source["format"] == "huggingface neobert directory"
    ids = token_ids(model, n=12)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids), load(pt)(ids), atol=0, rtol=0)
        reference = reference_logits(state, fork_reference_config(authors_config()), ids)
        torch.testing.assert_close(loaded(ids), reference, atol=1e-5, rtol=1e-5)
    assert loaded.cfg.training_only == FORK_TRAINING and loaded.cfg.inert_config == FORK_INERT


def test_the_fixture_is_the_whole_fork_config():
    """Every field section 3 of upstream-formats.md lists (the fork's NeoBERTConfig attributes), plus the
    bookkeeping."""
    assert len(FORK_FIELDS) == 34
    for variant in ("disentangled", "ap", "rp", "rope"):
        assert set(FORK_FIELDS) <= set(authors_config(variant))
    assert authors_config()["base_scale"] == pytest.approx(0.0322749, abs=1e-7)


@pytest.mark.parametrize("variant, edit, message", [
    ("disentangled", dict(dim_head=9),
     r"config field dim_head=9 contradicts the fields it is derived from: the development code "
     r"computes it as \(hidden_size 24 \+ pos_size 8\) // num_attention_heads 4 = 8"),
    ("ap", dict(dim_head=8), r"dim_head=8 contradicts .* as hidden_size 24 // num_attention_heads 4 = 6"),
    ("disentangled", dict(kwargs={"kwargs": {"dim_head": 6}}), r"config field kwargs\.kwargs\.dim_head=6 contradicts"),
    ("disentangled", dict(ngpt=True),
     r"config field ngpt=True is not False \(ngpt=True builds nGPT's normalised blocks"),
    ("ap", dict(ngpt=True), r"config field ngpt=True is not False"),
    ("disentangled", dict(shared_pos_keys=True),
     r"shared_pos_keys=True is not False \(shared AP keys raise NotImplementedError"),
    ("disentangled", dict(kwargs={"pos_sem_mixed_feed_forward": True}),
     r"config field kwargs\.pos_sem_mixed_feed_forward \(= True\) is an extra keyword argument "
     r"the encoder \(neobert\) family does not know"),
    ("disentangled", dict(kwargs=[]), r"config field kwargs=\[\] is not an object"),
    ("disentangled", dict(dropout_prob=1.5), r"config field dropout_prob=1\.5 is not a probability in \[0, 1\]"),
    ("disentangled", dict(kwargs={"dropout_prob": "x"}), r"config field kwargs\.dropout_prob='x' is not a probability"),
    ("disentangled", dict(positional_embed_init="sinusoidal"),
     r"positional_embed_init='sinusoidal' is not 'random' or '2dim_cosine' or 'fixed'"),
    ("disentangled", dict(random_offset="yes"), r"random_offset='yes' is not true or false"),
    ("disentangled", dict(embedding_init_range=-1), r"embedding_init_range=-1 is not a finite number >= 0"),
    ("disentangled", dict(base_scale="big"), r"base_scale='big' is not a finite number"),
    ("disentangled", dict(flash_attention=1), r"flash_attention=1 is not true or false"),
    ("disentangled", dict(hidden_act="PosBERTSwiGLU"),
     r"hidden_act='PosBERTSwiGLU': PosBERTSwiGLU masks its output projection"),
    ("disentangled", dict(mixed_feed_forward=False), r"mixed_feed_forward=False: separate AP and semantic FFNs"),
    ("disentangled", dict(rms_norm=False), r"rms_norm=False: LayerNorm instead of RMSNorm"),
    ("disentangled", dict(attention_activation="softpick"),
     r"attention_activation='softpick': softpick is not implemented"),
    ("disentangled", dict(mix_attentions="hadamard"),
     r"mix_attentions='hadamard': hadamard mixing raises NotImplementedError"),
    ("disentangled", dict(AP_embeddings=False), r"AP_embeddings=False: posneobert without AP embeddings"),
    ("disentangled", dict(pad_token_id=1),
     r"pad_token_id=1: the development code gives real tokens the AP rows pad_token_id \+ 1"),
    ("disentangled", dict(rope=True), r"sets posneobert and rope \(rotary on the AP queries\)"),
    ("disentangled", dict(posneobert="yes"), r"config field posneobert='yes' is not true or false"),
    ("disentangled", dict(hidden_size=24.0), r"config field hidden_size=24\.0 is not a whole number"),
    ("disentangled", dict(pos_rope_theta=5.0),
     r"config field 'pos_rope_theta' \(= 5\.0\) is not one the encoder \(neobert\) family "
     r"understands and may change the forward pass"),
])
def test_the_forks_config_fields_are_checked_and_named(tmp_path, variant, edit, message):
    path, _, _ = _fork_files(tmp_path / "ckpt", variant, config=authors_config(variant, **edit))
    with pytest.raises(CheckpointError, match=message):
        load(path)


def test_a_derived_dim_head_is_checked_against_the_weights(tmp_path):
    """The config is self-consistent (dim_head 8), the file's AP queries and keys are 4 wide per head."""
    model = tiny_encoder("disentangled", d_qk=4, intermediate_size=88, norm_eps=1e-5, rp_per_layer=True)
    path, _, _ = _fork_files(tmp_path / "ckpt", model=model)
    with pytest.raises(CheckpointError, match=r"(?s)key 'model\.transformer_encoder\.0\.qkv_pos\.weight': "
                                              r"expected shape \[72, 8\] "
                                              r"\(from .*config\.json: variant=disentangled.*d_qk=8.*found \[40, 8\]"):
        load(path)


def test_inert_and_training_values_the_fork_accepts_load_and_are_kept(tmp_path):
    # what from_pretrained + save_pretrained leave in kwargs
    resaved = {"dim_head": 8, "kwargs": {}, "architectures": ["NeoBERTLMHead"], "transformers_version": "4.39.0",
               "torch_dtype": "float32", "model_type": "neobert"}
    edit = dict(flash_attention=True, base_scale=0.05, kwargs=resaved, dropout_prob=0.0,
                positional_embed_init="2dim_cosine", random_offset=False)
    path, model, _ = _fork_files(tmp_path / "ckpt", config=authors_config(**edit))
    loaded = load(path)
    _same(loaded, model)
    assert loaded.cfg.inert_config == {**FORK_INERT, "flash_attention": True, "base_scale": 0.05, "kwargs": resaved}
    assert loaded.cfg.training_only == {**FORK_TRAINING, "dropout_prob": 0.0, "positional_embed_init": "2dim_cosine",
                                        "random_offset": False}


def test_fields_the_development_code_never_reads_for_a_baseline_are_accepted(tmp_path):
    """A baseline's pos_size, untie_cls, mixed_feed_forward and use_only_sem_for_decoding do nothing in the fork."""
    edit = dict(pos_size=40, dim_head=6, untie_cls=True, mixed_feed_forward=False, use_only_sem_for_decoding=True)
    path, model, _ = _fork_files(tmp_path / "ckpt", "ap", config=authors_config("ap", **edit))
    loaded = load(path)
    _same(loaded, model)
    assert loaded.cfg.variant == "ap" and not loaded.cfg.untie_cls and loaded.cfg.pos_size == 0


def test_a_fixed_ap_table_saved_as_the_pos_embs_buffer_loads(tmp_path):
    model = authors_model()
    with torch.no_grad():
        # the fork's "fixed" table: 1/sqrt(max_length) everywhere
        model.positional_embedding.weight.fill_(1 / 48 ** 0.5)
    rename = lambda s: s.__setitem__("model.pos_embs", s.pop("model.positional_embedding.weight"))  # noqa: E731
    path, _, _ = _fork_files(tmp_path / "ckpt", config=authors_config(positional_embed_init="fixed"), model=model,
                             state_edit=rename)
    loaded = load(path)
    _same(loaded, model)
    assert loaded.cfg.training_only["positional_embed_init"] == "fixed"


def test_save_pretrained_writes_back_every_field_it_read(tmp_path):
    edit = dict(base_scale=0.05, flash_attention=True, random_offset=False, pos_dropout_prob=0.25)
    path, model, _ = _fork_files(tmp_path / "ckpt", config=authors_config(**edit))
    loaded = load(path)
    save_pretrained(loaded, tmp_path / "again")
    written = json.loads((tmp_path / "again" / "config.json").read_text())
    authors = authors_config(**edit)
    assert set(FORK_FIELDS) <= set(written)
    kept = [*FORK_TRAINING, *FORK_INERT, "dim_head", "hidden_size", "pos_size", "num_hidden_layers",
            "num_attention_heads", "posneobert", "rope", "relative_pos_bias", "untie_cls", "use_only_sem_for_decoding",
            "AP_embeddings", "max_length", "vocab_size", "pad_token_id", "norm_eps"]
    assert {k: written[k] for k in kept} == {k: authors[k] for k in kept}
    again = load(tmp_path / "again")
    _same(again, model)
    assert again.cfg.to_dict() == loaded.cfg.to_dict()
    (tmp_path / "again" / "config.json").write_text(json.dumps({k: v for k, v in written.items() if k != "poslens"}))
    alone = load(tmp_path / "again")  # the fork's fields alone describe the same model
    _same(alone, model)
    assert alone.cfg.training_only == loaded.cfg.training_only and alone.cfg.inert_config == loaded.cfg.inert_config


def test_the_rp_baseline_gets_no_bucketed_bias_on_cls_and_sep_rows_and_columns(tmp_path):
    """The fork's RelativePositionBucketedBias zeroes rows / columns 0 and n-1 with or without thetas."""
    path, model, _ = _fork_files(tmp_path / "ckpt", "rp")
    loaded = load(path)
    assert loaded.cfg.rp_skip_special and not loaded.cfg.untie_cls
    ids = token_ids(model, batch=1, n=9)
    seen = {}
    with torch.no_grad(), loaded.hooks(fwd_hooks=[("blocks.0.attn.hook_logits_rp",
                                                   lambda t, hook: seen.setdefault("rp", t))]):
        loaded(ids)
    rp = seen["rp"][0]
    assert rp[:, [0, -1], :].abs().max() == 0 and rp[:, :, [0, -1]].abs().max() == 0
    assert rp[:, 1:-1, 1:-1].abs().min() > 0  # the random bucket values elsewhere
    everywhere = tiny_encoder("rp", intermediate_size=64, norm_eps=1e-5, rp_per_layer=True, untie_cls=False)
    everywhere.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(everywhere(ids), loaded(ids), atol=1e-3)  # the flag matters
