"""All-row attention statistics (``interp.attention.collecting_statistics`` / ``model_statistics``) against statistics
computed in float64 from the full pattern: the model's own hooked pattern and transformers' eager ``output_attentions``;
and planted patterns whose statistics are known in closed form."""

import math

import pytest
import torch

from interp.attention import STATISTICS, KVCache, attend, collecting_statistics, decoding, model_statistics
from interp.loading import load
from tests.attention_inputs import eager_attention, named_hook, random_attention
from tests.encoder_helpers import tiny_encoder
from tests.hf_helpers import reference, write_tiny_hf
from tests.integration.interp.test_span_masses import VARIANTS, build, models
from tests.repo_helpers import tiny_repo

ALL = tuple(STATISTICS)
NO_SPANS = tuple(s for s in ALL if s != "span_mass")
FIRST, WINDOWS, N_PARTS = (1, 4), (0, 3, 9), 3


def expected(pattern: torch.Tensor, offset: int = 0, parts: torch.Tensor | None = None, *, first=FIRST,
             windows=WINDOWS) -> dict[str, torch.Tensor]:
    """Every statistic of full pattern rows ``[batch, head, q, k]``, in float64, written from the definitions."""
    p = pattern.double()
    n_q, n_k = p.shape[-2:]
    q_abs = torch.arange(n_q) + offset
    d = (q_abs[:, None] - torch.arange(n_k)[None]).abs().double()
    out = {"first_mass": torch.stack([p[..., :f].sum(-1) for f in first], -1),
           "self_mass": p[..., torch.arange(n_q), q_abs.clamp(max=n_k - 1)],
           "previous_mass": torch.where(q_abs > 0, p[..., torch.arange(n_q), (q_abs - 1).clamp(min=0)], 0.0),
           "window_mass": torch.stack([(p * (d <= w)).sum(-1) for w in windows], -1),
           "far_mass": torch.stack([(p * (d > w)).sum(-1) for w in windows], -1)}
    mean = (p * d).sum(-1)
    out["distance_mean"], out["distance_std"] = mean, ((p * d * d).sum(-1) - mean ** 2).clamp(min=0).sqrt()
    out["entropy"] = -torch.where(p > 0, p * p.log(), 0.0).sum(-1)
    out["top_key"], out["top_mass"] = p.argmax(-1), p.max(-1).values
    if parts is not None:
        out["span_mass"] = torch.stack([p[..., parts == j].sum(-1) for j in range(N_PARTS)], -1)
    return out


def assert_statistics(got: dict, want: dict, pattern: torch.Tensor, atol=1e-5):
    assert set(got) == set(want)
    for name, value in want.items():
        if name == "top_key":  # ties (uniform rows) may pick any of the tied keys: compare where the top is clear
            top2 = pattern.double().topk(min(2, pattern.shape[-1]), -1).values
            clear = (top2[..., 0] - top2[..., -1] > 1e-4) | (pattern.shape[-1] == 1)
            assert torch.equal(got[name][clear], value[clear]), name
            continue
        scale = max(1.0, float(value.abs().max())) if name.startswith("distance") else 1.0
        # near-one-hot rows: the square root magnifies float32 noise; compare variances
        if name == "distance_std":
            got_var, want_var = got[name].double() ** 2, value ** 2
            torch.testing.assert_close(got_var, want_var, atol=atol * scale ** 2, rtol=atol,
                                       msg=lambda m: f"variance: {m}")
            continue
        torch.testing.assert_close(got[name].double(), value, atol=atol * scale, rtol=atol,
                                   msg=lambda m, name=name: f"{name}: {m}")


CASES = {
    "causal-gqa": dict(causal=True, kv=2),
    "causal-mqa-cache-offset": dict(causal=True, kv=1, offset=9),
    "bidirectional": dict(causal=False, kv=4),
    "causal-bias": dict(causal=True, kv=4, bias="float"),
    "bidirectional-bool-mask": dict(causal=False, kv=2, bias="bool"),
    "causal-softcap": dict(causal=True, kv=2, softcap=3.0),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("chunk_bytes", [1, 5000, 1 << 30], ids=["row-by-row", "a-few-rows", "one-chunk"])
def test_every_row_every_statistic_equals_the_eager_pattern_and_the_output_is_unchanged(case, chunk_bytes):
    c = CASES[case]
    n_q, offset = 23, c.get("offset", 0)
    q, k, v, bias = random_attention(len(case) + chunk_bytes % 97, n_q=n_q, offset=offset, kv=c["kv"],
                                     bias=c.get("bias"))
    parts = torch.randint(-1, N_PARTS, (n_q + offset,), generator=torch.Generator().manual_seed(chunk_bytes % 89))
    kw = dict(causal=c["causal"], bias=bias, scale=0.4, softcap=c.get("softcap"))
    plain = attend(q, k, v, **kw)
    with collecting_statistics(ALL, first=FIRST, windows=WINDOWS, key_parts=parts, n_parts=N_PARTS,
                               chunk_bytes=chunk_bytes) as request:
        z = attend(q, k, v, hook_pattern=named_hook("blocks.0.attn.hook_pattern"), **kw)
    pattern, z_ref = eager_attention(q, k, v, **kw)
    torch.testing.assert_close(z.double(), z_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(z, plain, atol=1e-5, rtol=1e-5)
    got = request.results["blocks.0.attn.hook_pattern"]
    assert got["entropy"].shape == (2, 4, n_q) and got["window_mass"].shape == (2, 4, n_q, len(WINDOWS))
    assert_statistics(got, expected(pattern, offset, parts), pattern)


def test_sampled_rows_give_those_rows_of_the_all_row_statistics():
    q, k, v, _ = random_attention(3, n_q=40, batch=1, d_v=8, q_scale=1.0)
    with collecting_statistics(NO_SPANS, first=FIRST, windows=WINDOWS, rows=[39, 3, 17, 3],
                               chunk_bytes=3000) as request:
        attend(q, k, v, causal=True, hook_pattern=named_hook("l0"))
    pattern, _ = eager_attention(q, k, v, causal=True, scale=1 / math.sqrt(8))
    rows = torch.tensor([3, 17, 39])
    want = {s: t[:, :, rows] for s, t in expected(pattern).items() if s != "span_mass"}
    assert_statistics(request.results["l0"], want, pattern[:, :, rows])


def test_planted_uniform_and_one_hot_patterns_give_their_closed_forms():
    n = 50
    q = torch.zeros(1, 2, n, 4)  # every score 0: each row attends uniformly to its q + 1 visible keys
    k, v = torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 4)
    with collecting_statistics(NO_SPANS, first=(1, 10), windows=(2,), chunk_bytes=2000) as request:
        attend(q, k, v, causal=True, hook_pattern=named_hook("uniform"))
    got = request.results["uniform"]
    m = torch.arange(n, dtype=torch.float64) + 1  # keys each row sees
    torch.testing.assert_close(got["entropy"][0, 0].double(), m.log(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got["first_mass"][0, 1, :, 1].double(), (10 / m).clamp(max=1), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got["distance_mean"][0, 0].double(), (m - 1) / 2, atol=1e-4, rtol=1e-6)
    torch.testing.assert_close(got["distance_std"][0, 0].double(), ((m ** 2 - 1) / 12).sqrt(), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(got["window_mass"][0, 0, :, 0].double(), m.clamp(max=3) / m, atol=1e-6, rtol=1e-6)

    scores = torch.full((1, 2, n, n), -30.0)
    scores[..., 0] = 30.0  # a sink: every row on key 0
    with collecting_statistics(NO_SPANS, first=(1,), windows=(0,)) as request:
        attend(q, k, v, causal=True, scores=scores, hook_pattern=named_hook("sink"))
    got = request.results["sink"]
    assert torch.equal(got["top_key"], torch.zeros(1, 2, n, dtype=torch.long))
    torch.testing.assert_close(got["first_mass"][..., 0], torch.ones(1, 2, n))
    torch.testing.assert_close(got["distance_mean"][0, 0].double(), torch.arange(n, dtype=torch.float64), atol=1e-3,
                               rtol=1e-6)
    assert float(got["entropy"].max()) < 1e-6 and float(got["distance_std"].max()) < 1e-2


def test_requests_are_checked_before_any_work():
    with pytest.raises(ValueError, match="unknown \\['entropie'\\]"):
        collecting_statistics(["entropie"])
    with pytest.raises(ValueError, match="span_mass needs key_parts"):
        collecting_statistics(["span_mass"])
    with pytest.raises(ValueError, match="windows distances >= 0"):
        collecting_statistics(["window_mass"], windows=(-1,))
    model = tiny_repo("rope")
    with pytest.raises(ValueError, match="layers \\[7\\] outside 0..2"):
        model_statistics(model, torch.zeros(1, 5, dtype=torch.long), ["entropy"], layers=[7])
    with pytest.raises(IndexError, match="row 9 asked for, but this forward pass has 5"):
        model_statistics(model, torch.zeros(1, 5, dtype=torch.long), ["entropy"], rows=[9])


def _family_reference(model, tokens):
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    return [cache[f"blocks.{l}.attn.hook_pattern"] for l in range(model.n_layers)]


EXTRA = {**VARIANTS, "encoder-dstg": lambda: tiny_encoder("disentangled"),  # encoders with spread weights
         "encoder-rope": lambda: tiny_encoder("rope")}


@pytest.mark.parametrize("family,index", models(extra=EXTRA))
def test_every_family_gives_the_statistics_of_its_own_full_pattern(family, index):
    """Every example of every registered family, and ``EXTRA``'s hand-built models; 37 tokens, or a model's
    ``max_seq_len`` where that is shorter."""
    model = build(family, index, EXTRA)
    n = min(37, model.max_seq_len)
    g = torch.Generator().manual_seed(4)
    tokens = torch.randint(5, min(model.d_vocab, 256), (2, n), generator=g)
    parts = torch.randint(0, N_PARTS, (n,), generator=g)
    patterns = _family_reference(model, tokens)
    got = model_statistics(model, tokens, ALL, first=FIRST, windows=WINDOWS, key_parts=parts, n_parts=N_PARTS,
                           chunk_bytes=6000)
    assert got["entropy"].shape == (model.n_layers, 2, model.n_heads, n)
    for layer, pattern in enumerate(patterns):
        assert_statistics({s: t[layer] for s, t in got.items()}, expected(pattern, 0, parts), pattern)


@pytest.mark.parametrize("kind,overrides", [("llama", {}), ("qwen2", {}), ("gemma2", dict(sliding_window=6)),
                                            ("gpt2", {}), ("bert", {})])
def test_hf_family_statistics_equal_transformers_eager_attentions(kind, overrides, tmp_path):
    write_tiny_hf(kind, tmp_path, **overrides)
    model, eager = load(tmp_path), reference(kind, tmp_path)
    tokens = torch.randint(3, 300, (1, 29), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        patterns = eager(input_ids=tokens, output_attentions=True).attentions
    got = model_statistics(model, tokens, NO_SPANS, first=FIRST, windows=WINDOWS, chunk_bytes=4000)
    for layer, pattern in enumerate(patterns):
        assert_statistics({s: t[layer] for s, t in got.items()}, expected(pattern), pattern)


def test_gemma3_sliding_layers_are_bounded_by_their_window_and_the_global_layer_is_not(tmp_path):
    from tests.hf_helpers import saved_gemma3

    hf, model = saved_gemma3(tmp_path)
    tokens = torch.randint(3, 300, (1, 40), generator=torch.Generator().manual_seed(6))
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        patterns = hf(input_ids=tokens, output_attentions=True).attentions
    got = model_statistics(model, tokens, ["window_mass", "distance_mean", "top_key"], windows=(5,), chunk_bytes=3000)
    for layer, pattern in enumerate(patterns):
        want = expected(pattern)
        near = (torch.arange(40)[:, None] - torch.arange(40)[None]).abs() <= 5
        torch.testing.assert_close(got["window_mass"][layer, ..., 0].double(), (pattern.double() * near).sum(-1),
                                   atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got["distance_mean"][layer].double(), want["distance_mean"], atol=1e-4, rtol=1e-5)
    # sliding chunks start late
    every = model_statistics(model, tokens, NO_SPANS, first=FIRST, windows=WINDOWS, chunk_bytes=2000)
    for layer, pattern in enumerate(patterns):
        assert_statistics({s: t[layer] for s, t in every.items()}, expected(pattern), pattern)
    # 6 keys
    torch.testing.assert_close(got["window_mass"][:3], torch.ones_like(got["window_mass"][:3]), atol=1e-5, rtol=0)
    assert float(got["window_mass"][3, ..., 10:, 0].min()) < 0.99  # the global layer reaches past 5 tokens back


def test_statistics_under_a_kv_cache_read_the_new_rows_against_every_cached_key():
    model = tiny_repo("rope")
    tokens = torch.randint(5, 256, (1, 30), generator=torch.Generator().manual_seed(7))
    full = model_statistics(model, tokens, ["distance_mean", "entropy", "first_mass"])
    cache = KVCache()
    with torch.no_grad(), decoding(cache):
        model(tokens[:, :20])
        with collecting_statistics(["distance_mean", "entropy", "first_mass"]) as request:
            model(tokens[:, 20:])
    for layer in range(model.n_layers):
        got = request.results[f"blocks.{layer}.attn.hook_pattern"]
        for stat in got:
            torch.testing.assert_close(got[stat], full[stat][layer][:, :, 20:], atol=1e-5, rtol=1e-5)


def test_the_pass_stops_after_the_last_attention_and_edited_patterns_are_what_is_reduced():
    model = tiny_repo("rope")
    tokens = torch.randint(5, 256, (1, 16))
    fired = []
    model.add_hook(f"blocks.{model.n_layers - 1}.hook_mlp_out", lambda t, hook: fired.append(hook.name))

    def onto_first_key(pattern, hook):
        out = torch.zeros_like(pattern)
        out[..., 0] = 1
        return out

    model.add_hook(lambda n: n.endswith("hook_pattern"), onto_first_key)
    got = model_statistics(model, tokens, ["first_mass", "top_key", "distance_mean"])
    model.reset_hooks()
    assert fired == []
    torch.testing.assert_close(got["first_mass"][..., 0], torch.ones_like(got["first_mass"][..., 0]))
    torch.testing.assert_close(got["distance_mean"][0, 0, 0], torch.arange(16, dtype=torch.float32))


def test_asking_for_some_layers_runs_the_attentions_up_to_the_last_and_reads_statistics_of_those_alone():
    from interp.attention import recording_calls

    model = tiny_repo("rope")
    tokens = torch.randint(5, 256, (1, 21), generator=torch.Generator().manual_seed(8))
    full = model_statistics(model, tokens, NO_SPANS, first=FIRST, windows=WINDOWS)
    calls = []
    for layers, last in [([0], 0), ([1], 1), ([0, 2], 2)]:
        calls.clear()
        with recording_calls(lambda call: calls.append((call.name, call.statistics is not None))):
            got = model_statistics(model, tokens, NO_SPANS, first=FIRST, windows=WINDOWS, layers=layers)
        assert calls == [(f"blocks.{l}.attn.hook_pattern", l in layers) for l in range(last + 1)]
        for stat, value in got.items():
            assert value.shape[0] == len(layers)
            if layers == [0]:
                assert torch.equal(value, full[stat][:1]), stat
            elif stat != "top_key":  # the attentions without statistics give the output to float rounding
                torch.testing.assert_close(value, full[stat][layers], atol=1e-5 * (21 if "distance" in stat else 1),
                                           rtol=1e-5)
