import numpy as np
import pytest
import torch

from analyses.niah_accuracy import wilson
from analyses.positions import jumps_and_plateaus, position_patterns, position_ranges
from corpora.contexts import wikipedia_windows
from tests.helpers import tiny_model
from tests.repo_helpers import tiny_repo


def test_ranges_of_integer_rope_nope_and_increments():
    df = position_ranges(tiny_repo("nope"), n_docs=2, length=300, source="wiki")
    n = df["n_tokens"]
    assert (df[df.layer == 0]["d"] == n[df.layer == 0] - 1).all()  # layer 0 is integer RoPE
    assert (df[df.layer > 0]["d"] == 0).all()  # NoPE layers report position 0
    inc = tiny_model("per-layer", max_seq_len=512)
    df = position_ranges(inc, n_docs=1, length=300, source="wiki")
    ids = wikipedia_windows(inc.tokenizer, 1, 300, seed=0)[0].ids  # the context the analysis read
    assert df["n_tokens"].iloc[0] == len(ids) == 300
    _, cache = inc.run_with_cache(torch.tensor([ids]))
    delta = cache["blocks.1.hook_delta"][0]
    assert df[(df.layer == 1)]["d"].iloc[0] == pytest.approx(float(delta[1:].sum()), rel=1e-4)


def test_planted_plateaus_and_jumps_are_counted():
    model = tiny_repo("repo")
    planted = torch.cat([torch.zeros(40), torch.arange(1, 41).float(), 100 + torch.zeros(40),
                         200 + 0.5 * torch.arange(1, 177)])
    model.add_hook("blocks.2.attn.hook_positions", lambda t, hook: planted[: t.shape[-1]].expand_as(t).clone())
    df = position_patterns(model, layers=[2], heads=[0, 3], length=256, jump_factor=5, plateau_factor=0.1)
    model.reset_hooks()
    for head in (0, 3):
        g = df[df["head"] == head]
        np.testing.assert_allclose(g["position"], planted[: len(g)].numpy())
        assert g["n_jumps"].iloc[0] == 2  # 40 -> 100 and 100 -> 200.5
        assert g["longest_plateau"].iloc[0] == 40  # tokens 0..39 at 0 and tokens 80..119 at 100
    assert set(df["mode"]) == {"repo"}


def test_jump_and_plateau_rules_on_hand_cases():
    is_jump, run, median, longest = jumps_and_plateaus(np.array([0, 1, 2, 2.05, 2.06, 9, 10.0]), 5, 0.1)
    assert median == 1.0 and list(np.flatnonzero(is_jump)) == [5] and longest == 3
    assert jumps_and_plateaus(np.arange(10.0), 5, 0.1)[3] == 1


def test_bad_layer_or_head_is_named():
    with pytest.raises(ValueError, match="layers 7: tiny-repo has n_layers 3, so it must be between 0 and 2"):
        position_patterns(tiny_repo("repo"), layers=[7])
    with pytest.raises(ValueError, match="heads 9: tiny-repo has n_heads 4, so it must be between 0 and 3"):
        position_patterns(tiny_repo("repo"), heads=[9])


def test_wilson_interval_known_values():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 20)[0] == pytest.approx(0.0, abs=1e-12)
