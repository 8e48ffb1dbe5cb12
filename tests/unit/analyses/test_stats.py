import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from analyses.stats import bootstrap_auc, roc_auc


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_sklearn_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 500)
    s = rng.normal(size=500) + y * rng.uniform(0, 2)
    assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    tied = np.round(s, 0)
    assert roc_auc(y, tied) == pytest.approx(roc_auc_score(y, tied), abs=1e-12)


def test_auc_extremes_and_errors():
    assert roc_auc([0, 0, 1, 1], [1, 2, 3, 4]) == 1.0
    assert roc_auc([0, 0, 1, 1], [4, 3, 2, 1]) == 0.0
    assert roc_auc([0, 1, 0, 1], [5, 5, 5, 5]) == 0.5
    with pytest.raises(ValueError, match="both positive and negative"):
        roc_auc([1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="0 or 1"):
        roc_auc([0, 2], [0.1, 0.2])


def test_bootstrap_interval_brackets_the_estimate_is_seeded_and_widens_with_clustering():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 3000)
    s = rng.normal(size=3000) + 0.5 * y
    auc = roc_auc(y, s)
    lo, hi = bootstrap_auc(y, s, n_boot=400, seed=1)
    assert lo < auc < hi and hi - lo < 0.06
    assert (lo, hi) == bootstrap_auc(y, s, n_boot=400, seed=1)
    # a per-cluster shift makes gaps within a cluster correlated: the cluster bootstrap must be wider
    clusters = np.repeat(np.arange(30), 100)
    s2 = s + rng.normal(size=30)[clusters]
    naive = np.subtract(*bootstrap_auc(y, s2, n_boot=400, seed=1)[::-1])
    clustered = np.subtract(*bootstrap_auc(y, s2, clusters, n_boot=400, seed=1)[::-1])
    assert clustered > naive


def test_bootstrap_matches_a_plain_resampling_loop():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 200)
    s = np.round(rng.normal(size=200) + y, 1)
    clusters = rng.integers(0, 20, 200)
    lo, hi = bootstrap_auc(y, s, clusters, n_boot=300, seed=7)
    # same resamples drawn by hand, each scored by sklearn
    gen = np.random.default_rng(7)
    values = []
    for _ in range(300):
        counts = np.bincount(gen.integers(0, 20, 20), minlength=20)
        idx = np.concatenate([np.flatnonzero(clusters == c).repeat(k) for c, k in enumerate(counts)])
        if len(set(y[idx])) == 2:
            values.append(roc_auc_score(y[idx], s[idx]))
    assert lo == pytest.approx(np.quantile(values, 0.025), abs=1e-9)
    assert hi == pytest.approx(np.quantile(values, 0.975), abs=1e-9)


def test_guards():
    y, s = np.array([0, 1, 0, 1]), np.array([0.1, 0.9, 0.2, 0.8])
    with pytest.raises(ValueError, match="finite"):
        roc_auc(y, np.array([0.1, np.nan, 0.2, 0.3]))
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_auc(y, s, n_boot=0)
    with pytest.raises(ValueError, match="both positive and negative"):
        bootstrap_auc(np.ones(4), s)
    lo, hi = bootstrap_auc(y, s, clusters=np.zeros(4), n_boot=10)  # one document: no interval to give
    assert np.isnan(lo) and np.isnan(hi)
