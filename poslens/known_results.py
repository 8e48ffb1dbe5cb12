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
from pathlib import Path

from poslens.known_claims import CLAIMS, OBSERVATIONS
from poslens.known_types import EVIDENCE, NAMES, Results

MARK = "known-results"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _per_model(row, results: Results) -> str:
    return "<br>".join(f"**{NAMES.get(m, m)}**: {row.measure(results, m)}" for m in row.models)


def render(folder: Path = EVIDENCE) -> str:
    """The markdown of both tables from the CSVs in ``folder``."""
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
