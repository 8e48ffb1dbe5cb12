"""Peak memory against the number of documents: every corpus-level analysis at 50 and 400 documents, each run a
fresh ``poslens analyze`` process on one thread, peak RSS from the kernel (``wait4``). A loop that reduces as each
document is done has a ratio near 1; one that keeps something per document grows with the count.
``python -m bench.memory [--only NAME ...] [--against DIR] [--write]`` (another checkout, measured in the same run);
``--write`` replaces the whole section, its prose included."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import machine, write_section

ROOT = Path(__file__).resolve().parent.parent
COUNTS = (50, 400)
# analysis -> (models, options): small bundled models and short documents; the count is what varies
PLAN = {
    "kl-ablation": (["dstg-small"], ["--length", "128"]),
    "compare-heads": (["dstg-small"], ["--length", "128"]),
    "position-probes": (["dstg-small"], ["--length", "64", "--n-seeds", "1", "--cv-folds", "2"]),
    "attention-mass": (["repo-small"], ["--length", "256", "--no-preamble"]),
    "niah-accuracy": (["repo-small"], ["--length", "256"]),
    "position-ranges": (["repo-small"], ["--length", "256"]),
    "loss-neutrality": (["increments-per-layer"], ["--length", "128", "--n-boot", "10"]),
    "word-boundaries": (["increments-per-layer"], ["--length", "128", "--max-gaps", "10000000", "--n-boot", "10"]),
    "head-profiles": (["repo-small"], ["--length", "128", "--n-samples", "2", "--niah-tokens", "256"]),
    "sink-rate": (["rope-small"], ["--length", "128"]),
    "induction": (["rope-small"], ["--half", "64"]),
    "rope-frequencies": (["rope-small"], ["--length", "128", "--n-samples", "0"]),
    "retrieval-heads": (["rope-small"], ["--length", "256", "--n-samples", "4"]),
    "attention-window": (["rope-small"], ["--length", "256", "--window", "64"]),
    "along-context": (["rope-small"], ["--length", "256"]),
}


def _count_options(name: str, n: int) -> list[str]:
    if name == "position-probes":
        return ["--n-docs", str(n), "--n-train", str(n * 4 // 5), "--n-test", str(n - n * 4 // 5)]
    return ["--n-docs", str(n)]


def peak(root: Path, name: str, n: int) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one fresh analysis process."""
    models, options = PLAN[name]
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "poslens.cli", "analyze", name, "--out", out, "--format", "html", "--force"]
        argv += [a for m in models for a in ("--model", m)] + options + _count_options(name, n)
        env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if status != 0:
            raise RuntimeError(f"{name} at {n} documents failed: {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024, wall


def main(only=None, against: str | None = None) -> str:
    trees = {"this": ROOT} | ({"before": Path(against)} if against else {})
    lines = ["| analysis | tree | peak RSS MB at 50 docs | at 400 docs | 400 / 50 | wall s at 400 |", "| --- | --- | --- | --- | --- | --- |"]
    for name in only or PLAN:
        for label, root in trees.items():
            (m50, _), (m400, w400) = (peak(root, name, n) for n in COUNTS)
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
