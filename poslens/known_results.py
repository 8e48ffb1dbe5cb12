"""The README's "Known results, reproduced": each published claim beside poslens' number on the same definition.

A ``Claim`` holds what a reviewer checks against the paper: the claim as the paper states it (quoted), where it
says so (section, table or figure), the paper's own numbers and models, how poslens' protocol departs from the
authors' (their code read where it is public), and two functions of the real-model CSVs that ``poslens reproduce
--real-models`` writes: poslens' number per model, and the verdict by a rule stated in the row. ``Observation`` rows
are poslens' own findings with no published claim behind them; they carry no verdict.

``render(folder)`` writes the markdown from the CSVs in ``folder``; ``reproduce --real-models`` writes it as
``KNOWN_RESULTS.md``, the CSVs behind the README are kept in ``docs/known-results/``, and a test fails when the README
and ``render(docs/known-results)`` differ. ``python -m poslens.known_results FOLDER --readme README.md`` rewrites the
README's section from a new run.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from poslens.deprecated import current_columns as current

MARK = "known-results"
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


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _per_model(row, results: Results) -> str:
    return "<br>".join(f"**{NAMES.get(m, m)}**: {row.measure(results, m)}" for m in row.models)


def render(folder: Path = EVIDENCE) -> str:
    """The markdown of both tables from the CSVs in ``folder``."""
    from poslens.known_claims import CLAIMS, OBSERVATIONS

    results = Results(folder)
    lines = ["| finding (source) | the claim, as the paper states it | where | the paper's numbers | poslens (same "
             "definition unless the protocol column says otherwise) | protocol: how poslens departs | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in CLAIMS:
        lines.append("| " + " | ".join(_cell(x) for x in (f"{c.finding} ({c.source})", f"“{c.quote}”", c.where, c.paper,
                                                          _per_model(c, results), c.protocol, c.verdict(results)))
                     + " |")
    lines += ["", "**poslens' own observations** (no published claim behind them; related work named for context):", "",
              "| observation | context | poslens |", "| --- | --- | --- |"]
    for o in OBSERVATIONS:
        lines.append("| " + " | ".join(_cell(x) for x in (o.finding, o.context, _per_model(o, results)
                                                         + (f"<br>{o.notes}" if o.notes else ""))) + " |")
    return "\n".join(lines) + "\n"


def readme_section(text: str) -> str:
    m = re.search(rf"<!-- {MARK} -->\n(.*?)<!-- /{MARK} -->", text, re.S)
    if m is None:
        raise ValueError(f"README has no <!-- {MARK} --> ... <!-- /{MARK} --> section")
    return m.group(1)


def write_readme(readme: Path, table: str) -> None:
    text = readme.read_text(encoding="utf-8")
    readme_section(text)
    text = re.sub(rf"(<!-- {MARK} -->\n).*?(<!-- /{MARK} -->)", lambda m: m.group(1) + table + m.group(2), text,
                  flags=re.S)
    readme.write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poslens.known_results", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="a `poslens reproduce --real-models` output folder")
    p.add_argument("--readme", type=Path, help="rewrite this README's known-results section")
    args = p.parse_args(argv)
    table = render(args.folder)
    if args.readme:
        write_readme(args.readme, table)
    else:
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
