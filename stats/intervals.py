"""Intervals for the estimates poslens reports, and verdicts that follow from them.

Every summary behind a known result is an estimate over units (sequences, prompts, stream buckets, heads) and is
reported as ``Interval(estimate, lo, hi, n, method)``: a 95% percentile bootstrap over the units (seeded, so a seed
gives the same interval), or the exact Clopper-Pearson interval where the estimate is a count of successes in ``n``
independent trials. ``judge`` turns an interval and a paper's number or range into a verdict that holds only where the
interval clears it: "agrees", "differs", or "inconclusive at n = ...".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

LEVEL = 0.95
N_BOOT = 10_000
SEED = 0


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: ``lo <= estimate <= hi`` over ``n`` units, by ``method``."""

    estimate: float
    lo: float
    hi: float
    n: int
    method: str

    def format(self, fmt: str = "{:.3f}", scale: float = 1.0, unit: str = "") -> str:
        """``0.740 [0.701, 0.778], n = 100`` (each number ``fmt``-formatted after multiplying by ``scale``)."""
        e, lo, hi = (fmt.format(x * scale) for x in (self.estimate, self.lo, self.hi))
        return f"{e}{unit} [{lo}, {hi}], n = {self.n}"

    def pct(self, digits: int = 1) -> str:
        """The interval of a share as percentages: ``74.0% [70.1, 77.8], n = 100``."""
        return self.format(f"{{:.{digits}f}}", 100.0, "%")

    def as_dict(self, prefix: str = "") -> dict:
        """Columns for a tidy frame: ``{prefix}estimate, {prefix}lo, {prefix}hi, {prefix}n, {prefix}method``."""
        return {f"{prefix}estimate": self.estimate, f"{prefix}lo": self.lo, f"{prefix}hi": self.hi,
                f"{prefix}n": self.n, f"{prefix}method": self.method}


def bootstrap(values, statistic: Callable[[np.ndarray], float] | None = None, *, n_boot: int = N_BOOT,
              seed: int = SEED, level: float = LEVEL) -> Interval:
    """Percentile bootstrap of ``statistic`` (default: the mean) over the units in ``values`` (one value per unit,
    or one row per unit of a 2-D array), resampled with replacement ``n_boot`` times from ``seed``."""
    x = np.asarray(values, dtype=float)
    if x.ndim not in (1, 2) or len(x) == 0:
        raise ValueError(f"bootstrap needs one value (or one row) per unit, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"bootstrap: {int((~np.isfinite(x)).sum())} of the values are NaN or infinite")
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
    if any(math.isnan(v) for v in (lo, hi)):
        return f"inconclusive at n = {interval.n}"
    if above is not None:
        ok, bad = lo > above, hi <= above
    elif below is not None:
        ok, bad = hi < below, lo >= below
    else:
        a, b = within
        ok, bad = a <= lo and hi <= b, hi < a or lo > b
    return "agrees" if ok else "differs" if bad else f"inconclusive at n = {interval.n}"
