"""Fused span masses (part indicators as values of a fused attention) against the materialised pattern."""

import pytest
import torch
from transformers import LlamaConfig as HFLlamaConfig
from transformers import LlamaForCausalLM

from interp.attention import KVCache, StopForward, collecting_spans, decoding, model_span_masses, span_masses
from interp.families.llama.model import LlamaTransformer
from tests.helpers import tiny_model
from tests.integration.interp.test_families import example, examples
from tests.repo_helpers import tiny_repo

ROW_SETS = ([0], [5, 6, 7, 8, 9, 10, 11, 12], [3, 17, 40, 59])


def _pattern(q, k, scale, causal, bias=None, offset=0):
    rep = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(rep, 1).transpose(-1, -2) * scale
    if bias is not None:
        s = s + bias
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        visible = torch.arange(n_k)[None] <= torch.arange(n_q)[:, None] + offset
        s = s.masked_fill(~visible, float("-inf"))
    return s.softmax(-1)


def _by_labels(pattern, labels, n_parts):
    return torch.stack([pattern[..., labels == p].sum(-1) for p in range(n_parts)], -1)


@pytest.mark.parametrize("kv_heads", [6, 2, 1])
@pytest.mark.parametrize("rows", ROW_SETS)
def test_span_masses_equal_the_pattern_summed_over_each_part(kv_heads, rows):
    g = torch.Generator().manual_seed(kv_heads)
    q, k = torch.randn(2, 6, 60, 16, generator=g), torch.randn(2, kv_heads, 60, 16, generator=g)
    labels = torch.randint(-1, 4, (60,), generator=g)  # -1 and 3 lie outside the 3 parts: they count nowhere
    rows = torch.tensor(rows)
    got = span_masses(q, k, labels, 3, scale=0.3, rows=rows)
    expected = _by_labels(_pattern(q, k, 0.3, True)[:, :, rows], labels, 3)
    assert got.shape == (2, 6, len(rows), 3)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    if len(rows) > 1:  # the unlabelled keys' mass is missing, not renormalised away
        assert (got.sum(-1) < 1 - 1e-3).any()


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_span_masses_with_bias_noncausal_and_a_cache_offset(kv_heads):
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 4, 10, 8, generator=g), torch.randn(1, kv_heads, 30, 8, generator=g)
    bias = torch.randn(1, 4, 10, 30, generator=g)
    labels = torch.randint(0, 2, (30,), generator=g)
    rows = torch.tensor([0, 4, 9])
    for causal in (True, False):
        got = span_masses(q, k, labels, 2, scale=0.5, causal=causal, bias=bias, rows=rows)
        expected = _by_labels(_pattern(q, k, 0.5, causal, bias, offset=20)[:, :, rows], labels, 2)
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_span_masses_refuse_mismatched_shapes():
    q, k = torch.randn(1, 6, 5, 8), torch.randn(1, 4, 5, 8)
    with pytest.raises(ValueError, match="cannot share"):
        span_masses(q, k, torch.zeros(5, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="key_parts has shape"):
        span_masses(q, k[:, :2], torch.zeros(4, dtype=torch.long), 2)


def _tiny_llama(kv_heads=2):
    torch.manual_seed(0)
    cfg = HFLlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                        num_key_value_heads=kv_heads, vocab_size=300, max_position_embeddings=256, rope_theta=10000.0)
    hf = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)
    return LlamaTransformer.from_hf(hf)


VARIANTS = {  # hand-built beside the registry's examples: position modes and head sharing no example shows, and llama
    # read from transformers weights; their weights spread so that every head differs
    "rope": lambda: tiny_repo("rope"),
    "rope-gqa": lambda: tiny_repo("rope", num_key_value_heads=2),
    "nope": lambda: tiny_repo("nope", num_key_value_heads=1),
    "increments-alibi": lambda: tiny_model("alibi"),
    "increments-pope": lambda: tiny_model("pope"),
    "llama-gqa": _tiny_llama,
}


def models(extra: dict | None = None) -> list:
    """``pytest.param(family, index)`` of every registered family's every example (``test_families.examples``: a
    plug-in family registered before collection is in it), then ``pytest.param(name, None)`` of ``extra``'s
    hand-built models."""
    return [*examples(), *(pytest.param(name, None, id=name) for name in extra or {})]


def build(family: str, index, extra: dict):
    """``extra[family]()``, or the registry's example with its weights spread as the hand-built helpers spread theirs
    (every norm near 1, every other tensor 0.2 standard normal): every head differs and no pattern is near uniform."""
    if index is None:
        return extra[family]()
    model = example(family, index)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g).to(p.dtype)
            p.copy_(1 + 0.1 * noise if "norm" in name.lower() else 0.2 * noise)
    return model


@pytest.mark.parametrize("family,index", models(extra=VARIANTS))
def test_every_family_gives_the_pattern_masses_without_materialising(family, index):
    """Every example of every registered family (causal or bidirectional: the masses are of the model's own pattern),
    and ``VARIANTS``. Ids start at 1 (an encoder refuses its pad id 0); a model shorter than 60 tokens reads its
    ``max_seq_len``, the last row set's last row moved to its last token."""
    model = build(family, index, VARIANTS)
    n = min(60, model.max_seq_len)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(1, min(model.d_vocab, 256), (1, n), generator=g)
    labels = torch.randint(-1, 3, (n,), generator=g)
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    for rows in (torch.tensor(sorted({min(r, n - 1) for r in rows})) for rows in ROW_SETS):
        with torch.no_grad(), collecting_spans(rows, labels, 3) as request:
            model(tokens)
        assert len(request.masses) == model.n_layers  # every attention honoured the request itself
        got = model_span_masses(model, tokens, rows, labels, 3)
        for layer in range(model.n_layers):
            full = cache[f"blocks.{layer}.attn.hook_pattern"][:, :, rows]
            expected = _by_labels(full, labels, 3)
            torch.testing.assert_close(got[layer], expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(request.masses[f"blocks.{layer}.attn.hook_pattern"], expected, atol=1e-5,
                                       rtol=1e-5)


def test_the_forward_stops_after_the_last_attention_and_pattern_hooks_still_see_their_rows():
    model = tiny_repo("rope")
    tokens = torch.randint(0, 256, (1, 40))
    labels = (torch.arange(40) >= 20).long()
    fired = []
    model.add_hook(f"blocks.{model.n_layers - 1}.hook_mlp_out", lambda t, hook: fired.append(hook.name))
    model_span_masses(model, tokens, [30, 31], labels, 2)
    assert fired == []

    def onto_first_key(pattern, hook):
        fired.append(tuple(pattern.shape))
        out = torch.zeros_like(pattern)
        out[..., 0] = 1
        return out

    model.add_hook(lambda n: n.endswith("hook_pattern"), onto_first_key)
    got = model_span_masses(model, tokens, [30, 31], labels, 2)
    model.reset_hooks()
    assert fired == [(1, 4, 2, 40)] * model.n_layers
    torch.testing.assert_close(got[..., 0], torch.ones(model.n_layers, 1, 4, 2))  # the edited pattern is what is summed
    torch.testing.assert_close(got[..., 1], torch.zeros(model.n_layers, 1, 4, 2))


def test_stop_after_raises_once_that_layer_is_recorded_and_labels_must_match_the_keys():
    model = tiny_repo("repo")
    tokens = torch.randint(0, 256, (1, 20))
    with pytest.raises(StopForward), \
            collecting_spans([3], torch.zeros(20), 1, stop_after="blocks.1.attn.hook_pattern") as r:
        model(tokens)
    assert sorted(r.masses) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    with pytest.raises(ValueError, match="one label per token"):
        model_span_masses(model, tokens, [3], torch.zeros(19), 1)
    with pytest.raises(ValueError, match="key_parts has shape"), decoding(KVCache()), \
            collecting_spans([0], torch.zeros(20), 1):
        model(tokens[:, :5])
