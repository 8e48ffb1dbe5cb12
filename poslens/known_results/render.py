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
import datetime as dt
import json
import re
from pathlib import Path

from poslens.known_results.claims import CLAIMS, OBSERVATIONS
from poslens.known_results.models import LABELS, MODEL_NOTES
from poslens.known_results.types import EVIDENCE, KNOWN_FOLDER, STEPS, Results
from stats.intervals import BCA_MIN, MIN_UNITS, N_BOOT, PERCENTILE_MIN, SEED

MARK = "known-results"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _per_model(row, results: Results) -> str:
    return "<br>".join(f"**{LABELS.get(m, m)}**: {row.measure(results, m)}" for m in row.models)


def _verdict(claim, results: Results) -> str:
    """The verdict, then the rule it follows and the rule's history (or that no rule was written before the data)."""
    said = claim.verdict(results)
    if claim.rule is None:
        return f"{said}<br>*no rule was written before the data for this row*"
    return f"{said}<br>*{claim.rule.history()}*"


def _quantisation(file: str) -> str:
    m = re.search(r"[._-]((?:Q|IQ|F|BF)\d[0-9A-Z_]*)\.gguf$", file, re.I)
    return m.group(1).upper() if m else "unquantised"


def models_header(folder: Path) -> list[str]:
    """One line per model, from the provenance files of ``folder`` (weights file, package, format, dtype) and the
    catalog (variant); the start token from the sink-rate CSV where it says; ``MODEL_NOTES`` say why it matters."""
    from interp.catalog import PACKAGED

    about = {name: description.split(",")[0] for name, _, _, _, _, description in PACKAGED}
    seen: dict[str, dict] = {}
    for path in sorted(Path(folder).glob("*.provenance.json")):
        for m in json.loads(path.read_text(encoding="utf-8")).get("models", []):
            seen.setdefault(m["name"], m)
    starts = {}
    try:
        d = Results(folder)["sink-rate"]
        if "start_text" in d:
            starts = d.groupby("model")["start_text"].first().to_dict()
    except FileNotFoundError:
        pass
    lines = []
    order = list(LABELS)
    for name, m in sorted(seen.items(), key=lambda x: order.index(x[0]) if x[0] in order else len(order)):
        file = Path(m.get("gguf") or m.get("path", "")).name  # the file, not the machine's path to it
        quant = _quantisation(file)
        how = (f"a {quant} GGUF de-quantised to {m.get('dtype', 'float32')}" if file.endswith(".gguf")
               else f"{m.get('format', '')}, {m.get('dtype', '')}")
        start = f"; start token `{starts[name]}`" if name in starts and starts[name] != "none" else ""
        lines.append(f"- **{about.get(name, name)}** ({quant if file.endswith('.gguf') else m.get('family', '')}): "
                     f"from `{file}` "
                     f"({m.get('package', 'bundled')}), {how}{start}. {MODEL_NOTES.get(name, '')}".rstrip())
    return lines


RUN = "run.json"  # in a kept folder: the run the CSVs came from (``keep``)


def _how(command: list) -> str:
    words = [str(c) for c in command[:4]]
    if "reproduce" in words:
        return "`poslens reproduce --real-models`"
    if "analyze" in words or any(w.endswith("poslens") for w in words[:1]):
        return "`poslens analyze`"
    return "a script outside the repository" if command else "no command recorded"


def provenance_lines(folder: Path) -> list[str]:
    """Which commit each kept CSV ran at, and by what command (its provenance files): one ``poslens reproduce
    --real-models`` run at one commit is the aim, and then the line names it with its steps' times (``RUN``); where
    the kept CSVs are not from one run, the table says so."""
    runs: dict[str, list[str]] = {}
    commits, hows = set(), set()
    for path in sorted(Path(folder).glob("*.provenance.json")):
        prov = json.loads(path.read_text(encoding="utf-8"))
        commit, how = (prov.get("git_commit") or "?")[:7], _how(prov.get("command") or [])
        commits.add(commit)
        hows.add(how)
        models = ", ".join(m["name"] for m in prov.get("models", []))
        runs.setdefault(prov.get("analysis", path.name), []).append(f"{models} at `{commit}` ({how})")
    record = Path(folder) / RUN
    if len(commits) == 1 and hows == {_how(["reproduce"])} and record.is_file():
        run = json.loads(record.read_text(encoding="utf-8"))
        steps = "; ".join(f"{s['analysis']} {_minutes(s['seconds'])}" for s in run["steps"])
        return [f"**Provenance**: every CSV comes from one `poslens reproduce --real-models` run at commit "
                f"`{next(iter(commits))}`, from {run['started']} to {run['finished']} UTC on {run['machine']} "
                f"(the steps' wall times: {steps}; {_minutes(sum(s['seconds'] for s in run['steps']))} in all)."]
    head = (f"**Provenance**: the kept CSVs ran at {len(commits)} commit{'s' if len(commits) != 1 else ''}"
            + (" (not yet one `reproduce --real-models` run at one commit)" if len(commits) > 1 else "") + ": ")
    return [head + "; ".join(f"{a}: {', '.join(lines)}" for a, lines in runs.items()) + "."]


def units_line(folder: Path) -> str:
    """Which units the kept CSVs drew (``corpora.stages``), from their provenance's ``stage`` argument: units no pilot
    read (``judged``), or the pilots' own."""
    drew = {}
    for path in sorted(Path(folder).glob("*.provenance.json")):
        args = json.loads(path.read_text(encoding="utf-8")).get("arguments") or {}
        if any(k in args for k in ("n_docs", "stream_tokens", "half", "niah_prompts")):  # the steps that draw units
            drew[path.name.removesuffix(".provenance.json")] = args.get("stage", "any")
    if drew and set(drew.values()) == {"judged"}:
        return ("**Units**: every step drew its sequences, articles, prompts and random tokens under stage `judged` "
                "(`corpora.stages`): units disjoint from every pilot's, which read the first 1,000 articles of the "
                "earlier draw order and one article in eight of the rest.")
    pilots = ", ".join(f"{a} ({s})" for a, s in drew.items() if s != "judged")
    return (f"**Units**: not held out. {pilots or 'these steps'} drew their units under stage `any`, the draw every "
            f"pilot made, so the judged samples hold the pilots' units; the rules were written after those pilots. "
            f"A run on held-out units is "
            f"`poslens reproduce --real-models`, whose steps draw under stage `judged` (`corpora.stages`).")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


KEPT = ("*.csv.gz", "*.provenance.json", RUN)  # all a kept folder holds


def keep(run: Path, folder: Path, machine: str, check=None) -> list[Path]:
    """Copy a ``reproduce --real-models`` report's known-results evidence (``run/known``: each CSV gzipped, its
    provenance, and ``RUN``: the commit, times and machine from the steps' records) into ``folder``, replacing the
    evidence kept there, once ``check(staged folder)`` passes (default: ``render``, so a run missing a step's CSV is
    refused before anything is replaced). Refused too: a run whose steps ran at different commits, and a ``folder``
    that is inside the run (or holds it) or holds anything but kept evidence."""
    import gzip
    import shutil

    src, folder = Path(run) / KNOWN_FOLDER, Path(folder)
    records = [json.loads(p.read_text(encoding="utf-8")) | {"analysis": p.stem}
               for p in sorted((src / STEPS).glob("*.json"))]
    if not records:
        raise FileNotFoundError(f"{src / STEPS}: no step records; is {run} a `poslens reproduce --real-models` report?")
    if len({r["commit"] for r in records}) != 1:
        raise ValueError(f"{run}: its steps ran at {len({r['commit'] for r in records})} commits; keep one run's")
    here, there = Path(run).resolve(), folder.resolve()
    if there == here or here in there.parents or there in here.parents:
        raise ValueError(f"--keep {folder}: inside the run {run} (or holding it); keep its evidence elsewhere")
    foreign = [p.name for p in folder.iterdir() if not any(p.match(g) for g in KEPT)] if folder.is_dir() else []
    if foreign:
        raise ValueError(f"--keep {folder}: holds {', '.join(sorted(foreign)[:5])}, which is no kept evidence; "
                         f"choose an empty folder or one written by --keep")
    staged = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    try:
        for r in records:
            with open(src / f"{r['analysis']}.csv", "rb") as f, \
                    gzip.GzipFile(staged / f"{r['analysis']}.csv.gz", "wb", mtime=0) as g:
                shutil.copyfileobj(f, g)
            for name in r.get("files", []):
                if name.endswith(".provenance.json"):
                    shutil.copy2(src / name, staged / name)
        records.sort(key=lambda r: r["finished"])
        starts = [dt.datetime.fromisoformat(r["finished"]) - dt.timedelta(seconds=r["seconds"]) for r in records]
        (staged / RUN).write_text(json.dumps(dict(
            commit=records[0]["commit"], machine=machine, started=min(starts).strftime("%Y-%m-%d %H:%M"),
            finished=max(dt.datetime.fromisoformat(r["finished"]) for r in records).strftime("%Y-%m-%d %H:%M"),
            steps=[dict(analysis=r["analysis"], seconds=r["seconds"]) for r in records]), indent=1) + "\n",
            encoding="utf-8")
        (render if check is None else check)(staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    staged.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return sorted(folder.iterdir())


def render(folder: Path = EVIDENCE) -> str:
    """The markdown of both tables from the CSVs in ``folder``, under the models they ran on."""
    results = Results(folder)
    lines = ["**The models, as they are** (from the runs' provenance files):", "", *models_header(folder), "",
             *MODEL_NOTES.get("", "").splitlines(), "", *provenance_lines(folder), "", units_line(folder), "",
             "Every poslens number is given with its 95% interval, the interval's method and its number of units "
             "(`stats.intervals.interval` chooses the method that covers at that number of units, measured in "
             f"`tests/unit/test_interval_coverage.py`: (t) a Student-t interval of a mean over {MIN_UNITS}-"
             f"{PERCENTILE_MIN - 1} units, (BCa) a BCa bootstrap of another statistic over {BCA_MIN}-"
             f"{PERCENTILE_MIN - 1}, (bootstrap) a percentile bootstrap over {PERCENTILE_MIN} or more ({N_BOOT:,} "
             f"resamples, seed {SEED}), (exact binomial) a Clopper-Pearson interval of a count of trials, "
             "(simultaneous t) bounds on a count of heads above a threshold that hold for every head together), "
             f"or is marked descriptive: fewer than {MIN_UNITS} units carry no interval. A verdict says \"agrees\" or "
             "\"differs\" only where the interval clears the paper's number or the rule's threshold, else "
             "\"inconclusive\" with what the rule found. Each row states its rule, the date it was written (before "
             "the run that judges it) and any earlier rule with the verdict it gave. The protocol column's run facts "
             "(units, lengths, conditions) are read from the kept run's CSVs and provenance.", "",
             "| finding (source) | the claim, as the paper states it | where | the paper's numbers | poslens (same "
             "definition unless the protocol column says otherwise) | protocol: how poslens departs | verdict, and "
             "its rule |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in CLAIMS:
        lines.append("| " + " | ".join(_cell(x) for x in (f"{c.finding} ({c.source})", f"“{c.quote}”", c.where, c.paper,
                                                          _per_model(c, results), c.protocol_text(results),
                                                          _verdict(c, results)))
                     + " |")
    lines += ["", "**poslens' own observations** (no published claim behind them; related work named for context):", "",
              "| observation | context | poslens |", "| --- | --- | --- |"]
    for o in OBSERVATIONS:
        lines.append("| " + " | ".join(_cell(x) for x in (o.finding, o.context, _per_model(o, results)
                                                         + (f"<br>{o.notes}" if o.notes else ""))) + " |")
    return "\n".join(lines) + "\n"


def kept() -> str:
    """The table of the evidence kept in the repository (``docs/known-results``): README's section."""
    return render(EVIDENCE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poslens.known_results", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="a `poslens reproduce --real-models` output folder")
    p.add_argument("--readme", type=Path, help="rewrite this README's known-results section")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="first copy FOLDER's known-results evidence (FOLDER/known) into DIR and render from there")
    p.add_argument("--machine", default="this machine", help="the machine the run took, named in the provenance line")
    args = p.parse_args(argv)
    if args.keep:
        keep(args.folder, args.keep, args.machine)
        args.folder = args.keep
    table = render(args.folder)
    if args.readme:
        from poslens import readme

        args.readme.write_text(readme.replace(args.readme.read_text(encoding="utf-8"), MARK, table,
                                              where=str(args.readme)), encoding="utf-8")
    else:
        print(table)
    return 0

