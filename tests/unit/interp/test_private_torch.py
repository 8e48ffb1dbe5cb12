"""Each private torch API of ``interp.attention.backends.private`` taken away, as a torch release that moves it would:
its fallback gives the same numbers (the softmax bit for bit, the log-sum-exp kernel to float rounding) and the
statistics a model records do not change."""

import warnings

import pytest
import torch

from interp.attention import BACKENDS, attend, collecting_statistics
from interp.attention.backends import private
from interp.attention.backends.cpu_flash import cpu_flash, flash_serves
from tests.attention_inputs import named_hook, random_attention
from tests.integration.interp.test_fused_statistics import Instead

FLASH_CPU = "_scaled_dot_product_flash_attention_for_cpu"


class Without:
    """``torch.ops.aten`` lacking the op ``name``."""

    def __init__(self, ops, name):
        self.ops, self.name = ops, name

    def __getattr__(self, attr):
        if attr == self.name:
            raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{attr}'")
        return getattr(self.ops, attr)


def _statistics(wanted, **kw):
    q, k, v, bias = random_attention(4, n_q=30, bias="float")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with collecting_statistics(wanted, windows=(0, 3), chunk_bytes=4000) as request:
            z = attend(q, k, v, causal=True, bias=bias, scale=0.4, hook_pattern=named_hook("l0"), **kw)
    return z, request.results["l0"]


def test_softmax_without_the_private_out_form_is_the_same_bits(monkeypatch):
    s = torch.randn(2, 3, 17, 29)
    s[..., 5:] = float("-inf")
    inplace = private.softmax_(s.clone())
    monkeypatch.delattr(torch, "_softmax")
    assert torch.equal(private.softmax_(s.clone()), inplace)
    assert torch.equal(inplace, torch.softmax(s, -1))
    got = _statistics(("entropy", "top_mass"), softcap=3.0)
    monkeypatch.undo()
    want = _statistics(("entropy", "top_mass"), softcap=3.0)
    assert torch.equal(got[0], want[0]) and all(torch.equal(got[1][s], want[1][s]) for s in want[1])


def test_without_the_sdp_choice_no_lse_backend_claims_the_call_and_the_chunked_one_serves(monkeypatch):
    q, k, v, _ = random_attention(1, n_q=12, d_v=8)
    assert private.sdp_choice(q, k, v, None, True, 0.3) == "flash"
    assert flash_serves(q, k, v, None, True, 0.3)
    want = _statistics(("first_mass", "window_mass"))
    monkeypatch.delattr(torch, "_fused_sdp_choice")
    assert private.sdp_choice(q, k, v, None, True, 0.3) == "unknown"
    assert not flash_serves(q, k, v, None, True, 0.3)
    ran = []
    chunked = BACKENDS["chunked"]
    monkeypatch.setitem(BACKENDS, "chunked", Instead(chunked, lambda call: ran.append(call.name) or chunked(call)))
    got = _statistics(("first_mass", "window_mass"))
    assert ran == ["l0"]
    torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=0)
    for name in want[1]:
        torch.testing.assert_close(got[1][name], want[1][name], atol=1e-6, rtol=0)


@pytest.mark.parametrize("mask", [None, "float"])
def test_without_the_cpu_flash_op_the_plain_fallback_gives_the_same_output_and_log_sum_exp(mask, monkeypatch):
    q, k, v, bias = random_attention(2, n_q=20, kv=2, d_v=8, bias=mask)
    want_z, want_lse = cpu_flash(q, k, v, bias, bias is None, 0.3)
    monkeypatch.setattr(torch.ops, "aten", Without(torch.ops.aten, FLASH_CPU))
    with pytest.raises(AttributeError, match=FLASH_CPU):
        cpu_flash(q, k, v, bias, bias is None, 0.3)
    kernel = private.with_fallback(cpu_flash, f"moved-cpu-flash-{mask}")
    with pytest.warns(RuntimeWarning, match="plain-torch fallback"):
        z, lse = kernel(q, k, v, bias, bias is None, 0.3)
    torch.testing.assert_close(z, want_z, atol=1e-6, rtol=0)
    torch.testing.assert_close(lse, want_lse, atol=1e-6, rtol=0)
    got = _statistics(("first_mass", "self_mass", "window_mass"))
    monkeypatch.undo()
    want = _statistics(("first_mass", "self_mass", "window_mass"))
    assert torch.equal(got[0], want[0])
    for name in want[1]:
        torch.testing.assert_close(got[1][name], want[1][name], atol=1e-6, rtol=0)
