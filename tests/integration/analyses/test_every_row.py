"""The attention analyses on every query row (``interp.attention.model_statistics``): equal to the same statistics of
the full hooked pattern, and, when rows are sampled (``max_rows``), to the sampled computation they replaced (kept here
as the reference: pattern rows read through ``query_rows`` and hooks)."""

import numpy as np
import pytest
import torch

from analyses.head_profiles import context_masses, needle_scores, sampled_rows
from analyses.sink_rate import first_token_attention
from interp.capabilities import Capability
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.integration.interp.test_span_masses import VARIANTS

MODELS = {"rope": VARIANTS["rope"], "rope-gqa": VARIANTS["rope-gqa"], "increments-alibi": VARIANTS["increments-alibi"],
          "llama-gqa": VARIANTS["llama-gqa"], "encoder-rp": lambda: tiny_encoder("rp")}


def _ids(model, n, seed=0):
    if model.family == "encoder":
        return token_ids(model, 1, n, seed=seed)[0].tolist()
    return torch.randint(5, min(model.d_vocab, 250), (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _patterns(model, ids):
    _, cache = model.run_with_cache(torch.tensor([ids]), names_filter=lambda n: n.endswith("hook_pattern"))
    # [l, h, q, k]
    return torch.stack([cache[f"blocks.{l}.attn.hook_pattern"][0] for l in range(model.n_layers)]).double()


def old_context_masses(model, ids, max_rows, local_window):
    """head-profiles' masses as computed before all-row statistics: sampled rows' patterns through hooks."""
    n = len(ids)
    rows = torch.unique(torch.linspace(1, n - 1, min(max_rows, n - 1)).round().long())
    q, k = rows[:, None], torch.arange(n)[None, :]
    previous, local = (k == q - 1), ((q - k).abs() <= local_window) & (k != q)
    out = {m: torch.zeros(model.n_layers, model.n_heads)
           for m in ("previous_token_mass", "first_token_mass", "local_mass")}

    def reduce(layer):
        def hook(pattern, hook):
            p = pattern[0].float()
            out["previous_token_mass"][layer] = (p * previous).sum(-1).mean(-1)
            out["first_token_mass"][layer] = p[..., 0].mean(-1)
            out["local_mass"][layer] = (p * local).sum(-1).mean(-1)
        return hook

    with torch.no_grad(), model.query_rows(rows), model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", reduce(l))
                                                                         for l in range(model.n_layers)]):
        model(torch.tensor([ids]))
    return out


@pytest.mark.parametrize("family", MODELS)
def test_head_profile_masses_of_every_row_equal_the_full_pattern_and_sampled_rows_the_old_computation(family):
    model = MODELS[family]()
    ids = _ids(model, 45)
    got = context_masses(model, ids, 0, 3)
    p = _patterns(model, ids)[:, :, 1:]  # rows 1..N-1
    q, k = torch.arange(1, 45)[:, None], torch.arange(45)[None, :]
    want = {"previous_token_mass": (p * (k == q - 1)).sum(-1).mean(-1), "first_token_mass": p[..., 0].mean(-1),
            "local_mass": (p * (((q - k).abs() <= 3) & (k != q))).sum(-1).mean(-1)}
    for m, v in want.items():
        torch.testing.assert_close(got[m].double(), v, atol=1e-5, rtol=1e-5, msg=lambda s, m=m: f"{m}: {s}")
    assert ("position_range" in got) == (Capability.POSITIONS in model.capabilities)
    sampled, old = context_masses(model, ids, 7, 3), old_context_masses(model, ids, 7, 3)
    for m in old:
        torch.testing.assert_close(sampled[m], old[m], atol=1e-5, rtol=1e-5)
    assert float((sampled["first_token_mass"] - got["first_token_mass"]).abs().max()) > 1e-4  # 7 rows are not all 44
    assert torch.equal(sampled_rows(45, 44), torch.arange(1, 45)) \
        and torch.equal(sampled_rows(45, 0), torch.arange(1, 45))


def test_a_planted_previous_token_head_is_found_on_every_row():
    """Edit every pattern onto key q - 1 (key 0 for row 0): previous-token mass 1, first-token mass 1/(N-1), local 1."""
    model = VARIANTS["rope"]()

    def previous(pattern, hook):
        out = torch.zeros_like(pattern)
        n = pattern.shape[-1]
        out[..., torch.arange(n), (torch.arange(n) - 1).clamp(min=0)] = 1
        return out

    with model.hooks(fwd_hooks=[(lambda n: n.endswith("hook_pattern"), previous)]):
        got = context_masses(model, _ids(model, 30), 0, 2)
    torch.testing.assert_close(got["previous_token_mass"], torch.ones(3, 4))
    torch.testing.assert_close(got["first_token_mass"], torch.full((3, 4), 1 / 29))
    torch.testing.assert_close(got["local_mass"], torch.ones(3, 4))


def old_first_token_attention(model, ids, max_rows):
    n = len(ids)
    rows = torch.unique(torch.linspace(1, n - 1, min(max_rows, n - 1)).round().long())
    read = torch.cat([torch.zeros(1, dtype=torch.long), rows])
    row0, mass = np.zeros((model.n_layers, model.n_heads)), np.zeros((model.n_layers, model.n_heads))

    def reduce(layer):
        def hook(pattern, hook):
            to_first = pattern[0, :, :, 0].double()
            row0[layer], mass[layer] = to_first[:, 0].numpy(), to_first[:, 1:].mean(-1).numpy()
        return hook

    with torch.no_grad(), model.query_rows(read), model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", reduce(l))
                                                                         for l in range(model.n_layers)]):
        model(torch.tensor([ids]))
    return {"row0": row0, "mass": mass}


@pytest.mark.parametrize("family", ["rope", "increments-alibi", "llama-gqa"])
def test_sink_rate_reads_row_0_and_every_row_and_sampled_rows_as_before(family):
    model = MODELS[family]()
    ids = _ids(model, 60, seed=1)
    got = first_token_attention(model, ids, 0)
    p = _patterns(model, ids)
    np.testing.assert_allclose(got["row0"], p[:, :, 0, 0].numpy(), atol=1e-6)  # A_00 = 1 in a causal model
    np.testing.assert_allclose(got["row0"], 1.0, atol=1e-6)
    np.testing.assert_allclose(got["mass"], p[:, :, 1:, 0].mean(-1).numpy(), atol=1e-6)
    alpha = (got["row0"] + 59 * got["mass"]) / 60
    np.testing.assert_allclose(alpha, p[..., 0].mean(-1).numpy(), atol=1e-6)  # Gu's alpha_1: every row 0..T-1
    old, new = old_first_token_attention(model, ids, 9), first_token_attention(model, ids, 9)
    for key in old:
        np.testing.assert_allclose(new[key], old[key], atol=1e-6)


def test_needle_scores_through_statistics_equal_the_hooked_pattern():
    from corpora.niah import PARTS
    from tests.repo_helpers import tiny_repo

    model = tiny_repo("rope")

    class Sample:  # a NIAH prompt whose answer repeats needle tokens
        token_ids = list(range(10, 40))
        answer_ids = [15, 16, 99]
        parts = np.array([PARTS.index("rest")] * 5 + [PARTS.index("needle")] * 6 + [PARTS.index("rest")] * 19)

    mass, score = needle_scores(model, Sample)
    seq = Sample.token_ids + Sample.answer_ids
    p = _patterns(model, seq)[:, :, 29:32]  # the rows producing the answer
    needle = torch.zeros(len(seq), dtype=torch.bool)
    needle[5:11] = True
    torch.testing.assert_close(mass.double(), p[..., needle].sum(-1).mean(-1), atol=1e-6, rtol=1e-5)
    top = p.argmax(-1)
    ids = torch.tensor(seq)
    hit = needle[top] & (ids[top] == torch.tensor([15, 16, 99])) & torch.tensor([True, True, False])
    torch.testing.assert_close(score, hit.sum(-1).float() / 2)


def _reach(p, rows, window, first, own):
    """Where heads look, from full patterns ``[layer, head, q, k]`` at query ``rows``: the old definitions."""
    p = p[:, :, rows]
    d = (rows[:, None] - torch.arange(p.shape[-1])[None, :]).clamp(min=0).double()
    out = {"distance": (p * d).sum(-1).mean(-1), "beyond": (p * (d >= window)).sum(-1).mean(-1),
           "sink": p[..., :first].sum(-1).mean(-1)}
    out["beyond_own"] = torch.stack([(p[l] * (d >= w)).sum(-1).mean(-1) if w else torch.zeros(p.shape[1])
                                     for l, w in enumerate(own)])
    return out


@pytest.mark.parametrize("max_rows", [0, 11])
def test_attention_window_reach_and_losses_equal_the_full_pattern_and_the_materialised_window(max_rows, tmp_path):
    from analyses.attention_window import buckets, document_statistics
    from interp.interventions import KeyWindow
    from interp.loading import load
    from tests.hf_helpers import write_tiny_hf

    write_tiny_hf("gemma2", tmp_path, sliding_window=6)  # layers of their own window beside global ones
    model = load(tmp_path)
    ids, window, sinks = _ids(model, 40, seed=3), 8, (0, 2)
    spans = buckets(40, 4)
    got = document_statistics(model, ids, window, sinks, spans, max_rows)
    p = _patterns(model, ids)
    own = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    assert any(own) and not all(own)
    rows = sampled_rows(40, max_rows)
    assert len(rows) == (39 if max_rows == 0 else 11)
    for key, value in _reach(p, rows, window, 2, own).items():
        np.testing.assert_allclose(got[key], value.numpy(), atol=1e-5, err_msg=key)
    np.testing.assert_allclose(got["beyond_own"][[l for l, w in enumerate(own) if w]], 0.0, atol=1e-6)
    tokens = torch.tensor([ids])
    for c, s in enumerate((None, 0, 2)):
        with torch.no_grad():
            hooks = [] if s is None else KeyWindow(window, s).fwd_hooks(model)
            logits = model.run_with_hooks(tokens, fwd_hooks=hooks)[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits.float(), tokens[0, 1:], reduction="none").double()
        target = torch.arange(1, 40)
        want = [float(nll[(target >= a) & (target < b)].sum()) for a, b in spans]
        np.testing.assert_allclose(got[f"loss|{c}"], want, rtol=1e-5, atol=1e-4)
    assert got["loss|0"].sum() != pytest.approx(got["loss|1"].sum())  # the window binds


def test_sampled_rows_of_a_hooked_attention_are_the_rows_asked_for():
    """A pattern hook makes an attention hold every row; the statistics of sampled rows are still those rows'."""
    from interp.attention import model_statistics

    model = VARIANTS["rope"]()
    ids = torch.tensor([_ids(model, 30)])
    model.add_hook("blocks.1.attn.hook_pattern", lambda p, hook: p)
    try:
        got = model_statistics(model, ids, ("first_mass",), rows=[3, 9, 20])
    finally:
        model.reset_hooks()
    full = model_statistics(model, ids, ("first_mass",))
    torch.testing.assert_close(got["first_mass"], full["first_mass"][:, :, :, [3, 9, 20]], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("max_rows", [0, 9])
def test_band_usage_of_every_row_in_blocks_equals_every_pair_at_once(max_rows):
    from analyses.rope_frequencies import _band_usage

    model = VARIANTS["rope-gqa"]()
    spec = model.rotation(0)
    g = torch.Generator().manual_seed(5)
    n, d = 50, spec.pairs().max() + 1
    q, k = torch.randn(1, n, 4, int(d), generator=g), torch.randn(1, n, 2, int(d), generator=g)
    rows = sampled_rows(n, max_rows)
    pairs = spec.pairs()
    qb, kb = q[0][..., pairs].double(), k[0][..., pairs].double().repeat_interleave(2, 1)  # [pos, head, band, 2]
    terms = torch.einsum("qhbc,khbc->hqkb", qb[rows], kb).abs()  # every pair at once: [head, rows, keys, band]
    visible = (torch.arange(n)[None] <= rows[:, None]).double()
    want = (terms * visible[None, :, :, None]).sum((1, 2)) / visible.sum()
    for block_bytes in (1, 3000, 1 << 30):  # one row per block, a few, all at once
        _, _, logit = _band_usage(q, k, rows, spec, block_bytes=block_bytes)
        torch.testing.assert_close(logit, want, atol=1e-6, rtol=1e-5)


def test_rope_frequencies_previous_token_mass_is_every_rows_of_the_full_pattern():
    from analyses.rope_frequencies import context_statistics

    model = VARIANTS["rope"]()
    ids = _ids(model, 40, seed=6)
    got = context_statistics(model, ids, 0, 0.25, model.rotation(0).n_bands)
    p = _patterns(model, ids)
    want = p[:, :, torch.arange(1, 40), torch.arange(0, 39)].mean(-1)
    np.testing.assert_allclose(got["prev|none"], want.numpy(), atol=1e-6)
    sampled = context_statistics(model, ids, 6, 0.25, model.rotation(0).n_bands)
    rows = sampled_rows(40, 6)
    np.testing.assert_allclose(sampled["prev|none"], p[:, :, rows, rows - 1].mean(-1).numpy(), atol=1e-6)
    np.testing.assert_allclose(sampled["loss|none"], got["loss|none"], rtol=1e-5)
