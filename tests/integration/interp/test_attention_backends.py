"""The table of attention backends (``interp.attention.backends``): the log-sum-exp statistics backend with each kernel
plugged in on the CPU (the CPU flash op, the plain-torch fallback, the CUDA kernel wrapper falling back off CUDA), so
every line of the CUDA backend but the raw op calls runs here; float32 accumulation of bf16 inputs against float64
reductions of the same bf16 values; the statistics' declarations; the argument checks; a new backend as one entry."""

import dataclasses
import warnings

import pytest
import torch

from interp.attention import (
    BACKENDS,
    CHUNK_BYTES,
    DECLARED,
    STATISTICS,
    attend,
    chunk_budget,
    collecting_statistics,
    model_statistics,
    reference,
    register,
)
from interp.attention.backends import cuda, lse, private
from interp.attention.backends.cpu_flash import cpu_flash
from tests.attention_inputs import eager_attention, named_hook, random_attention
from tests.integration.interp.test_attention_statistics import N_PARTS, assert_statistics, expected
from tests.integration.interp.test_fused_statistics import Instead
from tests.integration.interp.test_span_masses import VARIANTS

SERVED = ("first_mass", "self_mass", "previous_mass", "window_mass", "span_mass")
FIRST, WINDOWS = (1, 4, 300), (0, 3, 9)  # 300 keys: past FIRST_GATHERED, indicator columns


def _raising(*args):
    raise AttributeError("module 'torch.ops.aten' has no attribute '_moved_op'")


KERNELS = {"cpu-flash": cpu_flash, "plain-fallback": private.plain_lse,
           "moved-op": private.with_fallback(_raising, "test"),
           "cuda-wrapper-off-cuda": cuda.BACKEND.kernel}
CASES = {
    "causal-gqa": dict(causal=True, kv=2),
    "causal-mqa-cache-offset": dict(causal=True, kv=1, offset=9),
    "bidirectional-bool-mask": dict(causal=False, kv=2, bias="bool"),
    "causal-float-bias": dict(causal=True, kv=4, bias="float"),
    "causal-sliding-window": dict(causal=True, kv=2, bias="sliding", window=5),
}


@pytest.fixture
def lse_backend_only(monkeypatch):
    """The CPU flash entry replaced by the backend under test; the chunked one refuses."""

    def use(kernel):
        backend = lse.LseStatistics("statistics_cpu_flash", "cpu", kernel)
        monkeypatch.setitem(BACKENDS, "statistics_cpu_flash", backend)
        monkeypatch.setitem(BACKENDS, "chunked", Instead(BACKENDS["chunked"], lambda call: pytest.fail("chunked ran")))
        return backend

    return use


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_lse_backend_with_each_kernel_equals_float64_of_the_same_inputs(kernel, case, dtype, lse_backend_only):
    c = CASES[case]
    lse_backend_only(KERNELS[kernel])
    offset = c.get("offset", 0)
    q, k, v, bias = random_attention(len(case), n_q=45, offset=offset, kv=c["kv"], d_v=8, bias=c.get("bias"),
                                     window=c.get("window"))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    bias = bias if bias is None or bias.dtype == torch.bool else bias.to(dtype)
    parts = torch.randint(-1, N_PARTS, (k.shape[-2],), generator=torch.Generator().manual_seed(1))
    kw = dict(causal=c["causal"], bias=bias, scale=0.4)
    plain = attend(q, k, v, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback's warning: tested below
        with collecting_statistics(SERVED, first=FIRST, windows=WINDOWS, key_parts=parts, n_parts=N_PARTS,
                                   chunk_bytes=3000) as request:
            z = attend(q, k, v, hook_pattern=named_hook("l0"), **kw)
    torch.testing.assert_close(z, plain, atol=1e-2 if dtype == torch.bfloat16 else 1e-6, rtol=0)
    pattern, _ = eager_attention(q, k, v, **kw)  # float64 of the very (bf16) values
    want = expected(pattern, offset, parts, first=FIRST, windows=WINDOWS)
    got = request.results["l0"]
    assert all(t.dtype == torch.float32 for t in got.values())
    # the CPU flash op's bf16 kernel sums its L with a fast approximate exp: 5.3e-5 off the float64 log-sum-exp
    # (measured here); the backend never hands it bf16 (``flash_serves``: float32 / float64 only)
    atol = 1e-4 if (kernel, dtype) == ("cpu-flash", torch.bfloat16) else 5e-6
    assert_statistics(got, {s: want[s] for s in SERVED}, pattern, atol=atol)


def test_a_moved_private_op_warns_once_and_the_fallback_serves():
    q, k, v, _ = random_attention(0, n_q=12, kv=2, d_v=8)
    kernel = private.with_fallback(_raising, "moved-test")
    with pytest.warns(RuntimeWarning, match="moved-test log-sum-exp kernel failed .*AttributeError"):
        z, got = kernel(q, k, v, None, True, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel(q, k, v, None, True, 0.3)  # once
    want_z, want = cpu_flash(q, k, v, None, True, 0.3)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    torch.testing.assert_close(z, want_z, atol=1e-6, rtol=0)


def test_the_cuda_backend_is_not_chosen_off_cuda_and_its_wrapper_falls_back_there():
    q, k, v, _ = random_attention(1, n_q=12, kv=2, d_v=8)
    with collecting_statistics(["first_mass"]) as request:
        call_backends = [b.name for b in BACKENDS.values() if b.serves(_call(q, k, v, request))]
    assert call_backends[0] == "statistics_cpu_flash" and "statistics_cuda" not in call_backends
    backend = dataclasses.replace(cuda.BACKEND, device_type="cpu")
    assert backend.serves(_call(q, k, v, request))
    with pytest.warns(RuntimeWarning):
        z, got = private.with_fallback(cuda.cuda_lse, "CUDA-test")(q, k, v, None, True, 0.3)
    torch.testing.assert_close(got, cpu_flash(q, k, v, None, True, 0.3)[1], atol=1e-6, rtol=0)


def _call(q, k, v, request):
    from interp.attention import AttentionCall, Mask

    return AttentionCall(q, k, v, Mask(True, q.shape[-2], k.shape[-2]), 0.3, name="l0", statistics=request)


def test_the_memory_efficient_kernel_gets_an_aligned_bias_expanded_to_every_head():
    q, k = torch.zeros(2, 4, 5, 8), torch.zeros(2, 2, 13, 8)
    bias = torch.randn(1, 1, 5, 13)
    got = cuda.aligned_bias(bias, q, k)
    assert got.shape == (2, 4, 5, 13) and got.stride(-2) % cuda.ALIGNMENT == 0
    torch.testing.assert_close(got, bias.expand(2, 4, 5, 13))


@pytest.mark.parametrize("case", ["causal-bias", "causal-softcap", "bidirectional-bool-mask"])
def test_bf16_inputs_accumulate_in_float32_on_the_chunked_path(case):
    q, k, v, bias = random_attention(5, n_q=40, kv=2, d_v=8, bias={"causal-bias": "float",
                                                                   "bidirectional-bool-mask": "bool"}.get(case))
    q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
    bias = bias if bias is None or bias.dtype == torch.bool else bias.bfloat16()
    kw = dict(causal=case != "bidirectional-bool-mask", bias=bias, scale=0.4,
              softcap=3.0 if case == "causal-softcap" else None)
    wanted = tuple(s for s in STATISTICS if s != "span_mass")
    with collecting_statistics(wanted, first=(1, 4), windows=(0, 3, 9), chunk_bytes=5000) as request:
        attend(q, k, v, hook_pattern=named_hook("l0"), **kw)
    pattern, _ = eager_attention(q, k, v, **kw)
    assert all(t.dtype in (torch.float32, torch.long) for t in request.results["l0"].values())
    assert_statistics(request.results["l0"], expected(pattern), pattern)


def test_each_statistic_is_declared_once_with_its_float64_reference():
    assert set(DECLARED) == set(STATISTICS) and all(STATISTICS.values())
    q, k, v, _ = random_attention(2, n_q=30, offset=4, kv=2)
    pattern, _ = eager_attention(q, k, v, causal=True, scale=0.4)
    parts = torch.randint(-1, N_PARTS, (34,), generator=torch.Generator().manual_seed(3))
    options = collecting_statistics(tuple(STATISTICS), first=(1, 4), windows=(0, 3, 9), key_parts=parts,
                                    n_parts=N_PARTS)
    with options as request:
        want = expected(pattern, 4, parts)
        for name in STATISTICS:
            torch.testing.assert_close(reference(name, pattern, request, offset=4), want[name])


@pytest.mark.parametrize("call,message", [
    (lambda m, t: model_statistics(m, t, ["entropy"], rows=[2.7]), "rows takes integer positions, got 2.7"),
    (lambda m, t: model_statistics(m, t, ["window_mass"]), "window_mass needs windows="),
    (lambda m, t: model_statistics(m, t, ["far_mass"], windows=()), "far_mass needs windows="),
    (lambda m, t: model_statistics(m, t, ["first_mass"], first=(2.5,)), "first takes whole numbers, got 2.5"),
    (lambda m, t: model_statistics(m, t, ["first_mass"], first=()), "first needs at least one key count"),
    (lambda m, t: model_statistics(m, t, ["window_mass"], windows=(True,)), "windows takes whole numbers"),
    (lambda m, t: model_statistics(m, t, ["entropy"], chunk_bytes=0), "chunk_bytes must be a positive whole"),
    (lambda m, t: model_statistics(m, t, ["entropy"], layers=[1.5]), "layers takes whole numbers, got 1.5"),
    (lambda m, t: model_statistics(m, t.float(), ["entropy"]), "tokens must be an integer tensor"),
    (lambda m, t: model_statistics(m, t, ["span_mass"], key_parts=torch.zeros(5), n_parts=2),
     "key_parts takes integer labels"),
    (lambda m, t: model_statistics(m, t, ["span_mass"], key_parts=[0] * 5, n_parts=1.5), "n_parts >= 1"),
    (lambda m, t: model_statistics(m, t, ["entropy"], rows=[]), "rows needs at least one query position"),
    (lambda m, t: model_statistics(m, t, ["entropy"], rows=[-1]), "rows takes positions from 0"),
    (lambda m, t: model_statistics(m, t, ["entropy"], progress=3), "progress must be callable"),
])
def test_every_argument_is_checked_before_any_work_with_an_error_that_names_it(call, message, monkeypatch):
    model = VARIANTS["rope"]()
    monkeypatch.setattr(type(model), "forward", lambda *a, **kw: pytest.fail("the model ran"))
    with pytest.raises(ValueError, match=message):
        call(model, torch.zeros(1, 5, dtype=torch.long))


def test_a_new_backend_is_one_entry_of_the_table(monkeypatch):
    monkeypatch.setattr("interp.attention.backends.BACKENDS", dict(BACKENDS))
    from interp.attention import backends

    seen = []

    class Spy:
        name, reads_windows = "spy", False

        def conditions(self):
            return [("no statistics asked", lambda call: call.statistics is None),
                    ("no hooked point", lambda call: not call.hooked)]

        def __call__(self, call):
            seen.append(call.mask.causal)
            return backends.BACKENDS["sdpa"](call)

    register(Spy(), before="sdpa")
    assert list(backends.BACKENDS)[-2:] == ["spy", "sdpa"]
    q, k, v, _ = random_attention(0, n_q=6)
    attend(q, k, v, causal=True)
    assert seen == [True]


def test_chunks_are_sized_from_the_device():
    assert chunk_budget("cpu") == CHUNK_BYTES and chunk_budget("cpu", 123) == 123


def test_cuda_chunks_take_a_share_of_the_free_memory_up_to_the_memory_target(monkeypatch):
    from interp.attention import budget

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 << 30, 80 << 30))
    assert chunk_budget("cuda") == (2 << 30) // budget.CUDA_CHUNK_SHARE
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 << 30, 80 << 30))
    assert chunk_budget("cuda") == budget.CUDA_CHUNK_MAX
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (100 << 20, 80 << 30))
    assert chunk_budget("cuda") == CHUNK_BYTES


SOFTCAP_BACKENDS = ("key_window", "materialised", "materialised-rows", "chunked", "lse-declines", "sdpa")


@pytest.mark.parametrize("given_scores", [False, True], ids=["q-dot-k", "given-scores"])
@pytest.mark.parametrize("backend", SOFTCAP_BACKENDS)
def test_every_backend_soft_caps_the_logits_before_the_mask_as_gemma2(backend, given_scores):
    """``softcap * tanh(s / softcap)`` of ``q . k * scale`` (or of given scores, which replace it), then the mask: the
    output, the scores ``hook_scores`` sees and the statistics, against float64 of the definition."""
    from interp.attention import AttentionCall, Mask, dispatch

    n_q, offset, cap, scale = 30, 3, 2.0, 0.5
    q, k, v, bias = random_attention(11, n_q=n_q, offset=offset, kv=2, d_v=8, bias="float", q_scale=3.0)
    windows = ((7, 2),) if backend == "key_window" else ()
    scores = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * scale if given_scores else None
    hook_scores, seen = named_hook("blocks.0.attn.hook_attn_scores"), []
    if backend.startswith("materialised"):
        hook_scores.add_hook(lambda t, hook: seen.append(t.double()))
    wanted = {"chunked": ("entropy", "distance_std"), "lse-declines": ("first_mass", "window_mass")}.get(backend)
    rows = torch.tensor([0, 7, 29]) if backend == "materialised-rows" else None
    call_of = lambda request: AttentionCall(  # noqa: E731
        q, k, v, Mask(True, n_q, n_q + offset, bias, windows), scale, cap, scores, hook_scores,
        named_hook("blocks.0.attn.hook_pattern"), "blocks.0.attn.hook_pattern", request, rows)
    with collecting_statistics(wanted or ("first_mass",), windows=(0, 3)) as request:
        call = call_of(request if wanted else None)
        served = [b.name for b in BACKENDS.values() if b.serves(call if b.reads_windows else call.folded())]
        z = dispatch(call)
    assert served[0] == {"materialised-rows": "materialised", "lse-declines": "chunked"}.get(backend, backend)
    assert "statistics_cpu_flash" not in served
    pattern, z_ref = eager_attention(q, k, v, causal=True, bias=bias, scale=scale, softcap=cap, windows=windows)
    torch.testing.assert_close(z.double(), z_ref, atol=1e-5, rtol=1e-5)
    if seen:
        s = torch.tanh(q.double() @ k.double().repeat_interleave(2, 1).transpose(-1, -2) * scale / cap) * cap
        s = (s + bias.double()).masked_fill(torch.ones(n_q, n_q + offset, dtype=torch.bool).tril(offset).logical_not(),
                                            float("-inf"))
        torch.testing.assert_close(seen[0], s if rows is None else s[:, :, rows], atol=1e-5, rtol=1e-5)
    if wanted:
        want = expected(pattern, offset, first=(1,), windows=(0, 3))
        assert_statistics(request.results["blocks.0.attn.hook_pattern"], {s: want[s] for s in wanted}, pattern)


def test_every_chunk_size_comes_from_the_one_budget_and_the_cpu_budget_keeps_the_old_sizes(monkeypatch):
    from interp.attention import budget, mask
    from interp.attention.backends import key_window

    causal = torch.ones(1, 1, 4096, 4096, dtype=torch.bool).tril()
    assert [e - a for a, e, _, _ in mask.key_spans(causal, 4096, 4096)] == [1024] * 4
    assert budget.rows_per_chunk("cpu", 4 * 32768, most=budget.MASK_ROWS) == 512  # 64 MiB of float mask rows
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 << 30, 80 << 30))
    assert budget.rows_per_chunk("cuda", 4 * 32768, most=budget.MASK_ROWS) == 1024
    q, k, v, _ = random_attention(6, n_q=40, kv=2, d_v=8)
    whole = attend(q, k, v, causal=True, scale=0.4, softcap=2.0)
    windowed = [key_window.windowed(q, k, v, ((6, 1),), causal=True, bias=None, scale=0.4, softcap=None, scores=None)]
    monkeypatch.setattr(budget, "CHUNK_BYTES", 3 * 4 * 2 * 4 * 40 * 7)  # 7 soft-capped rows a chunk
    chunked = attend(q, k, v, causal=True, scale=0.4, softcap=2.0)
    windowed.append(key_window.windowed(q, k, v, ((6, 1),), causal=True, bias=None, scale=0.4, softcap=None,
                                        scores=None))
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)
    torch.testing.assert_close(windowed[1], windowed[0], atol=1e-6, rtol=0)
