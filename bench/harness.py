"""The one way a benchmark measures: each cell in a fresh process, its peak RSS, a timeout and a watch on the machine's
free memory, its result as JSON, and the section it writes into BENCHMARKS.md (``bench.report.write_section``).

A benchmark module's child side computes one cell and prints it (``emit``); its parent side runs each cell with
``cell(module, *args)`` (``python -m module --child *args``), or any command with ``run(argv)``:

    if __name__ == "__main__":
        ...
        if a.child:
            emit(child(*a.child))

    row = cell("bench.attention", 4096)              # the child's JSON, plus wall_s and peak_rss_mb
    row = cell("bench.peers", ..., timeout=600, check=False)   # {"failed": "over 600 s"} instead of raising
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WATCH_FLOOR_GB = 1.0  # a cell is killed when the machine's free memory (MemAvailable) falls under this


def meminfo() -> dict[str, float]:
    """``/proc/meminfo`` in GB (1e9 bytes)."""
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        out[key] = int(value.split()[0]) * 1024 / 1e9
    return out


@dataclass
class Finished:
    """One process, run: its exit status, output, wall time, peak RSS and CPU time (user + system); ``failed`` says
    why it did not finish (timeout, low memory, a non-zero exit), None when it did."""
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float
    cpu_s: float
    failed: str | None = None

    def result(self) -> dict:
        """The last line of its output read as JSON, with ``wall_s`` and ``peak_rss_mb`` (or ``{"failed": why}``)."""
        if self.failed:
            return {"failed": self.failed}
        return {"wall_s": self.wall_s, "peak_rss_mb": self.peak_rss_mb,
                **json.loads(self.stdout.strip().splitlines()[-1])}  # the child's own measures win


def run(argv: list[str], *, timeout: float | None = None, env: dict | None = None, cwd=ROOT,
        floor_gb: float | None = WATCH_FLOOR_GB, threads: int | None = 1) -> Finished:
    """Run ``argv`` in a fresh process (``OMP_NUM_THREADS=threads`` unless None, the tree on ``PYTHONPATH``), killed
    if it outlives ``timeout`` seconds or the machine's free memory falls under ``floor_gb``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"OMP_NUM_THREADS": str(threads)} if threads else {}),
           **(env or {})}
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:  # no pipe to fill
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=True)
        killed = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.monotonic() - start > timeout:
                killed = f"over {timeout:.0f} s"
            elif floor_gb is not None and meminfo()["MemAvailable"] < floor_gb:
                killed = f"killed: the machine's free memory fell under {floor_gb:g} GB"
            if killed:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    failed = killed
    if failed is None and proc.returncode:
        died = proc.returncode < 0 or "MemoryError" in err or "out of memory" in err.lower()
        failed = "OOM (killed)" if died else f"exit {proc.returncode}: {(err.strip().splitlines() or ['?'])[-1][:160]}"
    return Finished(proc.returncode, out, err, wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, failed)


def cell(module: str, *args, flag: str = "--child", check: bool = True, **options) -> dict:
    """``python -m module --child *args`` in a fresh process (``run``'s options): its JSON result with ``wall_s`` and
    ``peak_rss_mb``; a cell that did not finish raises (``check``) or gives ``{"failed": why}``."""
    done = run([sys.executable, "-m", module, flag, *map(str, args)], **options)
    if check and done.failed:
        raise RuntimeError(f"{module} {' '.join(map(str, args))}: {done.failed}\n{done.stderr[-2000:]}")
    return done.result()


def emit(result) -> None:
    """The child's side: print its result as one line of JSON (what ``cell`` reads)."""
    print(json.dumps(result, default=str), flush=True)
