import json

import pytest
import torch

from interp.capabilities import Capability
from interp.families.repo.checkpoints import export, hf_config, save_pretrained
from interp.loading import CheckpointError, load
from tests.repo_helpers import AUTHORS_PE_CONFIG, authors_olmo2_config, reference_logits, tiny_repo


@pytest.mark.parametrize("mode", ["rope", "nope", "repo"])
def test_logits_match_an_independent_upstream_reference(mode):
    model = tiny_repo(mode)
    _, state = export(model)
    ids = torch.randint(0, 257, (2, 19))
    torch.testing.assert_close(model(ids), reference_logits(state, hf_config(model.cfg), ids), atol=2e-4, rtol=2e-4)


def test_repo_positions_are_final_map_of_the_raw_residual():
    model = tiny_repo("repo")
    _, cache = model.run_with_cache(torch.randint(0, 257, (1, 12)))
    attn = model.blocks[2].attn
    x = cache["blocks.2.hook_resid_pre"]
    z = attn.final_map(torch.nn.functional.silu(attn.gate_map(x)) * attn.content_map(x)).transpose(1, 2)
    torch.testing.assert_close(cache["blocks.2.attn.hook_positions"], z)
    # below start layer
    torch.testing.assert_close(cache["blocks.0.attn.hook_positions"][0, 1], torch.arange(12).float())
    assert cache["blocks.2.attn.hook_repo_p"].shape == (1, 12, 8)
    assert model.undocumented_hooks() == [] and model.position_modes() == ["rope", "repo", "repo"]
    assert Capability.POSITIONS in model.capabilities


def test_a_repo_layer_with_zero_maps_is_nope():
    """Zero maps put every token at position 0: R(0) is the identity, so the layer equals a NoPE layer."""
    repo = tiny_repo("repo")
    with torch.no_grad():
        for block in repo.blocks[1:]:
            block.attn.final_map.weight.zero_()
    nope = tiny_repo("nope")
    nope.load_state_dict({k: v for k, v in repo.state_dict().items() if "_map" not in k})
    ids = torch.randint(0, 257, (2, 15))
    torch.testing.assert_close(repo(ids), nope(ids), atol=1e-5, rtol=1e-5)
    _, cache = repo.run_with_cache(ids, names_filter="blocks.2.attn.hook_positions")
    assert torch.all(cache["blocks.2.attn.hook_positions"] == 0)


def test_stock_transformers_agrees_on_rope_and_silently_drops_the_repo_maps(tmp_path):
    from transformers import Olmo2ForCausalLM

    ids = torch.randint(0, 257, (1, 16))
    rope = tiny_repo("rope")
    save_pretrained(rope, tmp_path / "rope")
    stock = Olmo2ForCausalLM.from_pretrained(tmp_path / "rope", attn_implementation="eager").eval()
    with torch.no_grad():
        torch.testing.assert_close(stock(ids).logits, rope(ids), atol=2e-4, rtol=2e-4)
    repo = tiny_repo("repo")
    save_pretrained(repo, tmp_path / "repo")
    stock = Olmo2ForCausalLM.from_pretrained(tmp_path / "repo", attn_implementation="eager").eval()
    as_rope = tiny_repo("rope")
    as_rope.load_state_dict({k: v for k, v in repo.state_dict().items() if "_map" not in k})
    with torch.no_grad():
        torch.testing.assert_close(stock(ids).logits, as_rope(ids), atol=2e-4, rtol=2e-4)  # the pitfall
    assert not torch.allclose(load(tmp_path / "repo")(ids), as_rope(ids), atol=1e-3)  # poslens keeps the maps


@pytest.mark.parametrize("shard_size", [None, 30_000])
def test_released_layout_loads_single_and_sharded(tmp_path, shard_size):
    model = tiny_repo("repo")
    save_pretrained(model, tmp_path / "m", shard_size=shard_size)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["model_type"] == "olmo2" and cfg["pe_config"]["dynmaic_pe_start_layer"] == 1
    assert cfg["pe_config"]["dynamic_pe_mode"] == "swigluex_multihead"
    if shard_size:
        assert (tmp_path / "m" / "model.safetensors.index.json").exists()
    loaded = load(tmp_path / "m")
    ids = torch.randint(0, 257, (1, 10))
    torch.testing.assert_close(loaded(ids), model(ids))
    _, cache = loaded.run_with_cache(ids, names_filter="blocks.1.attn.hook_positions")
    assert not torch.allclose(cache["blocks.1.attn.hook_positions"][0, 0], torch.arange(10).float())


def test_bf16_dtype_option(tmp_path):
    save_pretrained(tiny_repo("repo"), tmp_path / "m")
    model = load(tmp_path / "m", dtype=torch.bfloat16)
    assert model.embed_tokens.weight.dtype == torch.bfloat16
    assert model(torch.randint(0, 257, (1, 8))).dtype == torch.bfloat16


def _edit_config(path, fn):
    cfg = json.loads((path / "config.json").read_text())
    fn(cfg)
    (path / "config.json").write_text(json.dumps(cfg))


def test_config_says_repo_but_maps_are_missing(tmp_path):
    save_pretrained(tiny_repo("rope"), tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: c["pe_config"].update(dynamic_pe_mode="swigluex_multihead",
                                                                 dynmaic_pe_start_layer=1, dynamic_pe_start_layer=1))
    with pytest.raises(CheckpointError, match="missing key 'model.layers.1.self_attn.gate_map.weight'"):
        load(tmp_path / "m")


def test_maps_present_but_config_says_rope(tmp_path):
    save_pretrained(tiny_repo("repo"), tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: c["pe_config"].update(dynamic_pe_mode="none"))
    with pytest.raises(CheckpointError, match="unexpected key 'model.layers.1.self_attn.final_map.weight'"):
        load(tmp_path / "m")


def test_start_layer_spellings(tmp_path):
    save_pretrained(tiny_repo("repo"), tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: c["pe_config"].update(dynamic_pe_start_layer=2))
    with pytest.raises(CheckpointError, match="dynmaic_pe_start_layer=1 but dynamic_pe_start_layer=2"):
        load(tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: (c["pe_config"].pop("dynmaic_pe_start_layer"),
                                            c["pe_config"].update(dynamic_pe_start_layer=1)))
    with pytest.raises(CheckpointError, match="not the misspelled dynmaic_pe_start_layer"):
        load(tmp_path / "m")


def test_missing_and_truncated_shards(tmp_path):
    save_pretrained(tiny_repo("repo"), tmp_path / "m", shard_size=30_000)
    shards = sorted((tmp_path / "m").glob("model-*.safetensors"))
    shards[1].write_bytes(shards[1].read_bytes()[:100])
    with pytest.raises(CheckpointError, match=f"{shards[1].name}: cannot be read as safetensors"):
        load(tmp_path / "m")
    shards[2].unlink()
    with pytest.raises(CheckpointError, match=f"lives in shard '{shards[2].name}', which is missing"):
        load(tmp_path / "m")


def test_other_model_types_and_rope_scaling(tmp_path):
    save_pretrained(tiny_repo("rope"), tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": 4.0}))
    with pytest.raises(CheckpointError, match="rope_scaling"):
        load(tmp_path / "m")
    with pytest.raises(CheckpointError, match="is a 'repo' checkpoint, not a 'increments' one"):
        _edit_config(tmp_path / "m", lambda c: c.update(rope_scaling=None))
        load(tmp_path / "m", family="increments")


def test_device_maps_go_through_accelerate(tmp_path):
    """On this CPU-only machine: an explicit per-module map and an 'auto' map bounded by max_memory."""
    model = tiny_repo("repo")
    save_pretrained(model, tmp_path / "m", shard_size=30_000)
    ids = torch.randint(0, 257, (1, 9))
    explicit = {"embed_tokens": "cpu", "blocks.0": "cpu", "blocks.1": "cpu", "blocks.2": "cpu", "norm": "cpu",
                "lm_head": "cpu"}
    torch.testing.assert_close(load(tmp_path / "m", device_map=explicit)(ids), model(ids))
    auto = load(tmp_path / "m", device_map="auto", max_memory={"cpu": "1GiB"})
    torch.testing.assert_close(auto(ids), model(ids))
    assert {p.device.type for p in auto.parameters()} == {"cpu"}


def test_tokenizer_beside_the_weights_is_attached_and_its_absence_is_a_clear_error(tmp_path):
    from transformers import AutoTokenizer

    from analyses.niah_accuracy import niah_accuracy
    from analyses.positions import position_ranges
    from interp.capabilities import CapabilityError
    from interp.catalog import MINILM
    from interp.package_files import package_file

    model = tiny_repo("repo", vocab_size=30522, tokenizer=None)
    save_pretrained(model, tmp_path / "bare")
    bare = load(tmp_path / "bare")
    assert bare.tokenizer is None
    with pytest.raises(CapabilityError, match="loaded without a tokenizer"):
        niah_accuracy(bare, lengths=(300,), n_docs=1)
    save_pretrained(model, tmp_path / "with")
    AutoTokenizer.from_pretrained(package_file(*MINILM)).save_pretrained(tmp_path / "with")
    loaded = load(tmp_path / "with")
    assert loaded.tokenizer.encode("hello world") == [7592, 2088]
    assert len(position_ranges(loaded, n_docs=1, length=300)) == 3 * 4


def test_batched_generation_gives_each_prompt_its_own_greedy_continuation():
    model = tiny_repo("repo").eval()
    g = torch.Generator().manual_seed(3)
    prompts = torch.randint(0, 257, (5, 14), generator=g).tolist()
    stops = (7, 11, 40)
    budgets = [6, 0, 3, 6, 1]
    batched = model.generate_batch(prompts, 0, stops, budgets=budgets)
    alone = [model.generate([p], b, stops) if b else [] for p, b in zip(prompts, budgets)]
    assert batched == alone
    assert [len(o) for o in batched][1] == 0 and all(len(o) <= b for o, b in zip(batched, budgets))


def test_batched_generation_refuses_ragged_prompts():
    from interp.base import InputError

    with pytest.raises(InputError, match="one length, got lengths \\[3, 4\\]"):
        tiny_repo("rope").generate_batch([[1, 2, 3], [1, 2, 3, 4]], 2)


@pytest.mark.parametrize("mode", ["rope", "nope", "repo"])
def test_cached_decoding_matches_the_full_forward(mode):
    """One token at a time through the KV cache gives the logits of running the whole sequence."""
    from interp.attention import KVCache, decoding

    model = tiny_repo(mode).eval()
    ids = torch.randint(0, 257, (3, 12))
    full = model(ids)
    cache = KVCache()
    with torch.no_grad(), decoding(cache):
        steps = [model(ids[:, :7])[:, -1]] + [model(ids[:, t : t + 1])[:, -1] for t in range(7, 12)]
    torch.testing.assert_close(torch.stack(steps, 1), full[:, 6:], atol=1e-5, rtol=1e-5)
    assert cache.past(model.blocks[0].attn) == 12

    seen = []
    hooks = [(f"blocks.{l}.attn.hook_pattern", lambda p, hook: seen.append(p.shape) or p)
             for l in range(model.n_layers)]
    cache = KVCache()
    with torch.no_grad(), decoding(cache), model.hooks(fwd_hooks=hooks):  # the materialised path, with the offset mask
        steps = [model(ids[:, :7])[:, -1]] + [model(ids[:, t : t + 1])[:, -1] for t in range(7, 12)]
    torch.testing.assert_close(torch.stack(steps, 1), full[:, 6:], atol=1e-5, rtol=1e-5)
    assert seen[0] == (3, 4, 7, 7) and seen[-1] == (3, 4, 1, 12)


def test_cached_and_uncached_generation_agree():
    model = tiny_repo("repo").eval()
    prompts = torch.randint(0, 257, (4, 10), generator=torch.Generator().manual_seed(1)).tolist()
    cached = model.generate_batch(prompts, 6, (5,))
    model.supports_kv_cache = False
    assert model.generate_batch(prompts, 6, (5,)) == cached


def test_authors_whole_pe_config_loads_and_is_recorded(tmp_path):
    from poslens.run.provenance import model_record

    model = tiny_repo("repo")
    save_pretrained(model, tmp_path / "m")
    written = json.loads((tmp_path / "m" / "config.json").read_text())["pe_config"]
    assert set(written) == set(AUTHORS_PE_CONFIG)  # the writer claims the upstream format: it writes every field
    _edit_config(tmp_path / "m", lambda c: c.update(pe_config=dict(AUTHORS_PE_CONFIG)))
    loaded = load(tmp_path / "m")
    ids = torch.randint(0, 257, (1, 10))
    torch.testing.assert_close(loaded(ids), model(ids))  # training-only fields leave the forward as it is
    record = model_record(loaded)["training_only_config"]
    assert record == {"dynamic_pe_init_pdrop": 0.8, "dynamic_pe_dropout_anneal_step": 2000, "model_type": ""}
    save_pretrained(loaded, tmp_path / "again")  # and they survive a round trip
    assert json.loads((tmp_path / "again" / "config.json").read_text())["pe_config"] == AUTHORS_PE_CONFIG


def test_the_authors_whole_config_json_loads(tmp_path):
    """Every field the authors' conversion writes, outer Olmo2Config and nested PEConfig, beside their weights."""
    from poslens.run.provenance import model_record

    model = tiny_repo("repo")
    save_pretrained(model, tmp_path / "m")
    authors = authors_olmo2_config(model)
    assert len(authors) == 23 and len(authors["pe_config"]) == 8
    (tmp_path / "m" / "config.json").write_text(json.dumps(authors))
    loaded = load(tmp_path / "m")
    ids = torch.randint(0, 257, (2, 13), generator=torch.Generator().manual_seed(3))
    _, state = export(model)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids), model(ids))
        torch.testing.assert_close(loaded(ids), reference_logits(state, authors, ids), atol=2e-4, rtol=2e-4)
    assert loaded.position_modes() == ["rope", "repo", "repo"]
    assert model_record(loaded)["training_only_config"] == {"dynamic_pe_init_pdrop": 0.8,
                                                            "dynamic_pe_dropout_anneal_step": 2000, "model_type": ""}


@pytest.mark.parametrize("field, value, message", [
    ("dynamic_pe_init_pdrop", "high", "dynamic_pe_init_pdrop='high' is not a probability"),
    ("dynamic_pe_init_pdrop", 1.5, "dynamic_pe_init_pdrop=1.5 is not a probability"),
    ("dynamic_pe_dropout_anneal_step", -3, "dynamic_pe_dropout_anneal_step=-3 is not a step count"),
    ("dynamic_pe_clamp", 4, "pe_config field 'dynamic_pe_clamp' is not one poslens understands"),
])
def test_pe_config_fields_are_still_checked(tmp_path, field, value, message):
    save_pretrained(tiny_repo("repo"), tmp_path / "m")
    _edit_config(tmp_path / "m", lambda c: c["pe_config"].update({field: value}))
    with pytest.raises(CheckpointError, match=message):
        load(tmp_path / "m")
