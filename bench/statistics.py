"""All-row attention statistics against the forward pass they ride: SmolLM2-135M (``load("smollm2")``, the installed
GGUF package, fp32) at 2,048 and 8,192 tokens.

Cells, each a fresh process (import, load, a 64-token warm-up, then one timed call with the peak-RSS mark reset just
before it: ``/proc/self/clear_refs``), one torch thread:

- ``forward``: the model's forward pass without the unembedding (stopped at the last block's ``hook_resid_post``);
- ``head-profiles``: ``analyses.head_profiles.context_masses`` of one context, every row (previous / first / self /
  local-window masses of every query row, every layer and head, through ``interp.attention.model_statistics``);
- ``sink-rate``: ``analyses.sink_rate.first_token_attention`` of one context, every row (row 0 included);
- ``output_attentions`` (the peer): transformers' base model (no LM head), eager attention, ``output_attentions=True``
  and the first-token mass of every row reduced from the returned patterns; only where its patterns fit
  ``PEER_LIMIT_GB`` (else the memory they would need is recorded).

Tokens: seeded random ids 100..40000 (the cost does not depend on them). Peak RSS is the process' (weights included);
"above" is the peak above the resident memory just before the call.

``python -m bench.statistics [--lengths 2048 8192] [--peer-lengths 1024 2048] [--write]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench.report import machine, reset_peak_rss, rss_mb, write_section

ROOT = Path(__file__).resolve().parent.parent
CELLS = ("forward", "head-profiles", "sink-rate")
PEER = "output_attentions"
PEER_LIMIT_GB = 12.0
SMOLLM2 = dict(n_layers=30, n_heads=9)


def tokens_of(length: int) -> torch.Tensor:
    return torch.randint(100, 40000, (1, length), generator=torch.Generator().manual_seed(0))


def peer_needs_gb(length: int) -> float:
    """transformers' eager patterns of every layer, returned together: 30 x 9 x N x N float32 (more while they form)."""
    return SMOLLM2["n_layers"] * SMOLLM2["n_heads"] * length * length * 4 / 1e9


def child(cell: str, length: int) -> dict:
    torch.set_num_threads(1)
    ids = tokens_of(length)
    if cell == PEER:
        from transformers import AutoModel

        from bench.peers import model_dir

        model = AutoModel.from_pretrained(model_dir("smollm2"), dtype=torch.float32, attn_implementation="eager").eval()

        def run(x):
            with torch.no_grad():
                attentions = model(x, output_attentions=True).attentions
            return torch.stack([a[0, :, :, 0] for a in attentions])  # first-token mass of every row
    else:
        from analyses.head_profiles import context_masses
        from analyses.sink_rate import first_token_attention
        from interp.attention import StopForward
        from interp.loading import load

        model = load("smollm2")
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

        run = {"forward": forward,
               "head-profiles": lambda x: context_masses(model, x[0].tolist(), 0, 8),
               "sink-rate": lambda x: first_token_attention(model, x[0].tolist(), 0)}[cell]
    run(ids[:, :64])
    before = rss_mb()
    reset_peak_rss()
    start = time.perf_counter()
    run(ids)
    seconds = time.perf_counter() - start
    peak = rss_mb("VmHWM")
    return {"cell": cell, "length": length, "seconds": seconds, "peak_mb": peak, "above_mb": peak - before}


def measure(cell: str, length: int, timeout: int = 3600) -> dict:
    if cell == PEER and peer_needs_gb(length) > PEER_LIMIT_GB:
        return {"cell": cell, "length": length, "needs_gb": peer_needs_gb(length)}
    out = subprocess.run([sys.executable, "-m", "bench.statistics", "--child", cell, str(length)], cwd=ROOT,
                         capture_output=True, text=True, timeout=timeout,
                         env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    if out.returncode:
        raise RuntimeError(f"{cell} at {length}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    base = {r["length"]: r for r in results if r["cell"] == "forward"}
    lines = ["| tokens | run | seconds | x forward | peak RSS MB | x forward | peak above start MB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        f = base.get(r["length"])
        if "needs_gb" in r:
            lines.append(f"| {r['length']} | {r['cell']} | not run: its patterns need {r['needs_gb']:.1f} GB | | | | |")
            continue
        ratio_t = f"{r['seconds'] / f['seconds']:.2f}x" if f else ""
        ratio_m = f"{r['peak_mb'] / f['peak_mb']:.2f}x" if f else ""
        lines.append(f"| {r['length']} | {r['cell']} | {r['seconds']:.1f} | {ratio_t} | {r['peak_mb']:.0f} | {ratio_m} | "
                     f"{r['above_mb']:.0f} |")
    return "\n".join(lines)


def main(lengths=(2048, 8192), peer_lengths=(1024, 2048)) -> str:
    results = []
    for length in sorted(set(lengths) | set(peer_lengths)):
        cells = (CELLS if length in lengths else ("forward",)) + ((PEER,) if length in peer_lengths else ())
        for cell in cells:
            results.append(measure(cell, length))
            print(json.dumps(results[-1]), flush=True)
    return table(results)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", nargs=2, metavar=("CELL", "LENGTH"), help=argparse.SUPPRESS)
    p.add_argument("--lengths", nargs="*", type=int, default=[2048, 8192])
    p.add_argument("--peer-lengths", nargs="*", type=int, default=[1024, 2048])
    p.add_argument("--write", action="store_true", help="update the BENCHMARKS.md section")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        sys.exit(0)
    result = main(args.lengths, args.peer_lengths)
    if args.write:
        write_section("statistics", "All-row attention statistics vs the forward pass (SmolLM2-135M, CPU)",
                      f"{machine()}; one torch thread per fresh process; `python -m bench.statistics --write`.\n\n{result}")
    print(result)
