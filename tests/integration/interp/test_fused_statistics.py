"""The fused statistics of ``interp.attention.StatisticsRequest``: the forward's own flash kernel gives the output and
each row's log-sum-exp, the masses on a few keys come from those keys' logits, and key-only statistics ride a second
flash call as value columns. Each statistic against the float64 softmax pattern written from its definition (random
inputs and transformers' eager ``output_attentions``), with the chunked path forbidden so the fused one is what ran; and
the output bit for bit the one ``attend`` gives without statistics."""

import pytest
import torch

from interp.attention import BACKENDS, attend, budget, collecting_statistics, mask, model_statistics, statistics
from interp.loading import load
from tests.attention_inputs import eager_attention, named_hook, random_attention
from tests.hf_helpers import reference, write_tiny_hf
from tests.integration.interp.test_attention_statistics import N_PARTS, assert_statistics, expected
from tests.repo_helpers import tiny_repo

FUSED = ("first_mass", "self_mass", "previous_mass", "window_mass", "span_mass")
FIRST, WINDOWS = (1, 4), (0, 3, 9)


class Instead:
    """A backend that serves what ``backend`` serves and runs ``run(call)`` instead."""

    def __init__(self, backend, run):
        self.name, self.reads_windows, self.backend, self.run = backend.name, backend.reads_windows, backend, run

    def conditions(self):
        return self.backend.conditions()

    def serves(self, call) -> bool:
        return self.backend.serves(call)

    def __call__(self, call):
        return self.run(call)


@pytest.fixture
def chunked_forbidden(monkeypatch):
    def refuse(call):
        raise AssertionError("the chunked statistics ran where the fused kernel serves every statistic")

    monkeypatch.setitem(BACKENDS, "chunked", Instead(BACKENDS["chunked"], refuse))


CASES = {
    "causal-gqa": dict(causal=True, kv=2),
    "causal-mqa-cache-offset": dict(causal=True, kv=1, offset=9),
    "bidirectional": dict(causal=False, kv=4),
    "causal-float-bias": dict(causal=True, kv=4, bias="float"),
    "bidirectional-bool-mask": dict(causal=False, kv=2, bias="bool"),
    "causal-sliding-window": dict(causal=True, kv=2, bias="sliding", window=5),
    "values-of-the-head-size": dict(causal=True, kv=2, d_v=8),  # the output and the log-sum-exp from one call
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows", [None, [0, 1, 2, 30, 31, 44]], ids=["every-row", "rows"])
@pytest.mark.parametrize("mask_rows", [1024, 8], ids=["one-call", "key-spans"])
def test_fused_statistics_equal_the_float64_pattern_and_leave_the_output_bits(case, rows, mask_rows, chunked_forbidden,
                                                                              monkeypatch):
    c = CASES[case]
    monkeypatch.setattr(budget, "MASK_ROWS", mask_rows)  # 8: masked calls per chunk of rows on the keys they see
    # first_mass of 4 keys past FIRST_GATHERED: indicator columns (the band serves first_mass up to it)
    monkeypatch.setattr(statistics, "FIRST_GATHERED", 2)
    offset = c.get("offset", 0)
    q, k, v, bias = random_attention(len(case), n_q=45, offset=offset, kv=c["kv"], d_v=c.get("d_v", 5),
                                     bias=c.get("bias"), window=c.get("window"))
    parts = torch.randint(-1, N_PARTS, (k.shape[-2],), generator=torch.Generator().manual_seed(1))
    wanted = FUSED
    kw = dict(causal=c["causal"], bias=bias, scale=0.4)
    plain = attend(q, k, v, **kw)
    with collecting_statistics(wanted, first=FIRST, windows=WINDOWS, key_parts=parts, n_parts=N_PARTS, rows=rows,
                               chunk_bytes=3000) as request:
        z = attend(q, k, v, hook_pattern=named_hook("blocks.0.attn.hook_pattern"), **kw)
    assert torch.equal(z, plain)
    pattern, _ = eager_attention(q, k, v, **kw)
    want = expected(pattern, offset, parts, first=FIRST, windows=WINDOWS)
    picked = slice(None) if rows is None else torch.tensor(rows)
    want = {s: want[s][:, :, picked] for s in wanted}
    assert_statistics(request.results["blocks.0.attn.hook_pattern"], want, pattern[:, :, picked], atol=5e-6)


def test_statistics_the_fused_kernel_cannot_give_exactly_take_the_chunked_path(monkeypatch):
    ran = []
    chunked = BACKENDS["chunked"]
    monkeypatch.setitem(BACKENDS, "chunked",
                        Instead(chunked, lambda call: ran.append(call.statistics.wanted) or chunked(call)))
    q, k, v, bias = random_attention(3, n_q=20, kv=2, bias="float")
    for wanted, kw in [(("distance_mean",), {}), (("far_mass",), dict(windows=(2,))), (("top_mass",), {}),
                       (("entropy",), {}), (("first_mass",), dict(softcap=2.0))]:
        with collecting_statistics(wanted, **{k_: v_ for k_, v_ in kw.items() if k_ == "windows"}):
            attend(q, k, v, causal=True, scale=0.3, hook_pattern=named_hook("l0"), bias=kw.get("bias"),
                   softcap=kw.get("softcap"))
    assert ran == [("distance_mean",), ("far_mass",), ("top_mass",), ("entropy",), ("first_mass",)]


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_model_statistics_of_a_tiny_hf_model_equal_transformers_eager_attentions(kind, tmp_path, chunked_forbidden):
    if kind == "gemma3":  # three sliding layers of 6 keys (boolean masks from the hf family), one global layer
        from tests.hf_helpers import saved_gemma3

        eager, model = saved_gemma3(tmp_path)
        eager.set_attn_implementation("eager")
    else:
        write_tiny_hf(kind, tmp_path)
        model, eager = load(tmp_path), reference(kind, tmp_path)
    tokens = torch.randint(3, 300, (1, 40), generator=torch.Generator().manual_seed(5))
    parts = torch.randint(0, N_PARTS, (40,), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        patterns = eager(input_ids=tokens, output_attentions=True).attentions
    got = model_statistics(model, tokens, FUSED, first=FIRST, windows=WINDOWS, key_parts=parts, n_parts=N_PARTS,
                           chunk_bytes=4000)
    for layer, pattern in enumerate(patterns):
        want = expected(pattern, 0, parts, first=FIRST, windows=WINDOWS)
        assert_statistics({s: t[layer] for s, t in got.items()}, {s: want[s] for s in FUSED}, pattern)


def test_sink_rate_and_head_profiles_statistics_run_fused(chunked_forbidden):
    from analyses.head_profiles import context_masses
    from analyses.sink_rate import first_token_attention

    model = tiny_repo("rope", num_key_value_heads=2)
    ids = torch.randint(5, 256, (48,), generator=torch.Generator().manual_seed(2)).tolist()
    _, cache = model.run_with_cache(torch.tensor([ids]), names_filter=lambda n: n.endswith("hook_pattern"))
    patterns = torch.stack([cache[f"blocks.{l}.attn.hook_pattern"][0] for l in range(model.n_layers)]).double()
    sink = first_token_attention(model, ids, 0)
    torch.testing.assert_close(torch.as_tensor(sink["row0"]), patterns[:, :, 0, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.as_tensor(sink["mass"]), patterns[:, :, 1:, 0].mean(-1), atol=1e-6, rtol=0)
    masses = context_masses(model, ids, 0, 3)
    back = torch.arange(48)[:, None] - torch.arange(48)[None]
    rows = patterns[:, :, 1:]
    torch.testing.assert_close(torch.as_tensor(masses["previous_token_mass"]).double(),
                               (rows * (back[1:] == 1)).sum(-1).mean(-1), atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.as_tensor(masses["local_mass"]).double(),
                               (rows * ((back[1:] > 0) & (back[1:] <= 3))).sum(-1).mean(-1), atol=1e-6, rtol=0)


def test_a_mask_that_hides_stretches_of_keys_is_attended_per_chunk_of_rows_on_the_keys_they_see(monkeypatch):
    """Gemma 3's sliding layers at 32k: one fused call would score every key of every row (and hold the boolean mask
    as a float ``[q, k]`` block); per chunk of rows, only the keys a chunk may see are read, with the same result."""
    monkeypatch.setattr(budget, "MASK_ROWS", 16)
    q, k, v, sliding = random_attention(3, n_q=160, kv=2, bias="sliding", window=12)
    spans = mask.key_spans(sliding, 160, 160)
    assert [(a, e) for a, e, _, _ in spans] == [(a, a + 16) for a in range(0, 160, 16)]
    assert all(lo == max(0, a - 11) and hi == e for a, e, lo, hi in spans)  # the window's keys, no more
    whole = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=sliding, enable_gqa=True, scale=0.4)
    torch.testing.assert_close(attend(q, k, v, causal=True, bias=sliding, scale=0.4), whole, atol=1e-6, rtol=0)
    padding = torch.ones(2, 1, 1, 160, dtype=torch.bool)
    padding[0, ..., :40] = False  # left padding: a mask of one row for every query
    assert mask.key_spans(padding, 160, 160) is None  # every chunk sees keys 40..159 of sequence 0, all of 1
    visible = torch.ones(160, 160, dtype=torch.bool).tril()
    assert len(mask.key_spans(visible[None, None], 160, 160)) == 10  # a materialised causal mask: half the keys
    everything = torch.zeros(1, 1, 160, 160)
    assert mask.key_spans(everything, 160, 160) is None  # nothing hidden: one call
