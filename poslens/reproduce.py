"""The main job: every analysis on the bundled models, written as CSVs, figures and an ``index.html``."""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import figures
from analyses import get
from interp import parallel
from interp.atomic import write_text
from poslens.outputs import Outputs
from poslens.run import run_analysis
from poslens.summary import summary

REPORT_MARKER = ".poslens-report"


@dataclass(frozen=True)
class Step:
    analysis: str
    models: tuple[str, ...]
    options: dict = field(default_factory=dict)
    quick: dict = field(default_factory=dict)  # options that shrink the run for tests
    section: str = ""
    per_model: dict = field(default_factory=dict)  # model name -> options for that model only


INC = "Learned position increments (seed 001)"
REPO = "Context re-positioning (seed 000)"
DSTG = "Disentangled positional and semantic streams (seed 002)"
HEADS = "Heads across models"
INCREMENT_MODELS = ("increments-shared", "increments-per-layer")
DECODERS = ("repo-small", "rope-small", "nope-small")
ENCODERS = ("dstg-small", "ap-encoder-small", "rp-encoder-small", "rope-encoder-small")
SMOLLM2_SHORT = dict(n_docs=4, length=256)

PLAN: tuple[Step, ...] = (
    Step("loss-neutrality", INCREMENT_MODELS + ("rope-bytes",), quick=dict(n_docs=8, n_boot=100), section=INC),
    Step("byte-increments", INCREMENT_MODELS, section=INC),
    Step("word-boundaries", INCREMENT_MODELS, quick=dict(max_gaps=3000, n_boot=100), section=INC),
    Step("entity-spacing", INCREMENT_MODELS, section=INC),
    Step("char-spacing", INCREMENT_MODELS, section=INC),
    Step("niah-accuracy", DECODERS, options=dict(lengths=(512, 1024, 2048), n_docs=16), quick=dict(n_docs=2), section=REPO),
    Step("attention-mass", DECODERS + ("smollm2",), options=dict(n_docs=16, length=512, preamble=False),
         quick=dict(n_docs=2), per_model={"smollm2": SMOLLM2_SHORT}, section=REPO),
    Step("position-ranges", DECODERS + ("increments-per-layer", "smollm2"), options=dict(n_docs=4, length=512),
         quick=dict(n_docs=1), per_model={"smollm2": dict(n_docs=2, length=256)}, section=REPO),
    Step("position-patterns", ("repo-small", "increments-per-layer"), options=dict(length=256),
         per_model={"repo-small": dict(length=256, layers=(1, 3))}, section=REPO),
    Step("ap-spectrum", ("dstg-small", "ap-encoder-small", "minilm"), section=DSTG),
    Step("kl-ablation", ("dstg-small",), options=dict(n_docs=100), quick=dict(n_docs=4), section=DSTG),
    Step("compare-heads", ("dstg-small", "rp-encoder-small"), options=dict(n_docs=50), quick=dict(n_docs=4), section=DSTG),
    Step("position-probes", ENCODERS + ("minilm", "repo-small", "increments-per-layer"),
         options=dict(n_docs=100, n_train=80, n_test=20, n_seeds=5), quick=dict(n_docs=12, n_train=8, n_test=4, n_seeds=2, cv_folds=2),
         section=DSTG),
    Step("head-profiles", ("repo-small", "rope-small", "increments-per-layer", "dstg-small", "smollm2", "minilm"),
         options=dict(n_docs=4, length=256, n_samples=8, niah_tokens=480), quick=dict(n_docs=1, n_samples=1, max_rows=32),
         per_model={"smollm2": dict(n_docs=2, length=256, n_samples=2, niah_tokens=256)}, section=HEADS),
    Step("sink-rate", DECODERS, options=dict(lengths=(64, 256), n_docs=4), quick=dict(lengths=(64,), n_docs=1, max_rows=32),
         section=HEADS),
    Step("induction", DECODERS, options=dict(half=128, n_docs=4), quick=dict(half=32, n_docs=1), section=HEADS),
    Step("rope-frequencies", DECODERS, options=dict(n_docs=4, length=512, n_samples=8, niah_tokens=480),
         quick=dict(n_docs=1, length=128, max_rows=16, n_samples=1, niah_tokens=224), section=HEADS),
    Step("retrieval-heads", ("repo-small", "nope-small"), options=dict(n_docs=8, n_samples=16, length=480, n_random=3),
         quick=dict(n_docs=1, n_samples=1, length=224, n_random=1), section=HEADS),
    Step("attention-window", DECODERS, options=dict(length=512, n_docs=4, window=128),
         quick=dict(length=128, n_docs=1, window=32, max_rows=16), section=HEADS),
    Step("along-context", DECODERS, options=dict(length=2048, n_docs=3), quick=dict(length=128, n_docs=2), section=HEADS),
)


KNOWN = "Known results on pretrained models"
PRETRAINED = ("smollm2", "gemma3-270m")
# behind `poslens reproduce --real-models`: the runs the README's "Known results, reproduced" table comes from
REAL_PLAN: tuple[Step, ...] = (
    Step("induction", PRETRAINED, options=dict(half=256, n_docs=8), quick=dict(half=32, n_docs=1), section=KNOWN),
    # Gu et al.'s estimator (the default) at their T = 64 and at two longer evaluation lengths (their Fig. 3)
    Step("sink-rate", PRETRAINED, options=dict(estimator="gu", lengths=(64, 256, 1024), n_docs=16),
         quick=dict(lengths=(64,), n_docs=1, max_rows=32), section=KNOWN),
    Step("rope-frequencies", PRETRAINED, options=dict(n_docs=4, length=512, n_samples=8, niah_tokens=512),
         quick=dict(n_docs=1, length=64, max_rows=16, n_samples=1, niah_tokens=128), section=KNOWN),
    # Wu et al.'s score and masking (the defaults)
    Step("retrieval-heads", PRETRAINED, options=dict(n_docs=8, n_samples=8, length=512, n_random=2),
         quick=dict(n_docs=1, n_samples=1, length=128, shares=(0.02,), n_random=1), section=KNOWN),
    # StreamingLLM's experiment: SmolLM2 streamed past its 8192 positions; Gemma 3 inside its 32768 (past them takes about
    # 70 minutes on a 2-core CPU); cache 1024, with the no-start-token control
    Step("attention-window", PRETRAINED, options=dict(setting="streaming", cache_size=1024, sinks=(0, 1, 4), control=True),
         per_model={"smollm2": dict(stream_tokens=12288, recompute_stride=192),
                    "gemma3-270m": dict(stream_tokens=8192, recompute_stride=256)},
         quick=dict(stream_tokens=96, cache_size=32, recompute_stride=32), section=KNOWN),
)


def reproduce(out="results", *, seed: int = 0, force: bool = False, quick: bool = False, plan=None, log=print,
              device=None, real_models: bool = False) -> Path:
    """Run ``plan`` (default ``PLAN``) into ``out`` and write ``out/index.html``; refuse to touch an existing
    report unless ``force``. ``real_models`` adds ``REAL_PLAN``: the pretrained models' runs (minutes more) and
    ``KNOWN_RESULTS.md``, the README's known-results table from their CSVs (``poslens.known_results``).

    The whole report is written under the lock ``out/.report.lock``; each analysis' files appear atomically
    (``poslens.outputs``), the index and summary last. In a data-parallel session (torchrun,
    ``interp.parallel.session``) every rank runs every step, in the same order: the data-parallel analyses share
    their documents, the others are computed on each rank. Only rank 0 takes the lock, logs and writes; it decides
    whether ``out`` may be written before any work, and every rank stops on a refusal (``parallel.agree``)."""
    out, plan = Path(out), (PLAN + (REAL_PLAN if real_models else ())) if plan is None else plan
    with contextlib.ExitStack() as held:
        outputs = parallel.agree(lambda: held.enter_context(_report_folder(out, force)))
        say = log if outputs is not None else (lambda line: None)
        start = time.time()
        done = []
        held.enter_context(figures.shared_plotlyjs())  # the report's figures share one plotly.min.js
        for i, step in enumerate(plan, 1):
            say(f"[{i}/{len(plan)}] {step.analysis} on {', '.join(step.models)} ({time.time() - start:.0f}s elapsed)")
            options = {**step.options, **(step.quick if quick else {})}
            result = run_analysis(step.analysis, list(step.models), out, options=options, seed=seed, force=True,
                                  per_model={m: {**options, **o} for m, o in step.per_model.items()}, device=device)
            done.append((step, result))
        if outputs is not None:
            (outputs.staging / "index.html").write_text(render_index(done, time.time() - start), encoding="utf-8")
            (outputs.staging / "SUMMARY.md").write_text(summary(done), encoding="utf-8")
            if real_models:
                from poslens.known_results import render

                (outputs.staging / "KNOWN_RESULTS.md").write_text(render(out), encoding="utf-8")
            outputs.commit([])
        say(f"report: {out / 'index.html'} ({time.time() - start:.0f}s)")
    return out / "index.html"


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
        prov = json.loads(next(p for p in result.files if p.name.endswith(".provenance.json")).read_text(encoding="utf-8"))
        for m in prov["models"]:
            seen.setdefault(m["name"], m)
    rows = []
    for name, m in seen.items():
        record = Path(m["path"]) / "training.json" if m.get("path") else None
        train = json.loads(record.read_text(encoding="utf-8")) if record is not None and record.is_file() else {}
        loss = train.get("final_validation_loss")
        rows.append(dict(model=name, family=m["family"], about=m["description"], sha256=m.get("sha256", "")[:12],
                         steps=train.get("steps", ""), tokens=f"{train['tokens_seen']:,}" if "tokens_seen" in train else "",
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
        "td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}.headline{background:#f5f7fb;padding:.6em;border-left:3px solid #1f77b4}",
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
        parts.append(f"<iframe src='{name}.html' height='{height}' loading='lazy'></iframe>")
        links = " · ".join(f"<a href='{p.name}'>{p.name}</a>" for p in result.files)
        parts.append(f"<p>{links}</p>")
        preview = result.table.head(30).to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}")
        parts.append(f"<details><summary>table ({len(result.table)} rows)</summary>{preview}</details>")
    parts.append("</body></html>")
    return "\n".join(parts)
