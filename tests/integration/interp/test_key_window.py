"""``interventions.KeyWindow`` applied as ``attend``'s chunked condition (``interp.attention.key_window``) against the
materialised window it replaces (a mask on every layer's ``hook_attn_scores``) and against an eager window written
from its definition; and a long window that never holds a ``[query, key]`` block."""

import math

import pytest
import torch
import torch.nn.functional as F

from interp import attention, interventions
from interp.attention import attend, budget, collecting_statistics, key_window
from interp.interventions import KeyWindow
from interp.loading import load
from tests.attention_inputs import eager_attention, named_hook, random_attention
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.hf_helpers import write_tiny_hf
from tests.integration.interp.test_attention_statistics import FIRST, NO_SPANS, WINDOWS, assert_statistics, expected
from tests.integration.interp.test_span_masses import VARIANTS, build, models
from tests.repo_helpers import tiny_repo

CASES = {
    "causal-gqa": dict(causal=True, kv=2, windows=((5, 2),)),
    "causal-cache-offset": dict(causal=True, kv=1, windows=((4, 0),), offset=11),
    "bidirectional": dict(causal=False, kv=4, windows=((3, 1),)),
    "causal-float-bias": dict(causal=True, kv=4, windows=((6, 3),), bias="float"),
    "bidirectional-bool-mask": dict(causal=False, kv=2, windows=((7, 0),), bias="bool"),
    "causal-softcap-nested": dict(causal=True, kv=2, windows=((9, 1), (4, 3)), softcap=2.0),
    "window-wider-than-input": dict(causal=True, kv=4, windows=((500, 0),)),
}


@pytest.mark.parametrize("case", CASES)
def test_windowed_attend_equals_the_eager_window_with_and_without_hooks_and_statistics(case, monkeypatch):
    c = CASES[case]
    monkeypatch.setattr(budget, "CHUNK_BYTES", 4 * 4000)  # a few rows per key-window chunk
    offset = c.get("offset", 0)
    q, k, v, bias = random_attention(len(case), n_q=37, offset=offset, kv=c["kv"], bias=c.get("bias"))
    kw = dict(causal=c["causal"], bias=bias, scale=0.4, softcap=c.get("softcap"))
    pattern, z_ref = eager_attention(q, k, v, windows=c["windows"], **kw)
    name = "blocks.0.attn.hook_pattern"
    with contextlib_nest(c["windows"], name):
        fused = attend(q, k, v, hook_pattern=named_hook(name), **kw)
        seen = []
        hook = named_hook(name)
        hook.add_hook(lambda p, hook: seen.append(p))
        hooked = attend(q, k, v, hook_pattern=hook, **kw)
        with collecting_statistics(NO_SPANS, first=FIRST, windows=WINDOWS, chunk_bytes=3000) as request:
            with_stats = attend(q, k, v, hook_pattern=named_hook(name), **kw)
    for z in (fused, hooked, with_stats):
        torch.testing.assert_close(z.double(), z_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(seen[0].double(), pattern, atol=1e-6, rtol=1e-5)
    assert_statistics(request.results[name], expected(pattern, offset), pattern)
    other = attend(q, k, v, hook_pattern=named_hook("blocks.1.attn.hook_pattern"), **kw)
    with contextlib_nest(c["windows"], name):  # a layer not named attends in full
        assert torch.equal(attend(q, k, v, hook_pattern=named_hook("blocks.1.attn.hook_pattern"), **kw), other)


def contextlib_nest(windows, name):
    import contextlib

    stack = contextlib.ExitStack()
    for window, sinks in windows:
        stack.enter_context(key_window([name], window, sinks))
    return stack


def test_a_long_window_reads_one_chunk_of_keys_at_a_time(monkeypatch):
    """8,192 queries through a window of 64 keys and 4 sinks: every kernel call sees at most a chunk of rows and their
    window's keys (never 8,192 keys), and rows checked against the eager window agree."""
    n, window, sinks = 8192, 64, 4
    q, k, v, _ = random_attention(0, n_q=n, batch=1, heads=2, kv=2, d_v=8, q_scale=1.0)
    widest = []
    real = F.scaled_dot_product_attention

    def spy(q_, k_, v_, **kw):
        widest.append(k_.shape[-2] * q_.shape[-2])
        return real(q_, k_, v_, **kw)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    with key_window(["l"], window, sinks):
        z = attend(q, k, v, causal=True, hook_pattern=named_hook("l"))
    rows_per = max(window, 64)
    assert max(widest) <= rows_per * (rows_per + window - 1 + sinks) and len(widest) == n // rows_per
    for row in (0, 63, 64, 1000, n - 1):
        keys = torch.arange(row + 1)
        keys = keys[(row - keys < window) | (keys < sinks)]
        p = torch.softmax(q[0, :, row:row + 1] @ k[0, :, keys].transpose(-1, -2) / math.sqrt(8), -1)  # [head, 1, keys]
        torch.testing.assert_close(z[0, :, row], (p @ v[0, :, keys])[:, 0], atol=1e-5, rtol=1e-5)


def _hf(kind, tmp_path, **overrides):
    def make():
        write_tiny_hf(kind, tmp_path / kind, **overrides)
        return load(tmp_path / kind)
    return make


def extra(tmp_path) -> dict:
    """Hand-built models beside the registry's examples: transformers checkpoints read by the hf family (gemma2 with a
    sliding window and soft-capping), an encoder with spread weights, and ``VARIANTS``."""
    return {"hf-llama": _hf("llama", tmp_path), "hf-gemma2-sliding-softcap": _hf("gemma2", tmp_path, sliding_window=6),
            "hf-gpt2": _hf("gpt2", tmp_path), "hf-bert": _hf("bert", tmp_path), "encoder": lambda: tiny_encoder("rp"),
            **VARIANTS}


@pytest.mark.parametrize("family,index", models(extra=extra(None)))
@pytest.mark.parametrize("window,sinks,layers", [(5, 0, None), (3, 2, None), (4, 1, "last")])
def test_applied_key_window_gives_the_materialised_windows_output(family, window, sinks, layers, tmp_path, index):
    """Every example of every registered family, and ``extra``'s models; ``layers="last"`` windows the last layer
    only."""
    model = build(family, index, extra(tmp_path))
    layers = (model.n_layers - 1,) if layers == "last" else layers
    ids = token_ids(model, 1, 24) if model.family == "encoder" else torch.randint(3, min(model.d_vocab, 250), (2, 24),
                                                                                  generator=torch.Generator().manual_seed(2))
    iv = KeyWindow(window=window, sinks=sinks, layers=layers)
    with torch.no_grad():
        reference = model.run_with_hooks(ids, fwd_hooks=iv.fwd_hooks(model))
        with interventions.applied(model, iv):
            got = model(ids)
        full = model(ids)
    assert iv.condition(model) is not None  # every family, the encoder's too, attends through attend's window
    torch.testing.assert_close(got, reference, atol=1e-4, rtol=1e-4)
    assert float((got - full).abs().max()) > 1e-3  # the window changed the output


def test_applied_window_honours_query_rows_and_refuses_bad_values():
    model = tiny_repo("rope")
    ids = torch.randint(5, 250, (1, 20))
    iv = KeyWindow(window=3, sinks=2)
    seen = {}
    with torch.no_grad(), interventions.applied(model, iv), model.query_rows([4, 15]), \
            model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", lambda p, hook: seen.setdefault("p", p))]):
        rows_out = model(ids)
    with torch.no_grad(), interventions.applied(model, iv):
        every = model(ids)
    torch.testing.assert_close(rows_out, every, atol=1e-5, rtol=1e-5)
    p = seen["p"][0]  # [head, 2 rows, keys]
    k = torch.arange(20)
    for i, row in enumerate((4, 15)):
        outside = ~(((row - k) < 3) & (k <= row) | (k < 2))
        assert float(p[:, i, outside].abs().max()) == 0.0 and float(p[:, i, ~outside].min()) > 0
    with pytest.raises(ValueError, match="window=0 must be at least 1"):
        KeyWindow(window=0)
    with pytest.raises(ValueError, match="layers: 9 is not a layer"):
        with interventions.applied(model, KeyWindow(window=3, layers=(9,))):
            pass
