"""Intervals against SciPy's own (exact binomial; percentile bootstrap), and verdicts that follow from them."""

import numpy as np
import pytest
from scipy import stats

from stats.intervals import Interval, binomial, bootstrap, judge


@pytest.mark.parametrize("k,n", [(0, 16), (3, 56), (9, 56), (56, 56), (74, 100)])
def test_binomial_is_scipys_exact_interval(k, n):
    ours = binomial(k, n)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert ours.estimate == pytest.approx(k / n)
    assert ours.lo == pytest.approx(ref.low, abs=1e-12) and ours.hi == pytest.approx(ref.high, abs=1e-12)
    assert ours.n == n


def test_bootstrap_mean_agrees_with_scipy_percentile_bootstrap():
    x = np.random.default_rng(3).exponential(size=200)
    ours = bootstrap(x, n_boot=20_000, seed=1)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile", random_state=2).confidence_interval
    assert ours.estimate == pytest.approx(x.mean())
    assert abs(ours.lo - ref.low) < 0.01 and abs(ours.hi - ref.high) < 0.01
    # a normal-theory interval of the mean is a third, independent check of the width
    se = x.std(ddof=1) / np.sqrt(len(x))
    assert (ours.hi - ours.lo) == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_bootstrap_is_deterministic_per_seed_and_covers_a_planted_mean():
    x = np.random.default_rng(0).normal(0.5, 0.1, size=100)
    assert bootstrap(x, seed=7) == bootstrap(x, seed=7)
    assert bootstrap(x, seed=7) != bootstrap(x, seed=8)
    ci = bootstrap(x)
    assert ci.lo < 0.5 < ci.hi and ci.n == 100


def test_bootstrap_rows_are_units_and_a_custom_statistic_is_resampled():
    rows = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    ci = bootstrap(rows, n_boot=500)
    assert ci.estimate == pytest.approx(0.5) and ci.n == 4
    med = bootstrap([1, 2, 3, 100], statistic=np.median, n_boot=500)
    assert med.estimate == 2.5 and med.lo >= 1 and med.hi <= 100


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], np.zeros((2, 2, 2))])
def test_bootstrap_refuses_what_is_not_one_value_per_unit(bad):
    with pytest.raises(ValueError, match="bootstrap"):
        bootstrap(bad)


def test_judge_needs_the_whole_interval_on_one_side():
    ci = Interval(0.76, 0.74, 0.78, 16, "x")
    assert judge(ci, above=0.5) == "agrees"
    assert judge(ci, above=0.77) == "inconclusive at n = 16"
    assert judge(ci, above=0.8) == "differs"
    assert judge(ci, below=0.8) == "agrees" and judge(ci, below=0.7) == "differs"
    assert judge(ci, within=(0.7, 0.8)) == "agrees"
    assert judge(ci, within=(0.77, 0.9)) == "inconclusive at n = 16"
    assert judge(ci, within=(0.8, 0.9)) == "differs"
    with pytest.raises(ValueError, match="exactly one"):
        judge(ci, above=0.1, below=0.9)


def test_formats_carry_the_interval_and_n():
    ci = binomial(74, 100)
    assert ci.pct().startswith("74.0% [") and ci.pct().endswith("n = 100")
    assert set(ci.as_dict("sink_")) == {"sink_estimate", "sink_lo", "sink_hi", "sink_n", "sink_method"}
