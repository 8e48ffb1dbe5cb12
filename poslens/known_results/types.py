"""The known-results table's types, shared by the rows (``poslens.known_results.claims``) and the renderer
(``poslens.known_results.render``): the CSVs of one run (``Results``), a claim and its verdict ``Rule``, an
observation, and the intervals and shares the rows print."""


from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from stats.intervals import (
    LEVEL,
    MIN_UNITS,
    N_BOOT,
    PERCENTILE_MIN,
    SEED,
    Interval,
    descriptive,
    interval,
    judge,
)

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "known-results"
KNOWN_FOLDER = "known"  # the real-model runs' folder in a report: the main job's analyses, on other models
STEPS = ".steps"  # a report folder's records of the steps done: <analysis>.json (commit, key, seconds, files)
NO_UNITS = "no interval: the kept CSV holds per-head means only"


class Results:
    """The CSVs of one real-model run, read once each."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._read: dict[str, pd.DataFrame] = {}
        self._units: dict[str, pd.DataFrame | None] = {}

    def units(self, analysis: str) -> pd.DataFrame | None:
        """The run's ``NAME.units.csv`` (plain or gzipped): its unit-level values; None where it kept none."""
        if analysis not in self._units:
            from stats.units import read

            self._units[analysis] = read(self.folder / f"{analysis}.csv")
        return self._units[analysis]

    def __getitem__(self, analysis: str) -> pd.DataFrame:
        if analysis not in self._read:
            path = self.folder / f"{analysis}.csv"
            if not path.is_file() and (self.folder / f"{analysis}.csv.gz").is_file():
                path = self.folder / f"{analysis}.csv.gz"  # the kept evidence is compressed
            if not path.is_file():
                raise FileNotFoundError(f"{path}: the known-results table needs {analysis}'s CSV from "
                                        f"`poslens reproduce --real-models`")
            self._read[analysis] = pd.read_csv(path)
        return self._read[analysis]

    def model(self, analysis: str, model: str, **where) -> pd.DataFrame:
        df = self[analysis]
        df = df[df["model"] == model]
        for column, value in where.items():
            df = df[df[column] == value]
        if df.empty:
            raise ValueError(f"{self.folder / (analysis + '.csv')}: no rows for model {model!r} with {where}")
        return df


@dataclass(frozen=True)
class Revision:
    """A rule replaced after a run had been judged by it: the row keeps the earlier rule and what it gave."""

    on: str  # the date (and commit) of the change
    earlier: str  # the earlier rule, as it was written
    earlier_verdict: str  # what the earlier rule gave on the data it judged
    why: str


INTERVALS_CHOSEN = "2026-11-29 (issue 45)"


def method_revision(earlier: str, earlier_verdict: str, why: str = "") -> Revision:
    """A rule whose interval's method changed with ``stats.intervals.interval`` (issue 45): the earlier wording and
    the verdict it gave on the kept run."""
    return Revision(INTERVALS_CHOSEN, earlier, earlier_verdict,
                    why or "a percentile bootstrap over fewer than 32 units under-covers "
                           "(tests/unit/test_interval_coverage.py); the method is now chosen by the number of units")


@dataclass(frozen=True)
class Rule:
    """A claim's verdict rule: its text (the threshold and the condition it reads), written on ``written`` before the
    run that judges it; ``revisions`` list every earlier rule with the verdict it gave, shown in the row."""

    text: str
    written: str
    revisions: tuple[Revision, ...] = ()

    def history(self) -> str:
        now = f"rule (written {self.written}): {self.text.rstrip('.')}."
        return " ".join([now] + [f"Rule revised on {r.on} ({r.why}): the earlier rule ({r.earlier}) gave "
                                 f"{r.earlier_verdict}." for r in self.revisions])


@dataclass(frozen=True)
class Protocol:
    """A protocol text whose run facts (units, lengths, conditions, what was kept) are read from the kept run:
    ``text`` with ``{name}`` fields that ``facts(results)`` fills from its CSVs and provenance. ``cited``: every
    number the text itself states (the paper's, the authors' code's), so that a run fact written into the text
    instead of read from the run fails a test."""

    text: str
    facts: Callable[[Results], dict]
    cited: tuple[str, ...] = ()

    def __call__(self, r: Results) -> str:
        return self.text.format(**self.facts(r))


def run_options(r: Results, analysis: str, model: str | None = None) -> dict:
    """The options the kept run gave ``analysis`` (its provenance file's ``arguments``; a model's own where the run
    set them per model); {} where the run kept no provenance."""
    import json

    path = r.folder / f"{analysis}.provenance.json"
    if not path.is_file():
        return {}
    args = dict(json.loads(path.read_text(encoding="utf-8")).get("arguments") or {})
    own = (args.pop("per_model", None) or {}).get(model, {})
    return {**args, **own}


def per_model(values: dict[str, object]) -> str:
    """One fact per model: the value once where every model shares it, else each model's, named as the cells name
    them."""
    from poslens.known_results.models import LABELS

    texts = {m: str(v) for m, v in values.items()}
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return " and ".join(f"{v} for {LABELS.get(m, m)}" for m, v in texts.items())


@dataclass(frozen=True)
class Claim:
    finding: str
    source: str
    quote: str  # the claim as the paper states it
    where: str  # section, table or figure
    paper: str  # the paper's numbers and models
    protocol: str | Protocol  # where poslens' protocol departs from the authors' (run facts read from the run)
    models: tuple[str, ...]
    measure: Callable[[Results, str], str]  # poslens' number for one model
    verdict: Callable[[Results], str]  # from the numbers alone, by ``rule``
    rule: Rule | None = None  # None: no rule was written before the data (the row says so)

    def protocol_text(self, r: Results) -> str:
        return self.protocol(r) if isinstance(self.protocol, Protocol) else self.protocol


@dataclass(frozen=True)
class Observation:
    finding: str
    context: str  # the related literature, and why it is no claim of the paper
    models: tuple[str, ...]
    measure: Callable[[Results, str], str]
    notes: str = ""


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def head(row) -> str:
    return f"L{int(row['layer'])}H{int(row['head'])}"




def no_interval(estimate: float, n: int) -> Interval:
    """A summary whose CSV keeps no unit-level values: its estimate, and no bounds (NaN)."""
    return Interval(float(estimate), float("nan"), float("nan"), int(n), NO_UNITS)


def has_interval(interval: Interval) -> bool:
    return not (np.isnan(interval.lo) or np.isnan(interval.hi))


def shown(interval: Interval | None, digits: int = 1) -> str:
    """A share with its interval and n: ``74.0% [70.1, 77.8], n = 100``, or ``73.7% (no interval), n = 16``."""
    if interval is None:
        return "n/a"
    if has_interval(interval) or interval.descriptive:
        return interval.pct(digits)
    return f"{100 * interval.estimate:.{digits}f}% (no interval), n = {interval.n}"


def verdict_of(interval: Interval | None, **rule) -> str:
    """``stats.intervals.judge`` on ``interval``; "inconclusive (no interval)" where the CSV kept no units and
    "not run" where the condition is missing."""
    if interval is None:
        return "not run"
    return judge(interval, **rule) if has_interval(interval) or interval.descriptive else "inconclusive (no interval)"


def rate_interval(units: np.ndarray) -> Interval:
    """The interval (``stats.intervals.interval``, over the rows of ``units``: one row per sequence, one column per
    head) of the mean over heads."""
    return interval(np.asarray(units, dtype=float).mean(axis=1))


def difference(a: np.ndarray, b: np.ndarray, *, n_boot: int = N_BOOT, seed: int = SEED,
               level: float = LEVEL) -> Interval:
    """mean(a) - mean(b) of two independent samples of units, with both sample sizes (``n``, ``n_other``): the
    percentile bootstrap (each sample resampled, ``n_boot`` times from ``seed``) where both hold ``PERCENTILE_MIN``
    units, a Welch t interval where both hold ``MIN_UNITS``, else descriptive."""
    from scipy.stats import t

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    est, na, nb = float(a.mean() - b.mean()), len(a), len(b)
    if min(na, nb) < MIN_UNITS:
        return replace(descriptive(est, min(na, nb)), n=na, n_other=nb)
    if min(na, nb) < PERCENTILE_MIN:
        va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
        df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1)) if va + vb > 0 else na + nb - 2
        half = float(t.ppf((1 + level) / 2, df)) * float(np.sqrt(va + vb))
        return Interval(est, est - half, est + half, na, f"Welch t interval of a difference of means, {na} and {nb} "
                                                         f"independent units", n_other=nb)
    rng = np.random.default_rng(seed)
    boots = (a[rng.integers(0, na, size=(n_boot, na))].mean(axis=1)
             - b[rng.integers(0, nb, size=(n_boot, nb))].mean(axis=1))
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return Interval(est, float(min(lo, est)), float(max(hi, est)), na,
                    f"percentile bootstrap of a difference of means, {na} and {nb} independent units, "
                    f"{n_boot} resamples, seed {seed}", n_other=nb)
