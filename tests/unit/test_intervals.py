"""Intervals against SciPy's own (exact binomial; percentile bootstrap), and verdicts that follow from them."""

import numpy as np
import pytest
from scipy import stats

from stats.intervals import (
    BCA_MIN,
    MIN_UNITS,
    PERCENTILE_MIN,
    Interval,
    bca,
    bca_bounds,
    binomial,
    bootstrap,
    interval,
    judge,
    share_above,
    t_mean,
)


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


def test_t_mean_is_scipys_t_interval():
    x = np.random.default_rng(5).gamma(2.0, 1.0, size=12)
    ours = t_mean(x)
    ref = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (ours.lo, ours.hi) == pytest.approx(ref, abs=1e-12) and ours.n == 12 and ours.short == "t"


@pytest.mark.parametrize("statistic", [np.mean, np.median, lambda v: float(np.std(v))])
def test_bca_agrees_with_scipys_bca(statistic):
    x = np.random.default_rng(11).lognormal(size=40)
    ours = bca(x, lambda v: float(statistic(v)), n_boot=20_000, seed=3)
    ref = stats.bootstrap((x,), statistic, n_resamples=20_000, method="BCa", random_state=4).confidence_interval
    width = ref.high - ref.low
    assert abs(ours.lo - ref.low) < 0.05 * width and abs(ours.hi - ref.high) < 0.05 * width
    assert ours.short == "BCa"


def test_bca_corrects_a_biased_bootstrap_where_the_percentile_does_not():
    """A bootstrap distribution shifted below the estimate: BCa's bounds move up by the bias, the percentile's do
    not."""
    boots = np.random.default_rng(0).normal(-0.5, 1.0, 50_000)
    lo, hi = bca_bounds(boots, 0.0, None)
    z0 = stats.norm.ppf(np.mean(boots < 0.0))
    assert lo == pytest.approx(np.quantile(boots, stats.norm.cdf(2 * z0 + stats.norm.ppf(0.025))), abs=1e-9)
    assert (lo + hi) / 2 == pytest.approx(0.5, abs=0.05)  # the reflection of the bias: centred at est + 0.5


def test_interval_chooses_the_method_by_unit_count_and_statistic():
    rng = np.random.default_rng(2)
    assert interval(rng.normal(size=4)).short == "descriptive"
    assert interval(rng.normal(size=MIN_UNITS)).short == "t"
    assert interval(rng.normal(size=PERCENTILE_MIN - 1)).short == "t"
    assert interval(rng.normal(size=PERCENTILE_MIN)).short == "bootstrap"
    assert interval(rng.normal(size=BCA_MIN - 1), np.median).short == "descriptive"
    assert interval(rng.normal(size=BCA_MIN), np.median).short == "BCa"
    x = rng.normal(0.5, 0.1, size=12)
    assert interval(x) == t_mean(x)
    rows = rng.normal(size=(12, 3))  # one row per unit: the mean of the rows' means
    assert interval(rows).estimate == pytest.approx(rows.mean()) and interval(rows).n == 12


def test_a_descriptive_estimate_says_so_and_is_not_judged():
    few = interval([0.6, 0.61, 0.59, 0.62])
    assert few.format("{:.2f}") == "0.60 (descriptive: n = 4, fewer than 8)"
    assert judge(few, above=0.5) == "not judged (descriptive: n = 4, fewer than 8)"
    assert interval([1.0] * 20, np.median).format("{:.1f}") == "1.0 (descriptive: n = 20, fewer than 24)"
    assert t_mean(np.arange(10.0)).format("{:.1f}").endswith("(t), n = 10")


def _old_share_interval(hits: np.ndarray, threshold: float, rng, n_boot: int = 1000):
    """The retrieval row's former interval: a percentile bootstrap over prompts of the count of heads above."""
    n = len(hits)
    weights = np.stack([np.bincount(i, minlength=n) for i in rng.integers(0, n, (n_boot, n))]).astype(float)
    counts = ((weights @ hits) / n > threshold).sum(axis=1)
    return np.quantile(counts, [0.025, 0.975]), float(np.median(counts))


def test_share_above_covers_a_true_count_the_thresholded_bootstrap_misses():
    """Planted heads: 10 far above 0.1, 10 just above it (true score 0.12), 50 that never hit; 32 prompts, a hit
    share per prompt of Binomial(7, score) / 7 (a 7-digit needle). The true count above 0.1 is 20. The percentile
    bootstrap of the count sits below its own estimate (a head just above falls below in many resamples, a head at 0
    never rises) and covers 20 in about 39% of runs; the simultaneous bounds cover it at least at the nominal rate."""
    rng = np.random.default_rng(0)
    scores = np.array([0.5] * 10 + [0.12] * 10 + [0.0] * 50)
    new = old = 0
    below = []
    runs = 200
    for _ in range(runs):
        hits = rng.binomial(7, scores, size=(32, len(scores))) / 7
        iv = share_above(hits, 0.1)
        new += iv.lo * len(scores) - 1e-9 <= 20 <= iv.hi * len(scores) + 1e-9
        (lo, hi), median = _old_share_interval(hits, 0.1, rng)
        old += lo <= 20 <= hi
        below.append(median - iv.estimate * len(scores))
    assert new / runs >= 0.95 - 0.02, new / runs
    assert old / runs < 0.6, old / runs
    assert np.mean(below) < -0.5  # the old bootstrap's median sits below the estimate


def test_share_above_reads_each_items_t_interval_with_bonferroni():
    x = np.column_stack([np.full(10, 0.5), np.linspace(0.0, 0.3, 10), np.zeros(10)])
    iv = share_above(x, 0.1)
    half = stats.t.ppf(1 - 0.05 / 2 / 1, 9) * stats.sem(x[:, 1])  # one item varies: no correction
    assert iv.estimate == pytest.approx(2 / 3)  # 0.5 and 0.15 above 0.1
    assert iv.lo == pytest.approx((1 + (0.15 - half > 0.1)) / 3) and iv.hi == pytest.approx(2 / 3)
    assert iv.short == "simultaneous t" and iv.n == 10
    with pytest.raises(ValueError, match="share_above"):
        share_above(np.ones(5), 0.1)
