"""The statistics on a CUDA device (``pytest -m cuda`` on a lent GPU; skipped without one): the CUDA backend serves the
masses and span masses with the kernel sdpa picks (flash without a mask, memory-efficient with one), no fallback, in
bf16 and float32, against float64 of the very inputs; the output is the forward's; a tiny bf16 model's statistics on the
device equal its statistics on the CPU."""

import warnings

import pytest
import torch

from interp.attention import BACKENDS, attend, collecting_statistics, model_statistics
from tests.attention_inputs import eager_attention, named_hook, random_attention
from tests.integration.interp.test_attention_statistics import N_PARTS, assert_statistics, expected
from tests.integration.interp.test_fused_statistics import Instead

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (pytest -m cuda on a GPU)")]
SERVED = ("first_mass", "self_mass", "previous_mass", "window_mass", "span_mass")
CASES = {"causal-gqa": dict(causal=True, kv=2), "causal-cache-offset": dict(causal=True, kv=1, offset=9),
         "causal-sliding": dict(causal=True, kv=2, bias="sliding", window=33),
         "bidirectional-bool": dict(causal=False, kv=2, bias="bool")}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "float32"])
@pytest.mark.parametrize("case", CASES)
def test_the_cuda_backend_serves_the_masses_on_the_device_without_falling_back(case, dtype, monkeypatch):
    c = CASES[case]
    monkeypatch.setitem(BACKENDS, "chunked", Instead(BACKENDS["chunked"], lambda call: pytest.fail("chunked ran")))
    offset = c.get("offset", 0)
    q, k, v, bias = random_attention(3, n_q=300, offset=offset, kv=c["kv"], d=64, d_v=64, bias=c.get("bias"),
                                     window=c.get("window"))
    q, k, v = (t.to("cuda", dtype) for t in (q, k, v))
    bias = None if bias is None else bias.cuda()
    parts = torch.randint(-1, N_PARTS, (k.shape[-2],), generator=torch.Generator().manual_seed(1))
    kw = dict(causal=c["causal"], bias=bias, scale=0.125)
    plain = attend(q, k, v, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the fallback warns: it must not run here
        with collecting_statistics(SERVED, first=(1, 4, 300), windows=(0, 3, 9), key_parts=parts,
                                   n_parts=N_PARTS) as request:
            z = attend(q, k, v, hook_pattern=named_hook("l0"), **kw)
    torch.testing.assert_close(z, plain, atol=2e-2 if dtype == torch.bfloat16 else 1e-5, rtol=0)
    pattern, _ = eager_attention(q.cpu(), k.cpu(), v.cpu(), causal=c["causal"], bias=None if bias is None else
                                 bias.cpu(), scale=0.125)
    want = expected(pattern, offset, parts, first=(1, 4, 300), windows=(0, 3, 9))
    assert_statistics(request.results["l0"], {s: want[s] for s in SERVED}, pattern, atol=5e-6)


def test_a_tiny_bf16_model_gives_the_same_statistics_on_the_device_as_on_the_cpu():
    from interp.attention import STATISTICS
    from tests.repo_helpers import tiny_repo

    model = tiny_repo("rope", num_key_value_heads=2).to(torch.bfloat16)
    ids = torch.randint(5, 256, (1, 200), generator=torch.Generator().manual_seed(0))
    wanted = tuple(s for s in STATISTICS if s != "span_mass")
    cpu = model_statistics(model, ids, wanted, first=(1, 4), windows=(0, 8))
    gpu = model_statistics(model.cuda(), ids.cuda(), wanted, first=(1, 4), windows=(0, 8))
    for name in wanted:  # the residual streams differ by bf16 rounding between devices; the statistics by as much
        if name != "top_key":
            torch.testing.assert_close(gpu[name], cpu[name], atol=2e-2 * (200 if "distance" in name else 1), rtol=0)
