import numpy as np
import torch
from scipy.special import softmax
from scipy.stats import entropy

from analyses.kl_ablation import group_of, kl_per_head


def test_kl_matches_scipy_entropy_row_by_row():
    g = torch.Generator().manual_seed(0)
    comps = {c: torch.randn(3, 5, 7, generator=g) for c in ("ap", "sem", "rp")}
    got = kl_per_head(comps)
    total = sum(v.numpy().astype(np.float64) for v in comps.values())
    for c, comp in comps.items():
        p = softmax(total, -1)
        q = softmax(total - comp.numpy(), -1)
        expected = np.array([[entropy(p[h, r], q[h, r]) for r in range(5)] for h in range(3)]).mean(-1)
        np.testing.assert_allclose(got[c].numpy(), expected, rtol=1e-5)


def test_masked_keys_contribute_nothing():
    g = torch.Generator().manual_seed(1)
    s = torch.randn(2, 4, 4, generator=g)
    ap = torch.randn(2, 4, 4, generator=g)
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    comps = {"sem": s.masked_fill(mask, float("-inf")), "ap": ap.masked_fill(mask, 0.0)}
    out = kl_per_head(comps)
    for c, rest in (("ap", s), ("sem", ap)):  # removing c leaves the other component over the visible keys
        expected = []
        for h in range(2):
            rows = []
            for r in range(4):
                full = (s[h, r, : r + 1] + ap[h, r, : r + 1]).double().numpy()
                rows.append(entropy(softmax(full), softmax(rest[h, r, : r + 1].double().numpy())))
            expected.append(np.mean(rows))
        np.testing.assert_allclose(out[c].numpy(), expected, rtol=1e-5)
        assert (out[c] > 0).all()


def test_nan_logits_give_nan_kl_never_zero():
    comps = {"ap": torch.randn(2, 3, 3), "sem": torch.randn(2, 3, 3)}
    comps["sem"][1, 0, 2] = float("nan")
    out = kl_per_head(comps)
    assert torch.isnan(out["ap"][1]) and torch.isnan(out["sem"][1])
    assert torch.isfinite(out["ap"][0]) and torch.isfinite(out["sem"][0])


def test_taxonomy_rule():
    assert group_of(0.6, 0.3, 0.1, 0.25) == "AP-oriented"
    assert group_of(0.1, 0.8, 0.1, 0.25) == "semantic-oriented"
    assert group_of(0.05, 0.6, 0.35, 0.25) == "RP-supported"
    assert group_of(0.1, 0.3, 0.6, 0.25) == "RP-oriented"
