"""The main job: every analysis on the bundled models, written as CSVs, figures and an ``index.html``. Its steps are
the analyses' own declarations (``@analysis(main=..., real=...)``, ``analyses.runs``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import figures
from analyses import all_analyses, get
from interp.atomic import write_text
from interp.runtime import parallel
from poslens.known_results.types import KNOWN_FOLDER, STEPS
from poslens.run.estimate import COSTS, PROBE_MODEL, PROBE_TOKENS, Pace, clock, probe, split
from poslens.run.execute import Result, run_analysis, sharing_models
from poslens.run.outputs import Outputs
from poslens.run.provenance import git_commit
from poslens.run.summary import summary

REPORT_MARKER = ".poslens-report"


@dataclass(frozen=True)
class Step:
    analysis: str
    models: tuple[str, ...]
    options: dict = field(default_factory=dict)
    quick: dict = field(default_factory=dict)  # options that shrink the run for tests
    section: str = ""
    per_model: dict = field(default_factory=dict)  # model name -> options for that model only
    folder: str = ""  # where in the report its files go: the real-model runs in ``known/``, apart from the main job's


def main_plan() -> tuple[Step, ...]:
    """The main job: each analysis' ``main`` run (``@analysis(main=...)``, ``analyses.runs``), in the report's order
    (``analyses.registry.MODULES``, then analyses registered from other modules)."""
    return _steps("main")


def real_plan() -> tuple[Step, ...]:
    """Behind ``poslens reproduce --real-models``: each analysis' ``real`` run on the pretrained models, the runs the
    README's "Known results, reproduced" table comes from."""
    return _steps("real", KNOWN_FOLDER)


def _steps(setting: str, folder: str = "") -> tuple[Step, ...]:
    return tuple(Step(a.name, run.models, dict(run.options), dict(run.quick), run.section, dict(run.per_model),
                      folder) for a in all_analyses() if (run := getattr(a, setting)) is not None)


# wall seconds of a step (its folder / analysis), the estimate it gets before this report folder has timed it: the
# --real-models run at 3c75c1e on 2026-11-27, both models, 2 threads of the 2-core machine (sink-rate shared it with
# the test suite for most of its hour and includes a 5-minute pause); a step not listed has no estimate
ESTIMATES = {"known/ap-spectrum": 1, "known/sink-rate": 3661, "known/massive-activations": 80, "known/induction": 97,
             "known/rope-frequencies": 2527, "known/retrieval-heads": 1300, "known/attention-window": 2162}


def step_key(step: Step, options: dict, seed: int, dtype=None) -> str:
    """The hash of everything a step's outputs depend on besides the code: models, options, per-model options, seed
    and the precision the models run in."""
    blob = json.dumps(dict(analysis=step.analysis, models=list(step.models), options=options,
                           per_model=step.per_model, seed=seed, dtype=str(dtype)), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _record(out: Path, step: Step) -> dict | None:
    path = out / step.folder / STEPS / f"{step.analysis}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _reusable(out: Path, step: Step, key: str, commit: str | None) -> Result | None:
    """The step's earlier result in ``out`` when it ran at ``commit`` with the same arguments and its files are all
    there; else None."""
    rec = _record(out, step)
    if rec is None or commit is None or rec.get("commit") != commit or rec.get("key") != key:
        return None
    return _recorded(out, step, rec)


def _recorded(out: Path, step: Step, rec: dict | None) -> Result | None:
    """The result its record ``rec`` names, read back; None when a file is missing."""
    if rec is None:
        return None
    where = out / step.folder
    files = [where / f for f in rec.get("files", [])]
    if not files or not all(f.exists() for f in files) or not (where / f"{step.analysis}.csv").exists():
        return None
    return Result(step.analysis, pd.read_csv(where / f"{step.analysis}.csv"), files, rec.get("figure_height"))


def _estimate(out: Path, step: Step, key: str | None = None, quick: bool = False,
              unit: float | None = None) -> float | None:
    """The step's seconds: its time in this report folder when it ran there with these arguments (``key``), else its
    cost (``poslens.run.estimate.COSTS``, probe units) x ``unit`` (the probe's seconds on this machine), else
    ``ESTIMATES``; None under ``quick`` without a time of its own (both tables time full runs)."""
    rec = _record(out, step)
    if rec and "seconds" in rec and (key is None or rec.get("key") == key):
        return rec["seconds"]
    if quick:
        return None
    if not step.folder and step.analysis in COSTS and unit is not None:
        return COSTS[step.analysis] * unit
    return ESTIMATES.get(f"{step.folder}/{step.analysis}".lstrip("/"))


def _pace(out: Path, plan, keys: list[str], quick: bool, say, threads: int | None = None) -> Pace:
    """Every step's estimate, the probe timed first (on the steps' ``threads``) where a step needs it
    (``poslens.run.estimate``)."""
    unit = None
    if not quick and any(_estimate(out, s, k) is None and not s.folder and s.analysis in COSTS
                         for s, k in zip(plan, keys)):
        unit = probe(threads=threads)
        say(f"this machine's speed: {unit * 1000:.0f} ms per probe unit ({PROBE_MODEL} on "
            f"{' x '.join(map(str, PROBE_TOKENS))} tokens), the unit of the steps' recorded costs")
    missing = "not timed under --quick: the cost table times full runs" if quick else "not in the cost table"
    return Pace([_estimate(out, s, k, quick, unit) for s, k in zip(plan, keys)], missing)


def reproduce(out="results", *, seed: int = 0, force: bool = False, quick: bool = False, plan=None, log=print,
              device=None, real_models: bool = False, dtype=None, resume: bool = False, workers: int = 1) -> Path:
    """Run ``plan`` (default ``main_plan()``) into ``out`` and write ``out/index.html``; refuse to touch an existing
    report unless ``force`` or ``resume``. ``real_models`` adds ``real_plan()``: the pretrained models' runs (hours
    more on a CPU), written to ``out/known/`` (the same analyses as the main job's, on other models: neither overwrites
    the other), and ``KNOWN_RESULTS.md``, the README's known-results table from their CSVs
    (``poslens.known_results.render``; ``python -m poslens.known_results OUT --keep docs/known-results --readme
    README.md`` keeps them). ``dtype`` (``run_analysis``'s) is the precision every model runs in.

    Each step done is recorded in ``.steps/<analysis>.json`` of its folder (git commit, a hash of its models, options
    and seed, its files and seconds). With ``resume`` a step already done at the same commit with the same arguments
    is not redone (its files are read back); anything else is run again. Before each step a line gives its estimate (its
    time in this folder with the same arguments, else its recorded cost x this machine's speed, ``_estimate``) and the
    time left, scaled by how the steps done so far compared with theirs (``poslens.run.estimate``).

    ``workers`` > 1 runs the steps in that many processes of one torch thread each (``_in_workers``; a 2-core
    machine's small models gain more from two steps at once than from two threads in one), the steps dealt by their
    estimates (``poslens.run.estimate.split``); each step's numbers are those of a one-thread run, equal to a
    two-thread run's within float rounding. The workers print their own lines; the index is written here after.

    The whole report is written under the lock ``out/.report.lock``; each analysis' files appear atomically
    (``poslens.run.outputs``), the index and summary last. In a data-parallel session (torchrun,
    ``interp.runtime.parallel.session``) every rank runs every step, in the same order: the data-parallel analyses share
    their documents, the others are computed on each rank. Only rank 0 takes the lock, logs and writes; it decides
    whether ``out`` may be written before any work, and every rank stops on a refusal (``parallel.agree``)."""
    from poslens.run.execute import model_dtype

    dtype = model_dtype(dtype)  # before the report folder is touched
    if workers > 1 and parallel.describe() is not None:
        raise ValueError(f"--workers {workers}: this job is already launched as several processes (torchrun or a "
                         "store's shards); give --workers 1")
    out, plan = Path(out), (main_plan() + (real_plan() if real_models else ())) if plan is None else plan
    with contextlib.ExitStack() as held:
        outputs = parallel.agree(lambda: held.enter_context(_report_folder(out, force or resume)))
        say = log if outputs is not None else (lambda line: None)
        start = time.time()
        done = []
        commit = git_commit()
        held.enter_context(figures.shared_plotlyjs())  # the report's figures share one plotly.min.js
        models = held.enter_context(sharing_models())  # a model several steps read is loaded once
        keys = [step_key(s, _options(s, quick), seed, dtype) for s in plan]
        pace = _pace(out, plan, keys, quick, say, 1 if workers > 1 else None)  # a worker runs one thread
        reused = [_reusable(out, s, k, commit) if resume else None for s, k in zip(plan, keys)]
        by_worker = {} if workers <= 1 else _in_workers(
            out, plan, keys, [i for i, r in enumerate(reused) if r is None], pace, workers, say,
            dict(quick=quick, seed=seed, device=device, dtype=dtype, commit=commit, missing=pace.missing))
        for i, (step, key) in enumerate(zip(plan, keys), 1):
            result = reused[i - 1] or (_recorded(out, step, _record(out, step)) if i - 1 in by_worker else None)
            how = ("done at this commit with these arguments: reused" if reused[i - 1] is not None else
                   f"done by a worker in {clock(by_worker[i - 1])}" if result is not None else pace.line(i - 1))
            say(f"[{i}/{len(plan)}] {step.analysis} on {', '.join(step.models)} ({clock(time.time() - start)} "
                f"elapsed; {how})")
            if result is None:
                t0 = time.time()
                result = _run_step(out, step, quick, seed, device, dtype)
                pace.finished(i - 1, time.time() - t0)
                if outputs is not None:
                    _write_record(out, step, commit, key, time.time() - t0, result)
            _drop_unneeded(models, plan[i:])
            done.append((step, result))
        if outputs is not None:
            (outputs.staging / "index.html").write_text(render_index(done, time.time() - start), encoding="utf-8")
            (outputs.staging / "SUMMARY.md").write_text(summary(done), encoding="utf-8")
            if real_models:
                from poslens.known_results.render import render

                (outputs.staging / "KNOWN_RESULTS.md").write_text(render(out / KNOWN_FOLDER),
                                                                  encoding="utf-8")
            outputs.commit([])
        say(f"report: {out / 'index.html'} ({time.time() - start:.0f}s)")
    return out / "index.html"


def _in_workers(out: Path, plan, keys, todo: list[int], pace: Pace, workers: int, say, run: dict) -> dict[int, float]:
    """Run the steps ``todo`` (indices into ``plan``) in ``workers`` processes (spawned: a fresh torch each), each
    recording its steps as the loop would (``_write_record``); their seconds by index. A step that fails ends every
    worker and is raised here."""
    import multiprocessing

    queues = [[todo[j] for j in q] for q in split([pace.estimates[i] for i in todo], workers)]
    if not queues:
        return {}
    say(f"{len(todo)} steps in {len(queues)} worker processes of one torch thread each: "
        + "; ".join(f"worker {k}: {', '.join(plan[i].analysis for i in q)}" for k, q in enumerate(queues, 1)))
    seconds: dict[int, float] = {}
    with multiprocessing.get_context("spawn").Pool(len(queues)) as pool:
        waits = [pool.apply_async(_worker, (k, out, [(i, plan[i], keys[i], pace.estimates[i]) for i in q], run))
                 for k, q in enumerate(queues, 1)]
        try:
            for w in waits:
                seconds.update(w.get())
        except BaseException:
            pool.terminate()
            raise
    return seconds


def _worker(k: int, out: Path, items: list, run: dict) -> dict[int, float]:
    """One worker's queue (``_in_workers``): one torch thread, the models its steps share loaded once, a line per step
    with its estimate and the time left in this queue."""
    from poslens.run import threads

    threads.apply(1)
    mine, seconds = Pace([e for *_, e in items], run["missing"]), {}
    with figures.shared_plotlyjs(), sharing_models() as models:
        for j, (i, step, key, _) in enumerate(items):
            print(f"[worker {k}: {j + 1}/{len(items)}] {step.analysis} on {', '.join(step.models)} "
                  f"({mine.line(j)} in this worker)", flush=True)
            t0 = time.time()
            result = _run_step(out, step, run["quick"], run["seed"], run["device"], run["dtype"])
            seconds[i] = time.time() - t0
            mine.finished(j, seconds[i])
            _write_record(out, step, run["commit"], key, seconds[i], result)
            _drop_unneeded(models, [s for _, s, _, _ in items[j + 1:]])
    return seconds


def _drop_unneeded(models: dict, later) -> None:
    """Let go of the shared models no later step reads."""
    needed = {m for s in later for m in s.models}
    for key in [k for k in models if k[0] not in needed]:
        del models[key]


def _options(step: Step, quick: bool) -> dict:
    return {**step.options, **(step.quick if quick else {})}


def _run_step(out: Path, step: Step, quick: bool, seed: int, device, dtype):
    options = _options(step, quick)
    return run_analysis(step.analysis, list(step.models), out / step.folder, options=options, seed=seed, force=True,
                        per_model={m: {**options, **o, **(step.quick if quick else {})}
                                   for m, o in step.per_model.items()},
                        device=device, dtype=dtype)


def _write_record(out: Path, step: Step, commit, key: str, seconds: float, result) -> None:
    (out / step.folder / STEPS).mkdir(parents=True, exist_ok=True)
    write_text(out / step.folder / STEPS / f"{step.analysis}.json", json.dumps(dict(
        commit=commit, key=key, seconds=round(seconds, 1), files=[p.name for p in result.files],
        figure_height=result.figure_height, finished=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
        indent=1) + "\n")


@contextlib.contextmanager
def _report_folder(out: Path, force: bool):
    """Hold ``out``'s report lock, once ``out`` is known to be new, empty or an earlier report (with ``force``)."""
    with Outputs(out, "report") as outputs:
        if outputs.foreign():
            if not (out / REPORT_MARKER).exists():
                raise FileExistsError(f"{out} exists and is not a poslens report folder; choose another --out")
            if not force:
                raise FileExistsError(f"{out} already holds a report; pass --force to overwrite it")
        write_text(out / REPORT_MARKER, "written by poslens reproduce\n")
        yield outputs


def _models_table(done) -> str:
    seen = {}
    for _, result in done:
        prov = json.loads(next(p for p in result.files
                               if p.name.endswith(".provenance.json")).read_text(encoding="utf-8"))
        for m in prov["models"]:
            seen.setdefault(m["name"], m)
    rows = []
    for name, m in seen.items():
        record = Path(m["path"]) / "training.json" if m.get("path") else None
        train = json.loads(record.read_text(encoding="utf-8")) if record is not None and record.is_file() else {}
        loss = train.get("final_validation_loss")
        rows.append(dict(model=name, family=m["family"], about=m["description"], sha256=m.get("sha256", "")[:12],
                         steps=train.get("steps", ""),
                         tokens=f"{train['tokens_seen']:,}" if "tokens_seen" in train else "",
                         validation_loss=f"{loss:.4f}" if isinstance(loss, float) else ""))
    return pd.DataFrame(rows).to_html(index=False, border=0, classes="models")


def _launch() -> str:
    how = parallel.describe()
    return f" by {how['processes']} processes ({how['backend']})" if how and "processes" in how else ""


def render_index(done, seconds: float) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>poslens report</title><style>",
        "body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222}",
        "iframe{width:100%;border:1px solid #ddd;border-radius:4px}table{border-collapse:collapse;font-size:13px}",
        "td,th{padding:2px 8px;border-bottom:1px solid "
        "#eee;text-align:left}.headline{background:#f5f7fb;padding:.6em;border-left:3px solid #1f77b4}",
        "details{margin:.5em 0}</style></head><body>",
        "<h1>poslens: positional mechanisms, reproduced</h1>",
        f"<p>Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC in {seconds:.0f} s{_launch()}. "
        "Every figure below has its CSV and a provenance file (checkpoint hashes, versions, arguments) beside it; "
        "<a href='SUMMARY.md'>SUMMARY.md</a> has the key numbers as tables.</p>",
        "<h2>Models</h2>", _models_table(done),
    ]
    section = None
    for step, result in done:
        analysis = get(step.analysis)
        if step.section != section:
            section = step.section
            parts.append(f"<h2>{html.escape(section)}</h2>")
        name = analysis.name
        parts.append(f"<h3 id='{name}'>{name}</h3><p>{html.escape(analysis.about)}</p>")
        if analysis.headline is not None:
            parts.append(f"<p class='headline'>{html.escape(analysis.headline(result.table))}</p>")
        height = (result.figure_height or 500) + 20  # the figure's own height, and room for the frame
        at = f"{step.folder}/" if step.folder else ""
        parts.append(f"<iframe src='{at}{name}.html' height='{height}' loading='lazy'></iframe>")
        links = " · ".join(f"<a href='{at}{p.name}'>{at}{p.name}</a>" for p in result.files)
        parts.append(f"<p>{links}</p>")
        preview = result.table.head(30).to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}")
        parts.append(f"<details><summary>table ({len(result.table)} rows)</summary>{preview}</details>")
    parts.append("</body></html>")
    return "\n".join(parts)
