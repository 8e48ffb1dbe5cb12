"""A script of analyses run one after another: the threads each command chooses and its wall time.

Issue 27 found four analyses run in a row on an idle 2-core machine each given one thread: the 1-minute load
average still counted the command before. This runs the same four (sink-rate, induction, rope-frequencies,
retrieval-heads on SmolLM2 at their defaults), each a fresh ``poslens analyze`` process, right after one another:
on an idle machine with the threads poslens chooses; on the same idle machine with ``--threads 1``, what the load
average chose (the baseline, measured in the same run); and beside one busy process (a single-threaded loop) with
the threads poslens chooses. Threads and the reason come from each command's provenance.

``--small`` runs each analysis as ``poslens reproduce --real-models --quick`` runs it on the model: its declared
``real`` run (its ``@analysis(real=...)``, ``analyses.runs``) with the ``quick`` options over it and the model's
own over both (``options``); an analysis without a ``real`` run, its ``main`` run's. The analyses name no options here.

``python -m bench.script [--model smollm2] [--small] [--write]``"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from bench.report import write_section

ROOT = Path(__file__).resolve().parent.parent
ANALYSES = ("sink-rate", "induction", "rope-frequencies", "retrieval-heads")


def options(name: str, model: str) -> list[str]:
    """``--small``'s command-line options for analysis ``name`` on ``model`` (see the module docstring), spelled by the
    memory benchmark's ``argv``."""
    from analyses import get
    from bench.memory import argv

    analysis = get(name)
    run = analysis.real or analysis.main
    if run is None:
        raise ValueError(f"bench.script --small: analysis '{name}' declares no real= or main= run to shrink")
    return argv(analysis, {**run.options, **run.quick, **run.per_model.get(model, {})})


def analyze(name: str, model: str, out: Path, threads: int | None, small: bool = False) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "poslens.cli", "analyze", name, "--model", model, "--out", str(out),
            "--format", "html", "--force"] + (options(name, model) if small else [])
    argv += ["--threads", str(threads)] if threads else []
    done = harness.run(argv, threads=None)  # the analysis picks its own threads: that is what this measures
    if done.failed:
        raise RuntimeError(f"{name} on {model}: {done.failed}\n{done.stderr[-2000:]}")
    return done.wall_s, json.loads((out / f"{name}.provenance.json").read_text(encoding="utf-8"))["threads"]


def sequence(model: str, threads: int | None, small: bool = False) -> list[tuple[str, dict, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name in ANALYSES:
            wall, record = analyze(name, model, Path(tmp) / name, threads, small)
            rows.append((name, record, wall))
            print(f"  {name}: {record['torch']} threads, {wall:.0f} s", flush=True)
        return rows


def main(model: str = "smollm2", small: bool = False) -> str:
    runs = {}
    print("idle, threads chosen", flush=True)
    runs["idle, threads chosen"] = sequence(model, None, small)
    print("idle, --threads 1 (the load average's choice)", flush=True)
    runs["idle, --threads 1 (what the load average chose)"] = sequence(model, 1, small)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1)
        print("beside one busy process, threads chosen", flush=True)
        runs["beside one busy process, threads chosen"] = sequence(model, None, small)
    finally:
        busy.kill()
        busy.wait()
    base = sum(w for _, _, w in runs["idle, --threads 1 (what the load average chose)"])
    lines = ["| machine state | " + " | ".join(f"{a}: threads, wall" for a in ANALYSES)
             + " | total | vs --threads 1 idle |",
             "| --- " * (len(ANALYSES) + 3) + "|"]
    for label, rows in runs.items():
        total = sum(w for _, _, w in rows)
        cells = " | ".join(f"{r['torch']}, {w:.0f} s" for _, r, w in rows)
        lines.append(f"| {label} | {cells} | {total:.0f} s | **{total / base:.2f}x** |")
    why = {label: rows[0][1].get("chosen", {}).get("reason", "--threads") for label, rows in runs.items()}
    lines.append("")
    lines += [f"- {label}: first command's reason: `{reason}`" for label, reason in why.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--small", action="store_true", help="a few documents per analysis instead of their defaults")
    p.add_argument("--write", action="store_true", help="update the BENCHMARKS.md section")
    args = p.parse_args()
    table = main(args.model, args.small)
    if args.write:
        import datetime as dt
        import os
        import platform

        import torch

        write_section("script", "Analyses one after another: threads chosen per command",
                      f"`python -m bench.script{' --small' if args.small else ''}`: {', '.join(ANALYSES)} on "
                      f"{args.model} "
                      f"{'with ' + '; '.join(f'{a} ' + ' '.join(options(a, args.model)) for a in ANALYSES) if args.small else 'at their defaults'}, "  # noqa: E501
                      f"each a fresh `poslens analyze` right after the one before; {platform.machine()}, "
                      f"{len(os.sched_getaffinity(0))} cores, torch {torch.__version__}, {dt.date.today()}. Issue 27 "
                      "measured 943 s for the four at 313ba53, each on 1 thread (provenance: `2 usable cores, 1 busy "
                      f"(load 1.0)`).\n\n{table}")
    print(table)
