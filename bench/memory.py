"""Peak memory against the number of documents: every corpus-level analysis at 50 and 400 documents, each run a
fresh ``poslens analyze`` process on one thread, peak RSS from the kernel (``wait4``). A loop that reduces as each
document is done has a ratio near 1; one that keeps something per document grows with the count.
``python -m bench.memory [--only NAME ...] [--against DIR] [--write]`` (another checkout, measured in the same run);
``--write`` replaces the whole section, its prose included."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench import harness
from bench.report import machine, write_section

ROOT = Path(__file__).resolve().parent.parent
COUNTS = (50, 400)


def plan() -> dict[str, tuple[list[str], list[str]]]:
    """``{analysis: (models, command-line options)}``: each analysis' ``memory`` run (``@analysis(memory=)``),
    small bundled models and short documents; the count of documents is what the benchmark varies."""
    from analyses import all_analyses

    return {a.name: (list(a.memory.models), argv(a, a.memory.options)) for a in all_analyses() if a.memory is not None}


def argv(analysis, options: dict) -> list[str]:
    """``options`` as ``poslens analyze`` spells them (a tuple as one comma-separated value, False as ``--no-FLAG``;
    ``seed`` as ``--seed``)."""
    flags = {o.name: o.flag for o in analysis.options} | {"seed": "--seed"}
    out = []
    for name, value in options.items():
        flag = flags[name]
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        else:
            out += [flag, ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)]
    return out


def peak(root: Path, name: str, n: int, runs: dict | None = None) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one fresh analysis process (``runs``: ``plan()``). Position-probes' train and
    test documents are its defaults for ``n`` documents (80% and 20%)."""
    models, options = (runs or plan())[name]
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "poslens.cli", "analyze", name, "--out", out, "--format", "html", "--force"]
        argv += [a for m in models for a in ("--model", m)] + options + ["--n-docs", str(n)]
        done = harness.run(argv, cwd=root, env={"PYTHONPATH": str(root)})
        if done.failed:
            raise RuntimeError(f"{name} at {n} documents failed: {done.failed}\n{done.stderr[-2000:]}")
    return done.peak_rss_mb, done.wall_s


def main(only=None, against: str | None = None) -> str:
    trees = {"this": ROOT} | ({"before": Path(against)} if against else {})
    lines = ["| analysis | tree | peak RSS MB at 50 docs | at 400 docs | 400 / 50 | wall s at 400 |",
             "| --- | --- | --- | --- | --- | --- |"]
    runs = plan()
    for name in only or runs:
        for label, root in trees.items():
            (m50, _), (m400, w400) = (peak(root, name, n, runs) for n in COUNTS)
            lines.append(f"| {name} | {label} | {m50:.0f} | {m400:.0f} | {m400 / m50:.2f}x | {w400:.0f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--only", nargs="*", help="analyses to measure (default: all)")
    p.add_argument("--against", help="another checkout to measure in the same run")
    p.add_argument("--write", action="store_true", help="update the BENCHMARKS.md section")
    args = p.parse_args()
    table = main(args.only, args.against)
    if args.write:
        write_section("memory-vs-documents", "Peak memory against the number of documents",
                      f"{machine()}; one thread, fresh process per cell.\n\n{table}")
    print(table)
