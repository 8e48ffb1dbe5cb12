"""The generic Hugging Face family: ten architectures written by transformers, loaded by ``interp.load``,
checked against transformers' own forward (eager attention) and run through an analysis each."""

import json

import numpy as np
import pytest
import torch

import interp
from analyses.ap_spectrum import ap_spectrum
from analyses.attention_mass import answer_attention
from analyses.positions import position_ranges
from corpora.niah import niah_samples
from interp.capabilities import Capability, CapabilityError
from interp.families.hf.checkpoints import is_generic_hf_dir, load_generic, save_generic
from interp.families.hf.model import HFModel
from interp.hook_docs import models
from interp.loading import CheckpointError
from interp.tokenizers import ByteTokenizer
from tests.hf_helpers import CONFIGS, LEARNED, ROTARY, reference, write_tiny_hf

TOKENS = torch.tensor([[5, 17, 250, 3, 99, 42, 7, 7, 128, 64, 33, 200], [9, 8, 7, 6, 5, 4, 3, 260, 261, 262, 11, 12]])


def _rel(a, b):
    return float((a - b).abs().max().detach() / b.abs().max().detach())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {kind: root / kind for kind in CONFIGS if write_tiny_hf(kind, root / kind) is not None}


def _load(kind, path):
    # olmo2, llama and plain BertModel directories are claimed by the hand-written families; the generic loader reads
    # them too
    return load_generic(path) if kind in ("olmo2", "llama", "bert") else interp.load(path)


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_forward_patterns_and_capabilities_match_transformers(kind, checkpoints):
    model, ref = _load(kind, checkpoints[kind]), reference(kind, checkpoints[kind])
    assert isinstance(model, HFModel) and model.family == "hf" and model.undocumented_hooks() == []
    with torch.no_grad():
        out = ref(input_ids=TOKENS, output_attentions=True, output_hidden_states=True)
        logits, cache = model.run_with_cache(TOKENS)
    expected = out.last_hidden_state if kind == "bert" else out.logits
    assert _rel(logits, expected) < 1e-4
    for layer in range(2):
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_pattern"], out.attentions[layer],
                                   atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(cache[f"blocks.{layer}.hook_resid_pre"], out.hidden_states[layer],
                                   atol=1e-5, rtol=1e-4)
    heads = ({Capability.CAUSAL_LM} if kind not in ("bert", "bert-mlm")
             else {Capability.MASKED_LM} if kind == "bert-mlm" else set())
    position = {Capability.POSITIONS, Capability.ROTARY} if kind in ROTARY else {Capability.AP_STREAM}
    assert model.capabilities == {Capability.ATTENTION, Capability.HIDDEN_STATES} | heads | position
    if kind in ROTARY:
        pos = cache["blocks.1.attn.hook_positions"]
        assert pos.shape == (2, 4, 12) and torch.equal(pos, torch.arange(12.0).expand(2, 4, 12))
    else:
        table = {"gpt2": "transformer.wpe.weight",
                 "opt": "model.decoder.embed_positions.weight"}.get(kind, "embeddings.position_embeddings.weight")
        weight = {k.removeprefix("bert."): v for k, v in ref.state_dict().items()}[table]
        assert torch.equal(model.ap_embedding_matrix(), weight[2:] if kind == "opt" else weight)
        assert model.ap_embedding_matrix().shape[0] == 512


@pytest.mark.parametrize("kind", ["opt", "gpt2", "llama"])
def test_every_hook_is_batch_by_position_and_the_residual_decomposes(kind, checkpoints):
    """OPT runs its MLP on flattened tokens ``[batch * pos, d]`` and has no MLP module: its ``mlp.hook_pre`` /
    ``hook_post``, ``hook_mlp_out``, ``hook_resid_mid`` and ``ln2`` hooks still fire ``[batch, pos, ...]`` as
    TransformerLens documents them; the residual decomposes (pre + attn = mid, mid + mlp = post, the neurons' outputs
    sum to the MLP's) and an edit of ``hook_resid_mid`` reaches the layer's output."""
    model = _load(kind, checkpoints[kind])
    tokens = TOKENS[:, :9] % model.d_vocab
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    assert {f"blocks.0.mlp.{h}" for h in ("hook_pre", "hook_post")} | {"blocks.0.hook_mlp_out",
                                                                       "blocks.0.hook_resid_mid"} <= set(cache.keys())
    for name, value in cache.items():
        assert tuple(value.shape[:2]) in ((2, 9), (2, model.n_heads)), (name, tuple(value.shape))
    for l in range(model.n_layers):
        torch.testing.assert_close(cache["resid_pre", l] + cache["attn_out", l], cache["resid_mid", l])
        torch.testing.assert_close(cache["resid_mid", l] + cache["mlp_out", l], cache["resid_post", l])
        neurons = cache[f"blocks.{l}.mlp.hook_post"] @ model.blocks[l].mlp.W_out + model.blocks[l].mlp.b_out
        torch.testing.assert_close(neurons, cache["mlp_out", l], atol=1e-5, rtol=1e-4)
    shift = torch.randn(model.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.hooks(fwd_hooks=[("blocks.0.hook_resid_mid", lambda x, hook: x + shift)]):
        _, edited = model.run_with_cache(tokens)
    torch.testing.assert_close(edited["resid_mid", 0] + edited["mlp_out", 0], edited["resid_post", 0])
    torch.testing.assert_close(edited["resid_mid", 0], cache["resid_mid", 0] + shift)


def test_a_base_bert_gets_no_head_and_no_lm_capability(checkpoints):
    model = load_generic(checkpoints["bert"])
    assert type(model.hf).__name__ == "BertModel" and model.head is None
    with pytest.raises(CapabilityError, match="next-token logits"):
        model.generate([5, 6], 2)


@pytest.mark.parametrize("kind", ["llama", "mistral", "olmo2", "gpt_neox", "phi3"])
def test_position_ranges_on_rotary_models_is_n_minus_one(kind, checkpoints):
    model = _load(kind, checkpoints[kind])
    model.tokenizer = ByteTokenizer()
    df = position_ranges(model, n_docs=2, length=200, source="wiki")
    assert len(df) == 2 * 2 * 4 and (df["d"] == df["n_tokens"] - 1).all() and (df["z_min"] == 0).all()


@pytest.mark.parametrize("kind", sorted(LEARNED))
def test_ap_spectrum_reads_the_learned_table(kind, checkpoints):
    df = ap_spectrum(interp.load(checkpoints[kind]), n_components=4)
    assert df["component"].max() == 4 and 0 < df["cumulative"].max() <= 1 + 1e-9


@pytest.mark.parametrize("kind", ["qwen2", "gpt2", "gemma2"])
def test_attention_mass_streams_the_same_rows_as_the_full_pattern(kind, checkpoints):
    model = _load(kind, checkpoints[kind])
    model.tokenizer = ByteTokenizer()
    s = niah_samples(model.tokenizer, 1, 260, seed=0, preamble=False)[0]
    seq = torch.tensor([s.token_ids + s.answer_ids])
    rows = torch.arange(len(s.token_ids) - 1, seq.shape[1] - 1)
    full_logits, cache = model.run_with_cache(seq, names_filter=lambda n: n.endswith("hook_pattern"))
    shapes = []
    model.add_hook(lambda n: n.endswith("hook_pattern"), lambda t, hook: shapes.append(tuple(t.shape)))
    with model.query_rows(rows):
        streamed_logits, streamed = model.run_with_cache(seq, names_filter=lambda n: n.endswith("hook_pattern"))
    model.reset_hooks()
    assert shapes == [(1, 4, len(rows), seq.shape[1])] * 2
    assert _rel(streamed_logits, full_logits) < 1e-5
    for layer in range(2):
        name = f"blocks.{layer}.attn.hook_pattern"
        torch.testing.assert_close(streamed[name], cache[name][:, :, rows], atol=1e-6, rtol=1e-5)
    got = answer_attention(model, s.token_ids, s.answer_ids, s.parts)
    parts = np.concatenate([s.parts, np.full(len(s.answer_ids), -1)])
    expected = cache["blocks.1.attn.hook_pattern"][0][:, rows][..., parts == 1].sum(-1).mean(-1)
    torch.testing.assert_close(got[1, :, 1], expected, atol=1e-5, rtol=1e-5)


def test_editing_pattern_rows_changes_only_those_rows(checkpoints):
    model = interp.load(checkpoints["llama"])
    rows = torch.tensor([3, 7])
    clean = model(TOKENS[:1])

    def to_first_token(pattern, hook):
        out = torch.zeros_like(pattern)
        out[..., 0] = 1
        return out

    with model.query_rows(rows), model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", to_first_token)]):
        edited = model(TOKENS[:1])
    changed = (edited - clean).abs().amax(-1)[0] > 1e-5
    assert changed.tolist() == [i in (3, 7) for i in range(12)]


def test_save_generic_round_trips_and_refuses_to_overwrite(checkpoints, tmp_path):
    model = interp.load(checkpoints["gpt2"])
    interp.save(model, tmp_path / "copy")
    again = interp.load(tmp_path / "copy")
    assert again.capabilities == model.capabilities and torch.equal(again(TOKENS), model(TOKENS))
    assert json.loads((tmp_path / "copy" / "config.json").read_text())["model_type"] == "gpt2"
    with pytest.raises(FileExistsError, match="already holds"):
        save_generic(model, tmp_path / "copy")


def test_a_checkpoint_missing_its_head_is_refused_not_randomly_filled(tmp_path):
    write_tiny_hf("bert", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(CheckpointError, match="missing keys.*cls.predictions"):
        interp.load(tmp_path)


# unknown to transformers / known, no bridge adapter
@pytest.mark.parametrize("model_type", ["my_new_arch", "distilbert"])
def test_a_type_the_bridge_does_not_know_is_refused_by_name(model_type, tmp_path):
    from transformers import DistilBertConfig

    config = (DistilBertConfig(dim=64, n_layers=2, n_heads=4).to_dict() if model_type == "distilbert"
              else {"hidden_size": 8})
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    assert not is_generic_hf_dir(tmp_path)
    with pytest.raises(CheckpointError, match=f"model_type '{model_type}' is not one poslens loads"):
        interp.load(tmp_path)


def test_the_family_is_in_the_readme_tables():
    assert HFModel in {type(m) for m in models()}


@pytest.mark.filterwarnings("error::FutureWarning")  # the cache is passed under the name this transformers reads
@pytest.mark.parametrize("kind", ["llama", "gpt2", "gemma2"])
def test_kv_cache_decoding_matches_transformers_generate(kind, checkpoints):
    model, ref = _load(kind, checkpoints[kind]), reference(kind, checkpoints[kind])
    prompts = [[5, 17, 250, 3, 99, 42], [9, 8, 7, 6, 5, 4]]
    expected = ref.generate(torch.tensor(prompts), max_new_tokens=6, do_sample=False, pad_token_id=0,
                            eos_token_id=None)[:, 6:]
    got = model.generate_batch(prompts, 6, budgets=[6, 3])
    assert got == [expected[0].tolist(), expected[1, :3].tolist()]
    stop = expected[0, 2].item()
    assert model.generate(prompts[0], 6, stop_ids=(stop,)) \
        == expected[0].tolist()[: expected[0].tolist().index(stop) + 1]


def test_a_plain_olmo2_directory_read_by_the_repo_family_matches_transformers(checkpoints):
    """transformers 5 writes rope_theta inside rope_parameters; the RePo family must read it, not default it."""
    model, ref = interp.load(checkpoints["olmo2"]), reference("olmo2", checkpoints["olmo2"])
    assert model.family == "repo"
    with torch.no_grad():
        assert _rel(model(TOKENS), ref(input_ids=TOKENS).logits) < 1e-4


def test_a_deep_copy_fires_its_own_hooks(tmp_path):
    """transformers' modules reach poslens' hook points through partials that a deep copy copies with the model:
    a copy (``interp.controls.shuffled_weights``) fires its own hooks, never the original's."""
    import copy

    from interp.controls import shuffled_weights

    write_tiny_hf("qwen2", tmp_path / "m")
    model = interp.load(tmp_path / "m")
    ids = torch.randint(3, 250, (1, 6))
    for twin in (copy.deepcopy(model), shuffled_weights(model)):
        fired = []
        model.add_hook("blocks.1.attn.hook_pattern", lambda p, hook: fired.append("original"))
        twin.add_hook("blocks.1.attn.hook_pattern", lambda p, hook: fired.append("copy"))
        twin.add_hook("hook_embed", lambda e, hook: fired.append("copy embed"))
        with torch.no_grad():
            twin(ids)
        model.reset_hooks()
        assert fired == ["copy embed", "copy"]


def test_a_bert_head_directory_with_its_vocab_saves_and_loads_back_with_transformers_tokenizer(tmp_path):
    """The generic family reads a BERT directory's vocab.txt with transformers' own tokenizer and writes it back."""
    from transformers import BertTokenizer

    from interp.tokenizers import HFTokenizer

    source = tmp_path / "bert-mlm"
    write_tiny_hf("bert-mlm", source)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s"]
    (source / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizer(str(source / "vocab.txt")).save_pretrained(source)
    model = interp.load(source)
    assert model.family == "hf" and isinstance(model.tokenizer, HFTokenizer)
    ids = model.tokenizer.encode("the cats sat")
    interp.save(model, tmp_path / "copy")
    again = interp.load(tmp_path / "copy")
    assert isinstance(again.tokenizer, HFTokenizer) and again.tokenizer.encode("the cats sat") == ids
    (tmp_path / "copy" / "model.safetensors").unlink()
    (tmp_path / "copy" / "config.json").unlink()
    with pytest.raises(FileExistsError, match=r"copy already holds a checkpoint \(.*tokenizer_config\.json"):
        interp.save(model, tmp_path / "copy")  # the tokenizer files alone are the user's too


def test_a_transformers_model_in_memory_is_copied_not_changed():
    """``interp.load(module)``: the same logits as the module, provenance that says it came from memory, and the
    caller's model untouched (its attention implementation, its weights, its device) by the load or by edits of the
    result."""
    from tests.hf_helpers import tiny_hf

    module = tiny_hf("gpt2")
    attention = module.config._attn_implementation
    before = {k: v.clone() for k, v in module.state_dict().items()}
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(0))
    model = interp.load(module)
    assert model.family == "hf" and model.source["path"] is None
    assert model.source["format"] == ("huggingface GPT2LMHeadModel directory (generic family), "
                                      "from a transformers model in memory")
    with torch.no_grad():
        torch.testing.assert_close(model(ids), module(ids).logits, atol=2e-5, rtol=1e-4)
        next(model.parameters()).add_(1.0)
    assert module.config._attn_implementation == attention
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())
    with pytest.raises(CheckpointError, match="GPT2LMHeadModel: a model in memory holds no tokenizer files"):
        interp.load_tokenizer(module)


def test_a_poslens_directory_of_a_family_that_reads_none_is_refused_by_name(tmp_path):
    (tmp_path / "poslens.json").write_text(json.dumps({"format": "poslens-checkpoint", "family": "hf", "config": {}}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"poslens\.json: names the hf family, "
                                              r"which does not read poslens directories"):
        interp.load(tmp_path)
