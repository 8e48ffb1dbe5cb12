"""Intervals for the estimates poslens reports, and verdicts that follow from them.

Every summary behind a known result is an estimate over units (sequences, prompts, stream buckets, heads) and is
reported as ``Interval(estimate, lo, hi, n, method)``. ``interval`` chooses the method by the statistic and the number
of units, so that it covers (``tests/unit/test_interval_coverage.py`` measures it): below ``MIN_UNITS`` units no
interval at all (the estimate is descriptive); a mean over fewer than ``PERCENTILE_MIN`` units gets a Student-t
interval, another statistic a BCa bootstrap (from ``BCA_MIN`` units; descriptive below); from ``PERCENTILE_MIN`` units
on, the percentile bootstrap (seeded, so a seed gives the same interval). A count of successes in ``n`` independent
trials gets the exact Clopper-Pearson interval. ``judge`` turns an interval and a paper's number or range into a
verdict that holds only where the interval clears it: "agrees", "differs", or "inconclusive at n = ...".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

LEVEL = 0.95
N_BOOT = 10_000
SEED = 0
MIN_UNITS = 8  # below this no interval is printed: the estimate is descriptive (issue 45)
PERCENTILE_MIN = 32  # the percentile bootstrap covers from here (the coverage test); below it t or BCa
BCA_MIN = 24  # a statistic other than a mean: BCa covers from here (the coverage test), descriptive below
DESCRIPTIVE = "descriptive"
# the short names a table cell prints after an interval, by the start of ``Interval.method``
SHORT = (("percentile bootstrap", "bootstrap"), ("BCa", "BCa"), ("bias-corrected", "BCa"), ("Student t", "t"),
         ("Welch t", "t"), ("exact binomial", "exact binomial"), (DESCRIPTIVE, DESCRIPTIVE),
         ("simultaneous t bounds", "simultaneous t"))


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: ``lo <= estimate <= hi`` over ``n`` units, by ``method``."""

    estimate: float
    lo: float
    hi: float
    n: int
    method: str
    n_other: int = 0  # a difference of two samples: the second sample's units (``n`` the first's)

    @property
    def units(self) -> str:
        """``n = 100``, or ``n = 100 and 50`` for a difference of two samples."""
        return f"n = {self.n}" + (f" and {self.n_other}" if self.n_other else "")

    @property
    def short(self) -> str:
        """The method's short name, as a table cell prints it: "t", "BCa", "bootstrap", "exact binomial",
        "descriptive" (else the method as it is)."""
        return next((name for start, name in SHORT if self.method.startswith(start)), self.method)

    @property
    def descriptive(self) -> bool:
        return self.method.startswith(DESCRIPTIVE)

    @property
    def least(self) -> int:
        """The fewest units an interval of this estimate needs (``MIN_UNITS`` unless the method says more)."""
        import re

        found = re.search(r"fewer than (\d+)", self.method)
        return int(found.group(1)) if found else MIN_UNITS

    def format(self, fmt: str = "{:.3f}", scale: float = 1.0, unit: str = "") -> str:
        """``0.740 [0.701, 0.778] (t), n = 100`` (each number ``fmt``-formatted after multiplying by ``scale``; the
        method's short name in brackets), or ``0.740 (descriptive: n = 4, fewer than 8)`` where the units are too
        few."""
        e, lo, hi = (fmt.format(x * scale) for x in (self.estimate, self.lo, self.hi))
        if self.descriptive:
            return f"{e}{unit} (descriptive: {self.units}, fewer than {self.least})"
        return f"{e}{unit} [{lo}, {hi}] ({self.short}), {self.units}"

    def pct(self, digits: int = 1) -> str:
        """The interval of a share as percentages: ``74.0% [70.1, 77.8] (bootstrap), n = 100``."""
        return self.format(f"{{:.{digits}f}}", 100.0, "%")

    def as_dict(self, prefix: str = "") -> dict:
        """Columns for a tidy frame: ``{prefix}estimate, {prefix}lo, {prefix}hi, {prefix}n, {prefix}method``."""
        return {f"{prefix}estimate": self.estimate, f"{prefix}lo": self.lo, f"{prefix}hi": self.hi,
                f"{prefix}n": self.n, f"{prefix}method": self.method}


def bootstrap(values, statistic: Callable[[np.ndarray], float] | None = None, *, n_boot: int = N_BOOT,
              seed: int = SEED, level: float = LEVEL) -> Interval:
    """Percentile bootstrap of ``statistic`` (default: the mean) over the units in ``values`` (one value per unit,
    or one row per unit of a 2-D array), resampled with replacement ``n_boot`` times from ``seed``."""
    x = _units(values, "bootstrap")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    n = len(x)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    if statistic is None:
        est = float(x.mean()) if x.ndim == 1 else float(x.mean(axis=0).mean())
        boots = x[idx].mean(axis=1) if x.ndim == 1 else x[idx].mean(axis=(1, 2))
        method = f"percentile bootstrap of the mean over {n} units, {n_boot} resamples, seed {seed}"
    else:
        est = float(statistic(x))
        boots = np.array([statistic(x[i]) for i in idx], dtype=float)
        method = f"percentile bootstrap over {n} units, {n_boot} resamples, seed {seed}"
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Interval(est, float(min(lo, est)), float(max(hi, est)), n, method)


def _units(values, what: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim not in (1, 2) or len(x) == 0:
        raise ValueError(f"{what} needs one value (or one row) per unit, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{what}: {int((~np.isfinite(x)).sum())} of the values are NaN or infinite")
    return x


def descriptive(estimate: float, n: int, least: int = MIN_UNITS) -> Interval:
    """An estimate over fewer units than an interval of it needs (``least``): no bounds (NaN), marked descriptive."""
    return Interval(float(estimate), float("nan"), float("nan"), int(n),
                    f"{DESCRIPTIVE}: {n} units, fewer than {least}, carry no interval")


def t_mean(values, level: float = LEVEL) -> Interval:
    """Student-t interval of the mean of one value per unit: mean +- t_{n-1} x sd / sqrt(n)."""
    from scipy.stats import t

    x = _units(values, "t_mean")
    if x.ndim != 1 or len(x) < 2:
        raise ValueError(f"t_mean needs at least 2 values, one per unit, got shape {x.shape}")
    n, est = len(x), float(x.mean())
    half = float(t.ppf((1 + level) / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    return Interval(est, est - half, est + half, n, f"Student t interval of the mean over {n} units")


def bca_bounds(boots: np.ndarray, estimate: float, jackknife: np.ndarray | None,
               level: float = LEVEL) -> tuple[float, float]:
    """The BCa bounds (Efron 1987) from bootstrap replicates, the estimate and its leave-one-unit-out values: the
    percentiles moved by the bias correction z0 (the share of replicates below the estimate, ties counted half) and
    the acceleration a (the jackknife's skewness; ``jackknife=None``: a = 0, the bias-corrected percentile)."""
    from scipy.stats import norm

    boots = np.asarray(boots, dtype=float)
    below = (np.sum(boots < estimate) + 0.5 * np.sum(boots == estimate)) / len(boots)
    z0 = float(norm.ppf(np.clip(below, 1 / len(boots), 1 - 1 / len(boots))))
    a = 0.0
    if jackknife is not None:
        d = np.mean(jackknife) - np.asarray(jackknife, dtype=float)
        denominator = 6 * np.sum(d ** 2) ** 1.5
        a = float(np.sum(d ** 3) / denominator) if denominator > 0 else 0.0
    alpha = (1 - level) / 2
    quantiles = []
    for z in (norm.ppf(alpha), norm.ppf(1 - alpha)):
        quantiles.append(float(norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))))
    lo, hi = np.quantile(boots, quantiles)
    return float(lo), float(hi)


def bca(values, statistic: Callable[[np.ndarray], float] | None = None, *, n_boot: int = N_BOOT,
        seed: int = SEED, level: float = LEVEL) -> Interval:
    """BCa bootstrap of ``statistic`` (default: the mean) over the units in ``values`` (one value or one row per
    unit), ``n_boot`` resamples from ``seed``; the acceleration from the leave-one-unit-out values."""
    x = _units(values, "bca")
    stat = statistic or (lambda v: float(v.mean()))
    n = len(x)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boots = np.array([stat(x[i]) for i in idx], dtype=float)
    est = float(stat(x))
    jack = np.array([stat(np.delete(x, i, axis=0)) for i in range(n)], dtype=float)
    lo, hi = bca_bounds(boots, est, jack, level)
    return Interval(est, min(lo, est), max(hi, est), n, f"BCa bootstrap over {n} units, {n_boot} resamples, "
                                                         f"seed {seed}")


def interval(values, statistic: Callable[[np.ndarray], float] | None = None, *, n_boot: int = N_BOOT,
             seed: int = SEED, level: float = LEVEL) -> Interval:
    """The interval of ``statistic`` (default: the mean) over the units in ``values`` by the method that covers at
    their number (``tests/unit/test_interval_coverage.py``): descriptive below ``MIN_UNITS`` units; from
    ``PERCENTILE_MIN`` units the percentile bootstrap; between, a Student-t interval of a mean of one value per unit,
    else BCa (descriptive below ``BCA_MIN`` units, where BCa does not cover)."""
    x = _units(values, "interval")
    n = len(x)
    if n < (MIN_UNITS if statistic is None else BCA_MIN):
        est = float(statistic(x)) if statistic is not None else float(x.mean(axis=0).mean() if x.ndim == 2
                                                                        else x.mean())
        return descriptive(est, n, MIN_UNITS if statistic is None else BCA_MIN)
    if n >= PERCENTILE_MIN:
        return bootstrap(x, statistic, n_boot=n_boot, seed=seed, level=level)
    if statistic is None:
        return t_mean(x if x.ndim == 1 else x.mean(axis=1), level)
    return bca(x, statistic, n_boot=n_boot, seed=seed, level=level)


def share_above(values, threshold: float, level: float = LEVEL) -> Interval:
    """The share of items (columns of ``values``, one row per unit) whose mean over the units exceeds ``threshold``,
    with bounds that hold for the items' true means: the share of items whose Student-t interval lies above the
    threshold, and the share whose interval reaches above it, each interval at level ``1 - (1 - level) / m``
    (Bonferroni over the ``m`` items whose values vary; an item that never varies is its own value), so both bounds
    hold together with at least ``level``. A bootstrap of the thresholded share is biased by the threshold: an item
    just above it falls below in many resamples, one at zero never rises."""
    from scipy.stats import t

    x = _units(values, "share_above")
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"share_above needs [unit, item] values over at least 2 units, got shape {x.shape}")
    n, items = x.shape
    mean, sd = x.mean(axis=0), x.std(axis=0, ddof=1)
    m = int((sd > 0).sum())
    half = float(t.ppf(1 - (1 - level) / (2 * max(m, 1)), n - 1)) * sd / math.sqrt(n)
    est = float((mean > threshold).mean())
    lo, hi = float((mean - half > threshold).mean()), float((mean + half > threshold).mean())
    return Interval(est, min(lo, est), max(hi, est), n,
                    f"simultaneous t bounds of {items} items' means over {n} units (Bonferroni over {m} that vary): "
                    f"items surely above {threshold:g}, and items possibly above it")


def binomial(successes: int, n: int, level: float = LEVEL) -> Interval:
    """Exact (Clopper-Pearson) interval of a share of ``successes`` in ``n`` independent trials."""
    from scipy.stats import beta

    if n < 1 or not 0 <= successes <= n or int(successes) != successes:
        raise ValueError(f"binomial interval needs whole 0 <= successes <= n and n >= 1, got {successes} of {n}")
    alpha = 1 - level
    lo = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, n - successes + 1))
    hi = 1.0 if successes == n else float(beta.ppf(1 - alpha / 2, successes + 1, n - successes))
    return Interval(successes / n, lo, hi, n, f"exact binomial (Clopper-Pearson), {successes} of {n}")


def judge(interval: Interval, *, above: float | None = None, below: float | None = None,
          within: tuple[float, float] | None = None) -> str:
    """The verdict an interval supports against a paper's threshold or range.

    ``above=x``: the claim is that the quantity exceeds ``x``; ``below=x``: that it is under ``x``; ``within=(a, b)``:
    that it lies in ``[a, b]``. "agrees" when the whole interval satisfies the claim, "differs" when the whole interval
    contradicts it, otherwise "inconclusive at n = ...".
    """
    given = [above is not None, below is not None, within is not None]
    if sum(given) != 1:
        raise ValueError("judge takes exactly one of above=, below=, within=")
    lo, hi = interval.lo, interval.hi
    if interval.descriptive:
        return f"not judged (descriptive: {interval.units}, fewer than {interval.least})"
    if any(math.isnan(v) for v in (lo, hi)):
        return f"inconclusive at {interval.units}"
    if above is not None:
        ok, bad = lo > above, hi <= above
    elif below is not None:
        ok, bad = hi < below, lo >= below
    else:
        a, b = within
        ok, bad = a <= lo and hi <= b, hi < a or lo > b
    return "agrees" if ok else "differs" if bad else f"inconclusive at {interval.units}"
