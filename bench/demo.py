"""The main job's wall time: ``poslens reproduce`` (what ``make demo`` runs), each run a fresh process, on an idle
machine and beside one busy process (a single-threaded loop that keeps one core busy, started early enough for the load
average to show it, as another user's job would), with the threads poslens chooses and, as the baseline measured
in the same run, with torch's default of one thread per core (``--threads`` = the core count). Each run's thread
count and the reason come from its provenance. The budget is 5 minutes on 2 cores.

``python -m bench.demo [--write]``"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from bench.report import write_section

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 300.0
BEFORE = ("Before (df4a0bd, as issue 18 measured it): 243 s idle and 1191 s beside one busy process, torch choosing "
          "one thread per core whatever else ran; the last row is that choice today.")


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def reproduce(threads: int | None = None) -> tuple[float, dict]:
    """(wall seconds, the threads record of one analysis' provenance) of one fresh ``poslens reproduce``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results"
        argv = [sys.executable, "-m", "poslens.cli", "reproduce", "--out", str(out)]
        argv += ["--threads", str(threads)] if threads else []
        done = harness.run(argv, threads=None, floor_gb=None)
        if done.failed:
            raise RuntimeError(f"poslens reproduce: {done.failed}\n{done.stderr[-2000:]}")
        wall = done.wall_s
        record = json.loads((out / "kl-ablation.provenance.json").read_text(encoding="utf-8"))["threads"]
    return wall, record


def main() -> str:
    cores = len(os.sched_getaffinity(0))
    rows = []
    deadline = time.time() + 300
    while _load() > 0.3 and time.time() < deadline:  # "idle" means the load of earlier work has decayed
        time.sleep(10)
    wall, record = reproduce()
    rows.append(("idle", record, wall))
    print(f"idle: {wall:.0f} s", flush=True)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.time() + 180
        while _load() < 0.9 and time.time() < deadline:  # the 1-minute load average needs about a minute to see it
            time.sleep(5)
        for label, threads in (("beside one busy process", None),
                               ("beside one busy process, torch's default threads", cores)):
            wall, record = reproduce(threads)
            rows.append((label, record, wall))
            print(f"{label}: {wall:.0f} s", flush=True)
    finally:
        busy.kill()
    idle = rows[0][2]
    lines = ["| machine state | torch threads (why) | wall time | vs idle | vs the 5-minute budget |",
             "| --- | --- | --- | --- | --- |"]
    for label, record, wall in rows:
        why = record.get("chosen", {}).get("reason") or "given with --threads"
        lines.append(f"| {label} | {record['torch']} ({why}) | {wall:.0f} s | {wall / idle:.2f}x | "
                     f"**{wall / BUDGET_S:.2f}x** |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help="update the BENCHMARKS.md section")
    args = p.parse_args()
    table = main()
    if args.write:
        import datetime as dt
        import platform

        import torch

        write_section("demo", "The main job's wall time, idle and beside a busy process",
                      f"`poslens reproduce` (`make demo`) in a fresh process per row; {platform.machine()}, "
                      f"{len(os.sched_getaffinity(0))} cores, torch {torch.__version__}, {dt.date.today()}. The busy "
                      "process is one single-threaded loop started before the run, as another user's job would be. The "
                      f"idle row waits for the load average to fall below 0.3 first.\n\n{table}\n\n{BEFORE}")
    print(table)
