"""Planted truth: attention patterns written into a tiny model's heads are what induction and sink-rate report."""

import numpy as np
import pytest
import torch

from analyses.induction import induction
from analyses.sink_rate import sink_rate
from interp.controls import shuffled_weights
from tests.repo_helpers import tiny_repo

HALF = 40


@pytest.fixture
def model():
    return tiny_repo("rope")  # bytes, causal, with a start token: 2 layers x 4 heads


def _plant(model, layer, head, build):
    """Replace head ``head`` of ``layer``'s pattern by ``build(query_positions, n_keys)``."""
    def hook(pattern, hook):
        from interp.attention import current_query_rows

        rows = current_query_rows()
        q = torch.arange(pattern.shape[-2]) if rows is None else rows.cpu()
        pattern[:, head] = build(q, pattern.shape[-1]).to(pattern.dtype)
        return pattern
    return model.add_hook(f"blocks.{layer}.attn.hook_pattern", hook)


def _one_hot(q, n, key):
    p = torch.zeros(len(q), n)
    p[torch.arange(len(q)), key] = 1.0
    return p


def test_planted_induction_and_previous_token_heads_are_recovered(model):
    offset = 1  # the start token
    _plant(model, 1, 2, lambda q, n: _one_hot(q, n, torch.where(q >= offset + HALF, q - HALF + 1, q - 1)))
    _plant(model, 0, 3, lambda q, n: _one_hot(q, n, q - 1))
    df = induction(model, half=HALF, n_docs=3).set_index(["layer", "head"])
    assert df.loc[(1, 2), "induction_score"] == pytest.approx(1.0)
    assert df.loc[(0, 3), "previous_token_score"] == pytest.approx(1.0)
    assert df.loc[(0, 3), "induction_score"] == pytest.approx(0.0)
    others = df.drop([(1, 2), (0, 3)])
    assert others["induction_score"].max() < 0.3 and others["previous_token_score"].max() < 0.5
    # the previous-token score of the induction head: its first-copy rows attend to the previous token
    assert df.loc[(1, 2), "previous_token_score"] == pytest.approx((HALF) / (2 * HALF), abs=0.02)


def test_a_planted_sink_is_counted_and_uniform_heads_are_not(model):
    _plant(model, 1, 0, lambda q, n: _one_hot(q, n, torch.zeros_like(q)))
    for head in (1, 2, 3):
        _plant(model, 1, head, lambda q, n: torch.tril(torch.ones(n, n))[q] / (q[:, None] + 1.0))
    df = sink_rate(model, lengths=(32, 128), n_docs=2, max_rows=64)
    layer1 = df[df["layer"] == 1].set_index(["input", "start_token", "length", "head"])
    assert layer1.xs(0, level="head")["is_sink"].all()
    assert layer1.xs(0, level="head")["first_token_mass"].eq(1.0).all()
    uniform = layer1.drop(0, level="head")
    # mean over rows 1..N-1 of 1 / (q + 1): above epsilon only for short contexts, as the harmonic sum says
    for (inp, start, n), g in uniform.groupby(level=[0, 1, 2]):
        expected = np.mean(1.0 / (np.unique(np.linspace(1, n - 1, min(64, n - 1)).round()) + 1))
        assert g["first_token_mass"].to_numpy() == pytest.approx(expected, rel=1e-5)
    assert set(df["input"]) == {"text", "random"} and set(df["start_token"]) == {True, False}


def test_shuffled_weights_keep_each_tensors_values_and_lose_their_order(model):
    control = shuffled_weights(model, seed=3)
    for (name, a), b in zip(model.named_parameters(), control.parameters()):
        assert torch.equal(a.flatten().sort().values, b.flatten().sort().values), name
    changed = [n for (n, a), b in zip(model.named_parameters(), control.parameters()) if a.numel() > 8 and not torch.equal(a, b)]
    assert len(changed) >= len([p for p in model.parameters() if p.numel() > 8 and p.unique().numel() > 1])
    assert control.source["control"].startswith("every weight tensor") and control.model_name.endswith("(shuffled weights)")
    assert control.source["weights_sha256"] != model.source.get("weights_sha256", "")


def test_options_that_do_not_fit_are_refused_by_name(model):
    from analyses.registry import OptionError

    with pytest.raises(OptionError, match=r"half 5000: longer than .* allows \(2 times the value\) "
                                          r"\(max_seq_len=\d+ less 1 for the start token\)"):
        induction(model, half=5000)
    with pytest.raises(OptionError, match="lengths 99999: longer than"):
        sink_rate(model, lengths=(99999,))
