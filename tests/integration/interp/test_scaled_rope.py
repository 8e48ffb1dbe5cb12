"""Scaled RoPE checkpoints: each rope_type on tiny random checkpoints written by transformers' ``save_pretrained``,
loaded by poslens and checked against transformers' own forward (eager attention) and rotary module.

linear and llama3 on a llama directory land on the hand-written llama family; yarn, longrope, dynamic (any type
``interp.rope`` does not implement) on the generic hf family, which runs transformers' rotary embedding. Lengths run
past ``original_max_position_embeddings`` (yarn, longrope) and past ``max_position_embeddings`` (dynamic: where its
scaling starts), so the scaling is in the numbers compared; a model with the same weights and plain RoPE gives other
logits there, so the comparisons could fail."""

import json

import numpy as np
import pytest
import torch
import transformers as T

from interp.loading import CheckpointError, load
from interp.tokenizers import ByteTokenizer
from tests.hf_helpers import reread, spread_weights, tiny_gemma3

OMAX, MAXPOS, VOCAB = 16, 64, 300
SHORT, LONG, LONGER = 12, 40, 80  # LONGER passes MAXPOS, where dynamic scaling starts
ARCH = {"llama": (T.LlamaConfig, T.LlamaForCausalLM), "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM),
        "phi3": (T.Phi3Config, T.Phi3ForCausalLM)}
BANDS = 8  # head_dim 16
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(BANDS)],
            "long_factor": [1.5 + 0.5 * i for i in range(BANDS)], "original_max_position_embeddings": OMAX}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": OMAX}
CASES = {  # name: (architecture, rope parameters, family expected)
    "llama-linear": ("llama", {"rope_type": "linear", "factor": 4.0}, "llama"),
    "llama-llama3": ("llama", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": OMAX}, "llama"),
    "llama-yarn": ("llama", YARN, "hf"),
    "llama-dynamic": ("llama", {"rope_type": "dynamic", "factor": 4.0}, "hf"),
    "llama-longrope": ("llama", LONGROPE, "hf"),
    "qwen2-yarn": ("qwen2", {**YARN, "attention_factor": 1.3, "beta_fast": 16.0}, "hf"),
    "qwen2-dynamic": ("qwen2", {"rope_type": "dynamic", "factor": 2.0}, "hf"),
    "phi3-longrope": ("phi3", LONGROPE, "hf"),
}


def _config(arch, rope, theta=10000.0):
    config_cls, _ = ARCH[arch]
    extra = {"original_max_position_embeddings": OMAX} if arch == "phi3" else {}
    return config_cls(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=MAXPOS, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                      rope_parameters={**rope, "rope_theta": theta}, **extra)


def _write(name, directory, seed=0):
    """The case's checkpoint in Hugging Face's format; returns transformers' eager reading of it."""
    arch, rope, _ = CASES[name]
    torch.manual_seed(seed)
    return reread(spread_weights(ARCH[arch][1](_config(arch, rope))), directory)


def _close(got, want):
    """Equal to 1e-5 of the logits' scale (float32 attention kernels differ in the order they sum; here by up to 2.2e-5
    on logits up to 11 in size), where plain RoPE differs by more than 1e-2."""
    err, scale = float((got - want).abs().max()), float(want.abs().max())
    assert err <= 1e-5 * scale, f"logits differ by {err:.3g} (scale {scale:.3g})"


def _length(name):
    return LONGER if "dynamic" in name else LONG


def _ids(n, seed=1):
    return torch.randint(3, VOCAB, (1, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", CASES)
def test_each_rope_type_loads_on_its_family_and_gives_transformers_logits(name, tmp_path):
    arch, rope, family = CASES[name]
    ref = _write(name, tmp_path)
    model = load(tmp_path)
    assert model.family == family, f"{name}: expected the {family} family, got {model.family}"
    fmt, described = model.source["format"], model.describe()
    if family == "hf":
        assert f"rope_type {rope['rope_type']}" in described and "transformers' rotary embedding" in described
        declined = ("not the llama family's" in fmt
                    and f"rope_type '{rope['rope_type']}' is not one the llama family implements" in fmt)
        assert declined == (arch == "llama"), fmt  # a Qwen2 or Phi-3 directory was never the llama family's to take
        assert str(tmp_path / "config.json") in fmt or arch != "llama"
    else:
        assert f"{rope['rope_type']} scaling" in described and fmt == "huggingface llama directory"
    model.max_seq_len = LONGER
    plain = ARCH[arch][1](_config(arch, {"rope_type": "default"})).eval()
    plain.load_state_dict(ref.state_dict())
    with torch.no_grad():
        for n in (SHORT, _length(name)):
            ids = _ids(n)
            want = ref(ids).logits
            _close(model(ids), want)
        assert (plain(ids).logits - want).abs().max() > 1e-2  # the scaling is in the logits compared at the long length


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[2] == "hf"])
def test_the_rotation_follows_transformers_rotary_module_at_every_length(name, tmp_path):
    """The spec taken before a forward pass holds that pass's frequencies (dynamic and longrope change them with the
    length), the attention scaling transformers multiplies cos and sin by, and turns the model's own rotated queries
    back: one token repeated, every position's query turned back by its position is the first position's query."""
    _, rope, _ = CASES[name]
    ref = _write(name, tmp_path)
    model = load(tmp_path)
    model.max_seq_len = LONGER
    spec = model.rotation(1)
    assert spec.rope_type == rope["rope_type"] and spec.layout == "half_split"
    seen, frequencies = {}, []
    token = torch.full((1, _length(name)), 7)
    for n in (SHORT, _length(name)):
        with torch.no_grad(), model.hooks(fwd_hooks=[("blocks.1.attn.hook_rot_q",
                                                      lambda q, hook: seen.__setitem__("q", q))]):
            model(token[:, :n])
            ref(token[:, :n])
        rotary = ref.model.rotary_emb
        assert torch.equal(spec.inv_freq, rotary.inv_freq)
        cos, _ = rotary(torch.zeros(1, dtype=torch.float32), torch.arange(n)[None])
        assert spec.attention_scaling == pytest.approx(float(cos[0, 0, 0]), rel=1e-6) == rotary.attention_scaling
        back = spec.rotate(seen["q"], -torch.arange(n, dtype=torch.float32)[None])
        torch.testing.assert_close(back, back[:, :1].expand_as(back), atol=1e-4, rtol=1e-4)
        frequencies.append(spec.inv_freq.clone())
    changes = rope["rope_type"] in ("dynamic", "longrope")
    # the long pass ran with other frequencies exactly where it should
    assert (not torch.equal(*frequencies)) == changes
    if "attention_factor" in rope:
        assert spec.attention_scaling == pytest.approx(rope["attention_factor"])


def _gemma3(directory):
    """Gemma 3's two kinds of layer, each with its own rope: sliding layers plain (theta 1e4), the global layer yarn."""
    return reread(tiny_gemma3(2, {**YARN, "rope_theta": 1e6}, intermediate_size=96, vocab_size=VOCAB,
                              max_position_embeddings=MAXPOS), directory)


def _rotary(ref, layer_type=None):
    """transformers' frequencies and attention scaling for one kind of layer (after the last forward pass)."""
    rotary = ref.model.rotary_emb
    if layer_type is None:
        return rotary.inv_freq, rotary.attention_scaling, rotary.rope_type
    return (getattr(rotary, f"{layer_type}_inv_freq"), getattr(rotary, f"{layer_type}_attention_scaling"),
            rotary.rope_type[layer_type])


@pytest.mark.parametrize("name", ["llama-yarn", "phi3-longrope", "qwen2-dynamic", "llama-llama3", "gemma3"])
def test_rope_frequencies_reports_the_frequencies_and_scaling_transformers_ran(name, tmp_path):
    from analyses.rope_frequencies import rope_frequencies

    ref = _gemma3(tmp_path) if name == "gemma3" else _write(name, tmp_path)
    model = load(tmp_path)
    model.tokenizer = ByteTokenizer()  # ids 0..256 inside the vocabulary of 300
    model.max_seq_len = LONGER
    n = _length(name)
    df = rope_frequencies(model, n_docs=1, length=n, max_rows=16, niah_prompts=0)
    with torch.no_grad():
        ref(_ids(n))  # transformers' rotary module at the analysis' length
    bands = df[df["part"] == "bands"]
    types = getattr(model, "layer_types", None) or [None] * model.n_layers
    for layer in range(model.n_layers):
        rows = bands[(bands["layer"] == layer) & (bands["head"] == 0)].sort_values("band")
        inv_freq, scaling, kind = _rotary(ref, types[layer] if name == "gemma3" else None)
        want = np.sort(inv_freq.double().numpy())[::-1]
        np.testing.assert_array_equal(rows["frequency"].to_numpy(), want)  # read off the model, float32 exactly
        np.testing.assert_allclose(rows["wavelength"].to_numpy(), 2 * np.pi / want)
        assert rows["attention_scaling"].tolist() == [scaling] * BANDS and set(rows["rope_type"]) == {kind}
    if name == "gemma3":
        assert set(bands[bands["layer"] == 2]["rope_type"]) == {"yarn"} \
            and set(bands[bands["layer"] == 0]["rope_type"]) == {"default"}
        assert bands[bands["layer"] == 2]["attention_scaling"].iloc[0] > 1 \
            == bands[bands["layer"] == 0]["attention_scaling"].iloc[0]


def _edit(directory, fn):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    fn(config)
    path.write_text(json.dumps(config))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_rope_type_transformers_does_not_implement_is_refused_by_name(arch, tmp_path):
    _write("llama-yarn" if arch == "llama" else "qwen2-yarn", tmp_path)
    _edit(tmp_path, lambda c: c["rope_parameters"].update(rope_type="ntk-by-parts"))
    with pytest.raises(CheckpointError, match=rf"{tmp_path / 'config.json'}: "
                                              r"rope_parameters has rope_type 'ntk-by-parts', which transformers .* "
                                              r"does not implement \(it implements default, dynamic"):
        load(tmp_path)


def test_asking_the_llama_family_for_a_yarn_checkpoint_says_why_not(tmp_path):
    from interp.families.llama.model import LlamaTransformer

    ref = _write("llama-yarn", tmp_path)
    with pytest.raises(CheckpointError, match=r"the llama family does not read it: .*config.json: "
                                              r"rope_type 'yarn' is not one the llama family implements .* "
                                              r"load it without family= and the hf family reads it"):
        load(tmp_path, family="llama")
    with pytest.raises(CheckpointError, match="the llama family does not read it: LlamaForCausalLM: rope_type 'yarn'"):
        LlamaTransformer.from_hf(ref)
    model = load(ref)  # in memory: the generic family, on a copy
    assert model.family == "hf" and model.rotation(0).rope_type == "yarn"
    ids = _ids(LONG)
    with torch.no_grad():
        _close(model(ids), ref(ids).logits)


def test_a_deep_copy_follows_its_own_rotary_module(tmp_path):
    """``interp.controls`` and parallel runs copy models: a copy's long pass changes its own frequencies only."""
    import copy

    _write("phi3-longrope", tmp_path)
    model = load(tmp_path)
    twin, before = copy.deepcopy(model), model.rotation(0).inv_freq.clone()
    with torch.no_grad():
        twin(_ids(LONG))
    assert not torch.equal(twin.rotation(0).inv_freq, before) and torch.equal(model.rotation(0).inv_freq, before)
    assert twin.rotation(1).inv_freq is twin.rotation(0).inv_freq  # one rotary module, one set of frequencies
