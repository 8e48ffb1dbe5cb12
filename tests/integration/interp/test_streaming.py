"""Planted truth for ``interp.streaming``: a rolling KV cache against transformers' own forward passes on tiny random
models (a stream that fits in the cache is dense attention; one layer sees exactly the sinks and the recent tokens at
positions 0..C; more layers are transformers' token-by-token cache with StreamingLLM's eviction and re-rotation), in
chunks or token by token, through each family that streams."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from interp import attention
from interp.capabilities import CapabilityError
from interp.loading import load
from interp.streaming import RollingCache, check_streamable, recomputed_nll, stream_nll
from tests.hf_helpers import saved_gemma3, tiny_hf

N = 40


def _pair(kind="llama", family="llama", **overrides):
    """A tiny transformers model (the reference) and the same weights as a poslens model of ``family``: in float64 for
    poslens' own llama family, float32 in transformers' modules (the hf family)."""
    hf = tiny_hf(kind, **overrides)
    hf = hf.double() if family == "llama" else hf
    return hf, load(hf, family=family)


def _stream(seed=0):
    return torch.randint(3, 257, (N,), generator=torch.Generator().manual_seed(seed))


def _nll(logits, target) -> float:
    return float(F.cross_entropy(logits.double()[None], target[None]))


def _cache_kwarg(hf, cache):
    import inspect

    return {"cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values": cache}


@pytest.mark.parametrize("kind,family", [("llama", "llama"), ("qwen2", "hf"), ("gemma2", "hf")])
def test_a_cache_that_holds_the_whole_stream_is_dense_attention(kind, family):
    """Nothing is evicted, so every cache size and sink count gives transformers' loss on the whole stream (gemma2:
    sliding layers of 6 keys and soft-capped logits)."""
    hf, model = _pair(kind, family, **({"sliding_window": 6} if kind == "gemma2" else {}))
    x = _stream()
    with torch.no_grad():
        want = F.cross_entropy(hf(input_ids=x[None]).logits[0, :-1], x[1:], reduction="none").numpy()
    for cache, sinks, chunk in ((None, 0, 64), (None, 0, 1), (N, 4, 7), (100, 0, 16)):
        np.testing.assert_allclose(stream_nll(model, x, cache, sinks, chunk), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sinks", [0, 1, 4])
def test_one_layer_reads_the_sinks_and_the_recent_tokens_at_positions_0_to_the_cache_size(sinks):
    """One layer's keys and values come from the tokens alone, so a full cache of C is exactly a fresh forward pass over
    the first ``sinks`` tokens, the C - sinks tokens before the current one and the current one, at positions 0..C."""
    C = 12
    hf, model = _pair(num_hidden_layers=1)
    x = _stream(1)
    got = stream_nll(model, x, C, sinks, chunk=5)
    for i in range(C + 1, N - 1):  # the token read at i, with the cache full, predicts token i + 1
        seen = torch.cat([x[:sinks], x[i - (C - sinks):i + 1]])
        with torch.no_grad():
            want = _nll(hf(input_ids=seen[None]).logits[0, -1], x[i + 1])
        assert got[i] == pytest.approx(want, rel=1e-5, abs=1e-5), i
    assert np.abs(got[C + 1:] - stream_nll(model, x, None, 0)[C + 1:]).max() > 0.1  # and that is not dense attention


def _transformers_streaming(hf, x, C: int, sinks: int) -> np.ndarray:
    """StreamingLLM with transformers' own cache, one token at a time: each token at in-cache position min(i, C); once
    the cache holds C + 1 tokens the oldest after the sinks is dropped and the rest turned back by one position with
    transformers' rotary embedding and ``apply_rotary_pos_emb``."""
    from transformers import DynamicCache
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cache = DynamicCache(config=hf.config)
    out = []
    with torch.no_grad():
        for i in range(len(x) - 1):
            logits = hf(input_ids=x[i:i + 1][None], position_ids=torch.tensor([[min(i, C)]]), use_cache=True,
                        **_cache_kwarg(hf, cache)).logits
            out.append(_nll(logits[0, -1], x[i + 1]))
            for layer in cache.layers:
                if layer.keys.shape[-2] > C:
                    recent = layer.keys[:, :, sinks + 1:]
                    cos, sin = hf.model.rotary_emb(recent, torch.full((1, recent.shape[-2]), -1))
                    layer.keys = torch.cat([layer.keys[:, :, :sinks],
                                            apply_rotary_pos_emb(recent, recent, cos, sin)[0]], -2)
                    layer.values = torch.cat([layer.values[:, :, :sinks], layer.values[:, :, sinks + 1:]], -2)
    return np.array(out)


@pytest.mark.parametrize("sinks", [0, 2])
def test_two_layers_stream_as_transformers_cache_with_eviction_and_re_indexed_positions(sinks):
    C = 10
    hf, model = _pair()
    x = _stream(2)
    want = _transformers_streaming(hf, x, C, sinks)
    for chunk in (1, 3, 8):
        np.testing.assert_allclose(stream_nll(model, x, C, sinks, chunk), want, rtol=1e-5, atol=1e-5)
    hf, model = _pair("qwen2", "hf")  # transformers' own modules, through the hf family
    np.testing.assert_allclose(stream_nll(model, x, C, sinks, 4), _transformers_streaming(hf, x, C, sinks),
                               rtol=1e-5, atol=1e-6)
    if sinks:  # the sinks change what the tokens past the cache see
        assert np.abs(want - stream_nll(model, x, C, 0, 4))[C + 1:].max() > 0.01


def test_chunks_give_token_by_token_streaming_in_every_family_that_streams(tmp_path):
    """Each chunk of a stream rotates its keys from other positions than a token-by-token cache does, so a key turned by
    the wrong layer's frequencies would not agree across chunk sizes (Gemma 3's global layer: 8 times slower)."""
    from tests.repo_helpers import tiny_repo

    x = _stream(3)
    hf, gemma3 = saved_gemma3(tmp_path / "gemma3")
    assert gemma3.rotation(3).inv_freq[0] == pytest.approx(0.125) and gemma3.rotation(0).inv_freq[0] == 1.0
    with torch.no_grad():
        dense = F.cross_entropy(hf(input_ids=x[None]).logits[0, :-1], x[1:], reduction="none").numpy()
    np.testing.assert_allclose(stream_nll(gemma3, x, None, 0, 7), dense, rtol=1e-5, atol=1e-6)
    models = ((gemma3, 1e-5), (load(tiny_hf("gemma2", sliding_window=6), family="hf"), 1e-5),
              (tiny_repo("rope").double(), 1e-5))
    for model, tol in models:
        one = stream_nll(model, x, 11, 3, chunk=1)
        for chunk in (2, 8):
            np.testing.assert_allclose(stream_nll(model, x, 11, 3, chunk), one, rtol=tol, atol=tol / 10)
        assert np.isfinite(one).all() and np.abs(one - stream_nll(model, x, None, 0)).max() > 1e-3


def test_sliding_layers_read_the_cache_by_in_cache_distance():
    """With every layer sliding over 6 keys and a full cache of 10, the sinks (in-cache distance 10 - s) are out of
    every layer's reach: window and window + sinks are one model."""
    hf, model = _pair("mistral", "hf", sliding_window=6)
    x = _stream(4)
    np.testing.assert_allclose(stream_nll(model, x, 10, 4, 3), stream_nll(model, x, 10, 0, 3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,family", [("llama", "llama"), ("qwen2", "hf")])
def test_recomputation_is_a_fresh_forward_pass_over_the_window_before_each_token(kind, family):
    hf, model = _pair(kind, family)
    x = _stream(5)
    targets = [1, 5, 17, 39]
    got = recomputed_nll(model, x, 9, targets)
    with torch.no_grad():
        want = [_nll(hf(input_ids=x[max(0, g - 9):g][None]).logits[0, -1], x[g]) for g in targets]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="target 40 is not a token of the stream"):
        recomputed_nll(model, x, 9, [40])


def test_the_hf_family_decodes_through_poslens_kv_cache_with_its_sliding_windows():
    _, model = _pair("mistral", "hf", sliding_window=6)
    x = _stream(6)[None]
    with torch.no_grad():
        full = model(x)
        cache = attention.KVCache()
        with attention.decoding(cache):
            parts = [model(x[:, a:a + 7]) for a in range(0, N, 7)]
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-4, atol=1e-4)


def test_models_a_rolling_cache_cannot_re_index_are_refused():
    from tests.helpers import tiny_model
    from tests.repo_helpers import tiny_repo

    with pytest.raises(CapabilityError, match="needs a model with rotary positions"):
        check_streamable(tiny_repo("nope", start_layer=0), "streaming")
    with pytest.raises(CapabilityError, match="repo positions computed from the tokens"):
        check_streamable(tiny_repo("repo"), "streaming")
    with pytest.raises(CapabilityError, match="increments family's attention does not read"):
        check_streamable(tiny_model("rope"), "streaming")
    _, model = _pair()
    with pytest.raises(ValueError, match="sinks=4 must be at least 0 and fewer than cache_size=4"):
        RollingCache(model, 4, 4)
    with pytest.raises(ValueError, match="a chunk of 9 tokens is longer than the 8 recent tokens"):
        RollingCache(model, 10, 2).begin(0, 9)
