"""Each step of the main job (``poslens reproduce``, ``make demo``) against its floor, and the cost table its progress
lines read (``poslens.run.estimate.COSTS``).

The steps run one after another in one fresh process (``harness.run``), each: first the speed probe
(``poslens.run.estimate.probe``), then the step as ``poslens reproduce`` runs it (``run_analysis`` with its options,
into a temporary folder), every model load and every forward pass of a model recorded (its inputs kept), then the
floor: the same forward passes replayed on the same models, with no hooks, under ``torch.inference_mode``, one after
another. The floor leaves out what no implementation can skip but a forward pass does not cover (backward passes,
probe fits, bootstraps), so a step that needs them sits above it by their share. A step's cost (the unit of
``COSTS``): its CPU seconds over the probe's, plus its figures' export (a browser process, outside this process' CPU
time) in wall seconds over the probe's.

``python -m bench.steps [--steps a,b] [--keep DIR] [--rows LOG] [--write]`` (``--write`` rewrites ``COSTS`` and the
BENCHMARKS.md section; ``python -m bench`` does too). ``--real SCALE`` measures the known-results steps
(``poslens reproduce --real-models``) instead, at their lengths but with 1/SCALE of their units (``scaled``: contexts,
prompts, draws), into its own BENCHMARKS.md section: the ratio of a step to its floor holds per unit. The step's
CPU seconds, its floor and its cost are ratios of times taken back to back in one process, so they hold on a loaded
machine, where its wall seconds do not. ``--keep`` keeps the steps' outputs (for ``bench.compare_csvs``); ``--rows``
rewrites the table from an earlier run's log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from bench.report import write_section

ROOT = Path(__file__).resolve().parent.parent
COSTS_FILE = ROOT / "poslens" / "run" / "estimate.py"
BUDGET_S = 300.0


@contextlib.contextmanager
def recording():
    """Within the block every model loaded (``interp.loading.load``) records its loads' seconds and its forward calls
    (the model and cloned inputs): yields ``(calls, loads)``."""
    import interp.loading as loading

    calls, loads, original = [], [], loading.load

    def record(model, args, kwargs):
        calls.append((model, _clone(args), _clone(kwargs)))

    def load(*args, **kwargs):
        start = time.perf_counter()
        model = original(*args, **kwargs)
        loads.append(time.perf_counter() - start)
        model.register_forward_pre_hook(record, with_kwargs=True)
        return model

    loading.load = load
    try:
        yield calls, loads
    finally:
        loading.load = original


def _clone(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def replay(calls) -> tuple[float | None, float | None]:
    """CPU and wall seconds of the recorded forward passes run again without hooks (None when one cannot be
    replayed)."""
    import torch

    for model, _, _ in calls:
        model._forward_pre_hooks.clear()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        with torch.inference_mode():
            for model, args, kwargs in calls:
                model(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a stateful call (a cache object) cannot always be replayed: no floor, said so
        return None, None
    return time.process_time() - cpu, time.perf_counter() - start


UNIT_OPTIONS = ("n_docs", "long_docs", "niah_prompts", "n_random")  # what --real scales down


def scaled(step, scale: int):
    """``step`` with each count of units (``UNIT_OPTIONS``, its own and each model's) divided by ``scale``, at least 1;
    lengths kept."""
    from dataclasses import replace

    def shrink(options: dict) -> dict:
        return {k: max(1, -(-v // scale)) if k in UNIT_OPTIONS and isinstance(v, int) and v else v
                for k, v in options.items()}

    return replace(step, options=shrink(step.options),
                   per_model={m: shrink(o) for m, o in step.per_model.items()})


def _plan(scale: int = 0) -> dict:
    from poslens.reproduce import main_plan, real_plan

    if not scale:
        return {s.analysis: s for s in main_plan()}
    return {s.analysis: scaled(s, scale) for s in real_plan()}


def child(names: str, keep: str = "", scale: str = "0") -> list[dict]:
    """Steps of the main job (comma-separated; with ``scale``, known-results steps scaled down) in this one process, as
    ``poslens reproduce`` runs them (imports and the figure browser paid once): for each, the probe, the step, its
    floor. ``keep``: a folder for the steps' outputs (to compare CSVs before and after a change:
    ``bench/compare_csvs.py``)."""
    import figures
    from poslens.run import threads

    chosen = threads.apply(None)  # as poslens reproduce chooses them
    plan = _plan(int(scale))
    rows = []
    with figures.shared_plotlyjs():
        for name in names.split(","):
            rows.append(dict(_measure(plan[name], keep), threads=chosen.get("threads"), scale=int(scale)))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # each step as it ends, for a log
    return rows


def _measure(step, keep: str = "") -> dict:
    """The probe and the step in wall seconds and in this process' CPU seconds (other jobs on the machine stretch the
    first, much less the second), and the floor: the step's forward passes replayed. The step's cost: its CPU seconds
    over the probe's, plus its figures' export (a browser process: wall time) over the probe's wall seconds."""
    from poslens.reproduce import _run_step
    from poslens.run.estimate import probe

    unit, unit_cpu = probe(), probe(timer=time.process_time)
    with tempfile.TemporaryDirectory() as tmp, recording() as (calls, loads), exports() as export:
        start, cpu = time.perf_counter(), time.process_time()
        _run_step(Path(keep or tmp), step, False, 0, None, None)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    cpu_floor, floor = replay(calls)
    return dict(step=step.analysis, seconds=seconds, cpu_s=cpu, export_s=export[0], probe_s=unit, probe_cpu_s=unit_cpu,
                cost=cpu / unit_cpu + export[0] / unit, loads_s=sum(loads), forwards=len(calls), floor_s=floor,
                floor_cpu_s=cpu_floor)


@contextlib.contextmanager
def exports():
    """Within the block, the wall seconds spent in ``figures.save`` (the PNG and PDF come from a browser process,
    outside this process' CPU time): yields a one-item list."""
    import figures

    spent, original = [0.0], figures.save

    def save(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    figures.save = save
    try:
        yield spent
    finally:
        figures.save = original


def _row(r: dict) -> str:
    floor = r.get("floor_cpu_s")
    over = ("no forward pass" if not r["forwards"] else "no replay" if floor is None
            else "floor under 0.1 s" if floor < 0.1 else f"{r['cpu_s'] / floor:.1f}x")
    return (f"| {r['step']} | {r['seconds']:.1f} | {r['cpu_s']:.1f} | {r['export_s']:.1f} | {r['cost']:.0f} | "
            f"{r['forwards']} | " + (f"{floor:.1f}" if floor is not None else "-") + f" | {over} |")


def table(rows: list[dict]) -> str:
    """The per-step table of BENCHMARKS.md, and the job's total at the probe's speed against the budget."""
    lines = ["| step | wall (s) | CPU (s) | figure export, wall (s) | cost (probe units) | forward passes | floor: the "
             "forward passes replayed, CPU (s) | step / floor (CPU) |", "| --- " * 8 + "|"]
    lines += [_row(r) for r in rows]
    units = sum(r["cost"] for r in rows)
    lines.append(f"\nThe steps' costs add up to {units:.0f} probe units: the job takes about {units:.0f} x the probe's "
                 f"wall time (`python -c 'from poslens.run.estimate import probe; print(probe())'`), so it fits the "
                 f"{BUDGET_S:.0f} s budget where the probe takes {1000 * BUDGET_S / units:.0f} ms or less (here its "
                 f"fastest was {1000 * min(r['probe_s'] for r in rows):.0f} ms of wall time and "
                 f"{1000 * min(r['probe_cpu_s'] for r in rows):.0f} ms of CPU).")
    return "\n".join(lines)


def write_costs(rows: list[dict]) -> None:
    """Rewrite ``COSTS`` in ``poslens/run/estimate.py`` with the measured costs (one decimal)."""
    lines = [""]
    for item in (f'"{r["step"]}": {r["cost"]:.1f},' for r in rows):
        lines[-1:] = [f"{lines[-1]} {item}"] if len(lines[-1]) + len(item) < 116 else [lines[-1], f" {item}"]
    body = "\n".join(f"   {line}" for line in lines)
    text = COSTS_FILE.read_text(encoding="utf-8")
    text = re.sub(r"COSTS: dict\[str, float\] = \{[^}]*\}", lambda _: f"COSTS: dict[str, float] = {{\n{body}\n}}",
                  text)
    COSTS_FILE.write_text(text, encoding="utf-8")


def read_rows(path: Path) -> list[dict]:
    """Rows saved from an earlier run: the child's last line (a JSON list), or one JSON row per line (its log)."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.startswith(("[{", "{"))]
    return lines[-1] if isinstance(lines[-1], list) else lines


def measure(steps: list[str] | None = None, keep: str = "", scale: int = 0) -> list[dict]:
    """Every step (or ``steps``) in one fresh process; its rows. ``scale``: the known-results steps, scaled down."""
    plan = _plan(scale)
    names = steps or list(plan)
    unknown = sorted(set(names) - set(plan))
    if unknown:
        raise SystemExit(f"--steps: {', '.join(unknown)} not a step of {'--real' if scale else 'the main job'} "
                         f"({', '.join(plan)})")
    argv = [sys.executable, "-m", "bench.steps", "--child", ",".join(names), keep or "", str(scale)]
    done = harness.run(argv, threads=None, floor_gb=None)
    if done.failed:
        raise RuntimeError(f"bench.steps: {done.failed}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write(rows: list[dict], scale: int = 0) -> str:
    """``COSTS`` and the BENCHMARKS.md section from ``rows`` (with ``scale``: the known-results steps' section only);
    the table."""
    from bench.report import machine

    text = table(rows)
    if scale:
        text = text.split("\n\nThe steps' costs")[0]
        missing = [name for name in _plan(scale) if name not in {r["step"] for r in rows}]
        write_section("real-steps", "The known-results steps against their floors",
                      f"{machine()}. Each step at its lengths with a fraction of its units (`python -m bench.steps "
                      f"--real SCALE`: contexts, prompts and draws divided by SCALE, at least 1): "
                      + ", ".join(f"{r['step']} 1/{r.get('scale', scale)}" for r in rows) + ". A step's CPU "
                      "seconds include loading its models; its floor replays its recorded forward passes whole "
                      "(logits included, where a step may stop at the last layer)."
                      + (f" Not measured in this run: {', '.join(missing)}." if missing else "") + f"\n\n{text}")
        return text
    write_costs(rows)
    write_section("steps", "The main job's steps against their floors", f"{machine()}.\n\n{text}")
    return text


def main() -> str:
    """What ``python -m bench`` runs: every step, ``COSTS`` and the section rewritten."""
    return write(measure())


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", default=None, help="comma-separated steps of the main job (default: all)")
    p.add_argument("--write", action="store_true", help="rewrite COSTS and the BENCHMARKS.md section")
    p.add_argument("--rows", type=Path, default=None,
                   help="the rows of an earlier run (its child's JSON line, or one JSON row a line) instead of running")
    p.add_argument("--keep", default="", help="a folder to keep the steps' outputs in (default: none kept)")
    p.add_argument("--real", type=int, default=0, metavar="SCALE",
                   help="the known-results steps instead, with 1/SCALE of their units (contexts, prompts, draws)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        harness.emit(child(*a.child))
        sys.exit(0)
    if a.real < 0:
        p.error(f"--real {a.real}: a scale of 1 or more (1: the steps as they run)")
    rows = read_rows(a.rows) if a.rows else measure(a.steps.split(",") if a.steps else None, a.keep, a.real)
    print(write(rows, a.real) if a.write else table(rows))
