"""The known-results table's types, shared by the rows (``poslens.known_claims``) and the renderer
(``poslens.known_results``): the CSVs of one run (``Results``), a claim and its verdict ``Rule``, an observation."""


from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from poslens.deprecated import current_columns as current

EVIDENCE = Path(__file__).resolve().parent.parent / "docs" / "known-results"
NAMES = {"smollm2": "SmolLM2-135M", "gemma3-270m": "Gemma 3 270M", "minilm": "MiniLM-L6"}


class Results:
    """The CSVs of one real-model run, read once each."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._read: dict[str, pd.DataFrame] = {}

    def __getitem__(self, analysis: str) -> pd.DataFrame:
        if analysis not in self._read:
            path = self.folder / f"{analysis}.csv"
            if not path.is_file() and (self.folder / f"{analysis}.csv.gz").is_file():
                path = self.folder / f"{analysis}.csv.gz"  # the kept evidence is compressed
            if not path.is_file():
                raise FileNotFoundError(f"{path}: the known-results table needs {analysis}'s CSV from "
                                        f"`poslens reproduce --real-models`")
            # the kept evidence ran before some columns took their options' names and is kept as it ran: read
            # under the current names without a warning; any other folder's old names warn
            self._read[analysis] = current(analysis, pd.read_csv(path), str(path),
                                           quiet=self.folder.resolve() == EVIDENCE.resolve())
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


@dataclass(frozen=True)
class Rule:
    """A claim's verdict rule: its text (the threshold and the condition it reads), written on ``written`` before the
    run that judges it; ``revisions`` list every earlier rule with the verdict it gave, shown in the row."""

    text: str
    written: str
    revisions: tuple[Revision, ...] = ()

    def history(self) -> str:
        now = f"rule (written {self.written}): {self.text}"
        return " ".join([now] + [f"Rule revised on {r.on} ({r.why}): the earlier rule ({r.earlier}) gave "
                                 f"{r.earlier_verdict}." for r in self.revisions])


@dataclass(frozen=True)
class Claim:
    finding: str
    source: str
    quote: str  # the claim as the paper states it
    where: str  # section, table or figure
    paper: str  # the paper's numbers and models
    protocol: str  # where poslens' protocol departs from the authors'
    models: tuple[str, ...]
    measure: Callable[[Results, str], str]  # poslens' number for one model
    verdict: Callable[[Results], str]  # with the rule it follows


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


