"""How long a fresh process takes to load a real model: ``smollm2`` and ``gemma3-270m`` (GGUF files), the first
process (which de-quantises the GGUF into an empty cache) against the later ones (which read the cache).

Every process is fresh and times two things itself: importing ``interp.loading`` and the ``load(name)`` call; the
parent adds the whole process' wall and CPU seconds (CPU seconds hardly depend on what else the machine runs, wall
seconds do). Each tree gets its own empty ``POSLENS_CACHE``, so the first process of a model is always the uncached
load. ``--against DIR`` times another checkout (``git archive OLD | tar -x -C DIR``) in the same run, its processes
interleaved with this tree's, for a before / after table. The load average (``os.getloadavg``) is recorded before and
after: the machine is shared, and its load is the first thing to read beside a wall time.

    python -m bench.load [--repeats 2] [--against DIR] [--models smollm2,gemma3-270m] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import run

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("smollm2", "gemma3-270m")
CHILD = """
import json, sys, time
start = time.perf_counter()
from interp.loading import load
imported, cpu = time.perf_counter(), time.process_time()
model = load(sys.argv[1])
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "load_s": done - imported, "load_cpu_s": time.process_time() - cpu,
                  "format": model.source["format"]}))
"""


def once(root: Path, name: str, cache: Path) -> dict:
    """A fresh process of the tree at ``root`` loading ``name`` with the cache at ``cache`` (``bench.harness.run``)."""
    done = run([sys.executable, "-c", CHILD, name], cwd=root, env={"PYTHONPATH": str(root), "POSLENS_CACHE": str(cache),
                                                                  "POSLENS_PROGRESS": "0"})
    if done.failed:
        raise RuntimeError(f"{name} in {root}: {done.failed}\n{done.stderr[-2000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(got, wall_s=done.wall_s, cpu_s=done.cpu_s)


def measure(roots: dict[str, Path], models=MODELS, repeats: int = 2) -> dict:
    """``{"rows": [...], "load": [before, after], ...}``: per tree and model, process 1 (empty cache) and ``repeats``
    later processes."""
    load_before = os.getloadavg()
    started = dt.datetime.now(dt.timezone.utc)
    rows = []
    with tempfile.TemporaryDirectory(prefix="poslens-bench-load-") as scratch:
        for name in models:
            caches = {label: Path(scratch) / f"{label}-{name}" for label in roots}
            for i in range(1 + repeats):
                for label, root in roots.items():
                    run = once(root, name, caches[label])
                    rows.append(dict(run, tree=label, model=name, process=i + 1))
                    print(f"{label} {name} process {i + 1}: load {run['load_s']:.1f} s, process wall "
                          f"{run['wall_s']:.1f} s, CPU {run['cpu_s']:.1f} s", flush=True)
    return dict(rows=rows, load=[load_before, os.getloadavg()], started=started.strftime("%Y-%m-%d %H:%M UTC"),
                cores=os.cpu_count(), command=" ".join(["python -m bench.load", *sys.argv[1:]]))


def table(result: dict) -> str:
    rows, trees = result["rows"], list(dict.fromkeys(r["tree"] for r in result["rows"]))
    out = ["| model | tree | process | `load()`: wall s | `load()`: CPU s | whole process: wall s | CPU s | "
           "`load()` wall vs process 1 |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def cpu(rs) -> str:
        got = [r["load_cpu_s"] for r in rs if "load_cpu_s" in r]
        return f"{statistics.median(got):.1f}" if got else "-"

    for model in dict.fromkeys(r["model"] for r in rows):
        for tree in trees:
            mine = [r for r in rows if r["model"] == model and r["tree"] == tree]
            first = mine[0]
            later = mine[1:]
            out.append(f"| {model} | {tree} | 1 (empty cache) | {first['load_s']:.1f} | {cpu([first])} | "
                       f"{first['wall_s']:.1f} | "
                       f"{first['cpu_s']:.1f} | 1.0x |")
            if later:
                load_s = statistics.median(r["load_s"] for r in later)
                out.append(f"| {model} | {tree} | 2-{len(mine)} (median) | {load_s:.1f} | {cpu(later)} | "
                           f"{statistics.median(r['wall_s'] for r in later):.1f} | "
                           f"{statistics.median(r['cpu_s'] for r in later):.1f} | "
                           f"{first['load_s'] / load_s:.1f}x faster |")
    return "\n".join(out)


def section(result: dict) -> str:
    (b1, b5, b15), (a1, a5, a15) = result["load"]
    return (f"`{result['command']}` on {result['started']}, {result['cores']} cores shared with other work: load "
            f"average {b1:.1f} / {b5:.1f} / {b15:.1f} (1 / 5 / 15 min) before and {a1:.1f} / {a5:.1f} / {a15:.1f} "
            "after. Each row is a fresh process with `OMP_NUM_THREADS=1`; process 1 of a tree starts from an empty "
            "`POSLENS_CACHE` (it de-quantises the GGUF), the later ones read what it cached. `load()` is the call "
            "alone; the whole process adds Python, torch, transformers and TransformerLens imports.\n\n"
            + table(result))


def main(argv=None) -> str:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=2, help="later (cached) processes per model and tree")
    p.add_argument("--against", type=Path, default=None, help="another checkout to time in the same run")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--no-write", action="store_true", help="print the section instead of writing BENCHMARKS.md")
    args = p.parse_args(argv)
    roots = {"this tree": ROOT} if args.against is None else {"before": args.against, "this tree": ROOT}
    result = measure(roots, tuple(m for m in args.models.split(",") if m), args.repeats)
    (Path(tempfile.gettempdir()) / f"poslens-bench-load-{int(time.time())}.json").write_text(json.dumps(result))
    text = section(result)
    if not args.no_write:
        from bench.report import write_section

        write_section("load", "Loading the real models: first process against the cached ones", text)
    return text


if __name__ == "__main__":
    print(main())
