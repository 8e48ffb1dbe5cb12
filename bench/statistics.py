"""All-row attention statistics against the forward pass they ride, and against the peers that return patterns.

Models (fp32 on the CPU): SmolLM2-135M (``load("smollm2")``, the installed GGUF package, poslens' llama family; default
lengths 2,048 / 4,096 / 8,192) and Gemma 3 270M (``load("gemma3-270m")``, the hf family over transformers' modules,
five sliding-window layers to one global; default lengths 8,192 / 16,384 / 32,768). The issue's targets: at every
length, each statistics cell at most 1.15x the forward's peak RSS and 1.5x its time.

Cells, each run in a fresh process (import, load, a 64-token warm-up, then one timed call with the peak-RSS mark reset
just before it: ``/proc/self/clear_refs``), one torch thread:

- ``forward``: the model's forward pass without the unembedding (stopped at the last block's ``hook_resid_post``);
- ``head-profiles``: ``analyses.head_profiles.context_masses`` of one context, every row (previous / first / self /
  local-window masses of every query row, every layer and head, through ``interp.attention.model_statistics``);
- ``sink-rate``: ``analyses.sink_rate.first_token_attention`` of one context, every row (row 0 included);
- peers, at the peer lengths, on the model's Hugging Face directory (SmolLM2 de-quantised by
  ``bench.peers.model_dir``, Gemma 3 the directory ``load`` converts once), each reducing the first-token mass of
  every row, every layer and head: ``output_attentions`` (transformers' base model, no LM head, eager attention,
  every layer's pattern returned) and ``transformerlens`` (TransformerLens' ``TransformerBridge``: eager attention,
  a ``hook_pattern`` hook per layer that reduces, stopped at the last block's ``hook_resid_post`` with the bridge's
  own ``StopAtLayerException``, as its ``stop_at_layer`` cannot stop after the last block; the patterns are not
  kept across layers, so its memory grows with one layer's pattern, not all of them).

Each length runs its cells interleaved (forward, head-profiles, sink-rate, peers, then again) ``--repeats`` times;
the table gives the median and min..max of time and peak RSS, and the ratios of the medians against the forward of the
same model and length. Peak RSS is the process' (weights included); "above" is the median peak above the resident
memory just before the call; "load at start" the machine's 1-minute load average as each run of the cell began.
The peers' processes start lighter than poslens' (SmolLM2 at 256 tokens: 0.9 GB against 1.65 GB peak; Gemma 3:
0.85-1.2 GB against 1.84 GB), so their peak-RSS ratio against the forward mixes that start with the workload;
"above" compares the workloads.
A peer cell runs only where its estimated need (weights, every layer's patterns, one layer's scores in flight,
interpreter) fits the memory it may take: ``MemAvailable`` at that moment, capped at what other work on the machine
may claim (``--others-gb``), less ``--margin-gb``; otherwise the need is recorded and shown.
While any cell runs, the parent watches ``MemAvailable`` and kills the cell if it falls under 1 GB. Tokens: seeded
random ids 100..40000 (the cost does not depend on them). The section and the run's
``statistics-<models>-<time>.json`` (in ``$POSLENS_BENCH_DIR``, else ``~/.cache/poslens-bench``) are rewritten after
every length; ``--merge`` takes earlier runs' files into the table, each (model, length) measured again replaced whole,
so ratios never mix runs.

``python -m bench.statistics [--model smollm2 gemma3-270m] [--lengths N ...] [--peer-lengths 1024 2048 4096]
[--repeats 3] [--merge JSON ...] [--write]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench import harness
from bench.harness import meminfo
from bench.report import reset_peak_rss, rss_mb, write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"smollm2": (2048, 4096, 8192), "gemma3-270m": (8192, 16384, 32768)}
CELLS = ("forward", "head-profiles", "sink-rate")
PEERS = ("output_attentions", "transformerlens")
PEER_LENGTHS = (1024, 2048, 4096)
INTERPRETER_GB = 1.0  # torch + transformers (+ TransformerLens) imported, before any weight
WATCH_FLOOR_GB = 1.0
RESULTS = Path(os.environ.get("POSLENS_BENCH_DIR", Path.home() / ".cache" / "poslens-bench"))


def tokens_of(length: int) -> torch.Tensor:
    return torch.randint(100, 40000, (1, length), generator=torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- the models' Hugging Face directories and shapes


def hf_dir(model_name: str) -> Path:
    """The Hugging Face directory both peers load (converted once and cached)."""
    if model_name == "smollm2":
        from bench.peers import model_dir

        return model_dir("smollm2")
    if model_name == "gemma3-270m":
        from interp.catalog import CHUNKED
        from interp.loading.converted import converted

        return converted(model_name, CHUNKED[model_name])
    raise ValueError(f"--model {model_name!r}: not one of {sorted(MODELS)}")


def shape_of(directory: Path) -> dict:
    """Layers, query heads and the weights' size on disk, from the directory's ``config.json`` and safetensors."""
    config = json.loads((directory / "config.json").read_text())
    config = config.get("text_config", config)
    weights = sum(f.stat().st_size for f in directory.glob("*.safetensors"))
    return {"n_layers": config["num_hidden_layers"], "n_heads": config["num_attention_heads"], "weights_bytes": weights}


def peer_needs_gb(shape: dict, length: int, cell: str = "output_attentions") -> float:
    """A peer's estimated peak RSS: weights, the interpreter, one layer's scores / weights / copies in flight (six
    float32 patterns and two float masks) and, for ``output_attentions``, every layer's pattern held until the model
    returns. The bridge holds none across layers: its hooks see each pattern and the model is not asked to keep them
    (measured on SmolLM2: 590 MB above the start at 2,048 tokens, four patterns, against 4.8 GB for
    ``output_attentions``)."""
    pattern = shape["n_heads"] * length * length * 4
    held = shape["n_layers"] if cell == "output_attentions" else 0
    return (shape["weights_bytes"] + (held + 6) * pattern + 2 * length * length * 4) / 1e9 + INTERPRETER_GB


def budget_gb(others_gb: float, margin_gb: float, info: dict | None = None) -> float:
    """What one cell may take now: ``MemAvailable``, no more than the total less what other work may claim, less the
    margin."""
    info = info or meminfo()
    return min(info["MemAvailable"], info["MemTotal"] - others_gb) - margin_gb


# ---------------------------------------------------------------- one measurement (child process)


def _poslens(model_name: str, cell: str, length: int):
    from analyses.head_profiles import context_masses
    from analyses.sink_rate import first_token_attention
    from interp.attention import StopForward
    from interp.loading import load

    model = load(model_name)
    model.max_seq_len = max(model.max_seq_len, length)
    last = f"blocks.{model.n_layers - 1}.hook_resid_post"

    def stop(x, hook):
        raise StopForward(hook.name)

    def forward(x):
        with torch.no_grad(), model.hooks(fwd_hooks=[(last, stop)]):
            try:
                model(x)
            except StopForward:
                pass

    return {"forward": forward,
            "head-profiles": lambda x: context_masses(model, x[0].tolist(), 0, 8),
            "sink-rate": lambda x: first_token_attention(model, x[0].tolist(), 0)}[cell]


def _peer(model_name: str, cell: str):
    os.environ["HF_HUB_OFFLINE"] = "1"
    path = hf_dir(model_name)
    if cell == "output_attentions":
        from transformers import AutoModel

        model = AutoModel.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()

        def run(x):
            with torch.no_grad():
                attentions = model(x, output_attentions=True).attentions
            return torch.stack([a[0, :, :, 0] for a in attentions])

        return run
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.exceptions import StopAtLayerException

    bridge = TransformerBridge.boot_transformers(str(path), device="cpu", dtype=torch.float32)
    n_layers = len(bridge.blocks)

    def run(x):
        first = [None] * n_layers

        def reduce(layer):
            def hook(pattern, hook):
                first[layer] = pattern[0, :, :, 0].clone()
            return hook

        def stop(resid, hook):
            raise StopAtLayerException(resid)

        hooks = [(f"blocks.{l}.attn.hook_pattern", reduce(l)) for l in range(n_layers)]
        hooks.append((f"blocks.{n_layers - 1}.hook_resid_post", stop))
        with torch.no_grad():
            out = bridge.run_with_hooks(x, fwd_hooks=hooks)
        if out.shape[-1] != bridge.cfg.d_model:
            raise RuntimeError(f"TransformerBridge ran past the last block: output {tuple(out.shape)}")
        if any(f is None for f in first):
            raise RuntimeError(f"TransformerBridge fired hook_pattern on {sum(f is not None for f in first)} of "
                               f"{n_layers} layers")
        return torch.stack(first)

    return run


def child(model_name: str, cell: str, length: int) -> dict:
    torch.set_num_threads(1)
    ids = tokens_of(length)
    run = _peer(model_name, cell) if cell in PEERS else _poslens(model_name, cell, length)
    run(ids[:, :64])
    before = rss_mb()
    reset_peak_rss()
    start = time.perf_counter()
    run(ids)
    seconds = time.perf_counter() - start
    peak = rss_mb("VmHWM")
    return {"seconds": seconds, "peak_mb": peak, "above_mb": peak - before}


# ---------------------------------------------------------------- the parent


def run_child(model_name: str, cell: str, length: int, timeout: float) -> dict:
    """One cell in a fresh process, killed if it outlives ``timeout`` or the machine's free memory runs low."""
    load = os.getloadavg()[0]
    row = harness.cell("bench.statistics", model_name, cell, length, timeout=timeout, floor_gb=WATCH_FLOOR_GB,
                       check=False)
    return row if "failed" in row else {**row, "load": load}


def measure(model_name: str, lengths, peer_lengths, repeats: int, others_gb: float, margin_gb: float,
            timeout: float, on_length=None) -> list[dict]:
    """Every cell of one model: per length, ``repeats`` rounds of its cells in a fixed order."""
    shape = shape_of(hf_dir(model_name)) if peer_lengths else None
    results = []
    for length in sorted(set(lengths) | set(peer_lengths)):
        cells = (CELLS if length in lengths else ("forward",)) + (PEERS if length in peer_lengths else ())
        rows = {cell: {"model": model_name, "cell": cell, "length": length, "runs": []} for cell in cells}
        for _ in range(repeats):
            for cell in cells:
                row = rows[cell]
                if "skipped" in row or "failed" in row:
                    continue
                if cell in PEERS:
                    need, free = peer_needs_gb(shape, length, cell), budget_gb(others_gb, margin_gb)
                    if need > free:
                        row["skipped"] = {"needs_gb": need, "budget_gb": free}
                        print(json.dumps(row), file=sys.stderr, flush=True)
                        continue
                    row["needs_gb"] = need
                run = run_child(model_name, cell, length, timeout)
                if "failed" in run:
                    row["failed"] = run["failed"]
                else:
                    row["runs"].append(run)
                print(json.dumps({k: v for k, v in row.items() if k != "runs"} | {"run": run}), file=sys.stderr,
                      flush=True)
        results.extend(rows.values())
        if on_length:
            on_length(results)
    return results


def _median(row: dict, key: str) -> float:
    return statistics.median(r[key] for r in row["runs"])


def _spread(row: dict, key: str, fmt: str) -> str:
    values = [r[key] for r in row["runs"]]
    middle = format(statistics.median(values), fmt)
    return middle if len(values) == 1 else f"{middle} ({format(min(values), fmt)}..{format(max(values), fmt)})"


def _loads(row: dict) -> str:
    loads = [r["load"] for r in row["runs"] if "load" in r]
    if not loads:
        return ""
    return f"{loads[0]:.1f}" if len(loads) == 1 else f"{min(loads):.1f}..{max(loads):.1f}"


def table(results: list[dict]) -> str:
    base = {(r["model"], r["length"]): r for r in results if r["cell"] == "forward" and r["runs"]}
    several = len({r.get("run") for r in results}) > 1
    lines = ["| model | tokens | run | n | seconds: median (min..max) | x forward | "
             "peak RSS MB: median (min..max) | x forward | peak above start MB | load at start |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        tokens = f"{r['length']} (run {r['run']})" if several else str(r["length"])
        head = f"| {r['model']} | {tokens} | {r['cell']} | {len(r['runs'])} |"
        if not r["runs"]:
            if "skipped" in r:
                s = r["skipped"]
                why = f"not run: needs {s['needs_gb']:.1f} GB, {max(s['budget_gb'], 0):.1f} GB could be taken"
            else:
                why = f"not measured: {r.get('failed', '?')}"
            lines.append(f"{head} {why} | | | | | |")
            continue
        f = base.get((r["model"], r["length"]))
        ratio_t = f"{_median(r, 'seconds') / _median(f, 'seconds'):.2f}x" if f else ""
        ratio_m = f"{_median(r, 'peak_mb') / _median(f, 'peak_mb'):.2f}x" if f else ""
        note = f" ({r['failed']} after {len(r['runs'])})" if "failed" in r else ""
        if "skipped" in r:
            note = (f" (then not run: needs {r['skipped']['needs_gb']:.1f} GB, "
                    f"{max(r['skipped']['budget_gb'], 0):.1f} GB free)")
        lines.append(f"{head} {_spread(r, 'seconds', '.1f')}{note} | {ratio_t} | "
                     f"{_spread(r, 'peak_mb', '.0f')} | {ratio_m} | "
                     f"{_median(r, 'above_mb'):.0f} | {_loads(r)} |")
    return "\n".join(lines)


def run_info(args, started: dt.datetime, loads: tuple) -> dict:
    """What the section says about one invocation: command, commit, times, load, repeats and the peers' memory rule."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return {"command": "python -m bench.statistics " + shlex.join(args.argv),
            "commit": commit + (" (with local changes)" if dirty else ""),
            "started": f"{started:%Y-%m-%d %H:%M}", "ended": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}",
            "load": [list(x) for x in loads], "repeats": args.repeats, "others_gb": args.others_gb,
            "margin_gb": args.margin_gb}


def section(results: list[dict], runs: list[dict]) -> str:
    """The BENCHMARKS.md section: each invocation's conditions, what is measured, the table."""
    def load(x):
        return " / ".join(f"{v:.2f}" for v in x)

    said = []
    for number, run in enumerate(runs, 1):
        label = f"Run {number}" if len(runs) > 1 else "Measured"
        said.append(f"{label}: `{run['command']}` at commit {run['commit']}, {run['started']} to {run['ended']} UTC, "
                    f"{run['repeats']} repeat(s) per cell; load average (1 / 5 / 15 min) {load(run['load'][0])} "
                    f"at the start, {load(run['load'][1])} at the end; peers limited to what other work "
                    f"({run['others_gb']:.0f} GB) leaves, less {run['margin_gb']:.1f} GB.")
    where = (f"On {platform.machine()} ({os.cpu_count()} cores, {meminfo()['MemTotal']:.1f} GB), "
             f"torch {torch.__version__}, one torch thread per cell."
             + (" Rows marked (run k) come from run k; ratios are always within one run." if len(runs) > 1 else ""))
    prose = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
    return "\n\n".join([where, "\n".join(f"- {line}" for line in said) if len(runs) > 1 else said[0], prose,
                        table(results)]) + "\n"


def merged(earlier: list[dict], current: list[dict]) -> list[dict]:
    """Earlier runs' rows, each (model, length) measured again replaced whole by the current run's (peers included,
    whether or not this run measures them there), in model, length and cell order."""
    fresh = {(r["model"], r["length"]) for r in current}
    rows = [r for r in earlier if (r["model"], r["length"]) not in fresh] + current
    models, order = list(MODELS), CELLS + PEERS
    return sorted(rows, key=lambda r: (models.index(r["model"]), r["length"], order.index(r["cell"])))


def read_merge(paths: list[str], p) -> tuple[list[dict], list[dict]]:
    runs, rows = [], []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
            run, found = data["run"], data["results"]
            if not all({"model", "cell", "length", "runs"} <= set(r) for r in found):
                raise KeyError("model / cell / length / runs in every result")
        except (OSError, ValueError, KeyError, TypeError) as err:
            p.error(f"--merge {path}: not a bench.statistics results file ({type(err).__name__}: {err})")
        runs.append(run)
        rows += [dict(r, run=len(runs)) for r in found]
    return runs, rows


def main(argv=None) -> str:
    p = argparse.ArgumentParser(prog="python -m bench.statistics", description=__doc__.splitlines()[0])
    p.add_argument("--model", nargs="+", default=["smollm2"], choices=sorted(MODELS),
                   help="models to measure, each at its own default lengths unless --lengths is given")
    p.add_argument("--lengths", nargs="*", type=int, help="statistics lengths for every model given")
    p.add_argument("--peer-lengths", nargs="*", type=int, default=list(PEER_LENGTHS))
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per cell")
    p.add_argument("--others-gb", type=float, default=12.0, help="memory other work on the machine may claim")
    p.add_argument("--margin-gb", type=float, default=2.0, help="kept free beyond that")
    p.add_argument("--timeout", type=float, default=7200.0, help="seconds per cell")
    p.add_argument("--merge", nargs="+", default=[], metavar="JSON",
                   help="earlier runs' results files: their rows join the table, "
                        "except lengths this run measures again")
    p.add_argument("--write", action="store_true", help="update the BENCHMARKS.md section")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    for name, values in (("--lengths", args.lengths or []), ("--peer-lengths", args.peer_lengths)):
        bad = [v for v in values if v < 65]
        if bad:
            p.error(f"{name} {bad}: each length must exceed the 64-token warm-up")
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: at least 1")
    earlier_runs, earlier = read_merge(args.merge, p)
    started, start_load = dt.datetime.now(dt.timezone.utc), os.getloadavg()
    out = RESULTS / f"statistics-{'-'.join(args.model)}-{started:%Y%m%d-%H%M%S}.json"
    results: list[dict] = []

    def report(rows: list[dict]) -> str:
        """The section so far (after every length: a run cut short still leaves what it measured)."""
        run = run_info(args, started, (start_load, os.getloadavg()))
        RESULTS.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"run": run, "results": rows}, indent=1))
        number = len(earlier_runs) + 1
        shown = merged(earlier, [dict(r, run=number) for r in rows]) if earlier_runs else rows
        body = section(shown, earlier_runs + ([run] if rows or not earlier_runs else []))  # a --merge alone adds no run
        if args.write:
            write_section("statistics", "All-row attention statistics vs the forward pass (CPU)", body)
        print(table(shown), f"\n(results: {out})", file=sys.stderr, flush=True)
        return body

    for name in args.model:
        lengths = args.lengths if args.lengths is not None else MODELS[name]
        done = list(results)
        results = done + measure(name, lengths, args.peer_lengths, args.repeats, args.others_gb, args.margin_gb,
                                 args.timeout, on_length=lambda rows, done=done: report(done + rows))
    return report(results)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        harness.emit(child(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        sys.exit(0)
    print(main())
