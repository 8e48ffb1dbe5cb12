"""Dispatch is explicit: every backend serves a whole condition of the call (the table's order only breaks ties, and
only where two backends are declared to share calls), ``explain`` says why a backend runs a call, and a backend reads
the call alone (the query rows are on it, not in a context variable)."""

from __future__ import annotations

import itertools

import pytest
import torch

from interp.attention import (
    BACKENDS,
    AttentionCall,
    Mask,
    choose,
    collecting_statistics,
    dispatch,
    explain,
    query_rows,
)
from tests.attention_inputs import named_hook, random_attention

LSE_SERVED, CHUNKED_ONLY = ("first_mass", "previous_mass"), ("entropy",)
TIES = {frozenset({"key_window", "sdpa"}), frozenset({"statistics_cpu_flash", "chunked"})}


def _calls():
    """Calls covering each feature a condition reads: windows, a hooked point, statistics the log-sum-exp serves or
    not, a soft-cap."""
    q, k, v, _ = random_attention(3, n_q=12, kv=2, d_v=8)
    out = []
    for windows, hooked, stats, softcap in itertools.product(((), ((4, 1),)), (False, True),
                                                            (None, LSE_SERVED, CHUNKED_ONLY), (None, 2.0)):
        pattern = named_hook("blocks.0.attn.hook_pattern")
        if hooked:
            pattern.add_hook(lambda t, hook: t)
        with collecting_statistics(stats or ("first_mass",)) as request:
            call = AttentionCall(q, k, v, Mask(True, 12, 12, None, windows), 0.3, softcap, None, None, pattern,
                                 "blocks.0.attn.hook_pattern", request if stats else None)
        out.append((dict(windows=bool(windows), hooked=hooked, stats=stats, softcap=softcap), call))
    return out


EXPECTED = {  # each backend's condition, written again from its documentation
    "key_window": lambda f: f["windows"] and not f["hooked"] and f["stats"] is None,
    "materialised": lambda f: f["hooked"],
    "statistics_cpu_flash": lambda f: f["stats"] == LSE_SERVED and not f["hooked"] and f["softcap"] is None,
    "statistics_cuda": lambda f: False,  # these tensors are on the CPU
    "chunked": lambda f: f["stats"] is not None and not f["hooked"],
    "sdpa": lambda f: not f["hooked"] and f["stats"] is None,
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_backend_serves_exactly_its_condition(name):
    backend = BACKENDS[name]
    for features, call in _calls():
        seen = call if backend.reads_windows else call.folded()
        assert backend.serves(seen) == EXPECTED[name](features), (name, features)


def test_every_call_is_served_the_order_only_breaks_declared_ties_and_explain_says_why():
    for features, call in _calls():
        serving = [b.name for b in BACKENDS.values() if b.serves(call if b.reads_windows else call.folded())]
        assert serving, features
        assert len(serving) == 1 or frozenset(serving) in TIES, (features, serving)
        assert choose(call).name == serving[0]
        lines = explain(call).splitlines()
        assert lines[-1].startswith(f"{serving[0]}: runs it (")
        for line, backend in zip(lines[:-1], BACKENDS.values()):
            assert line.startswith(f"{backend.name}: no, it needs ")
    _, call = next(c for c in _calls() if c[0] == dict(windows=False, hooked=False, stats=LSE_SERVED, softcap=2.0))
    assert "statistics_cpu_flash: no, it needs no soft-cap and no given scores" in explain(call)
    assert explain(call).splitlines()[-1] == "chunked: runs it (statistics asked; no hooked point)"


def test_the_query_rows_ride_on_the_call_and_the_materialised_backend_reads_nothing_else():
    q, k, v, _ = random_attention(5, n_q=10, kv=2, d_v=8)
    pattern, seen = named_hook("blocks.0.attn.hook_pattern"), []
    pattern.add_hook(lambda t, hook: seen.append(t.shape) or t)
    rows = torch.tensor([1, 4, 9])
    call = AttentionCall(q, k, v, Mask(True, 10, 10), 0.3, None, None, None, pattern, "blocks.0.attn.hook_pattern",
                         None, rows)
    with query_rows([0]):  # a context set around the dispatch is not what the backend reads
        z = dispatch(call)
    assert seen == [torch.Size([2, 4, 3, 10])]
    plain = dispatch(AttentionCall(q, k, v, Mask(True, 10, 10), 0.3))
    torch.testing.assert_close(z, plain, atol=1e-6, rtol=1e-5)  # an unedited pattern: the same output everywhere
    from interp.attention import attend

    recorded = []
    from interp.attention import recording_calls

    with query_rows([2, 3]), recording_calls(recorded.append):
        attend(q, k, v, causal=True, hook_pattern=pattern)
    assert recorded[0].rows.tolist() == [2, 3] and seen[-1] == torch.Size([2, 4, 2, 10])
