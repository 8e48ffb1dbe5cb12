"""A live drill-down's cost without the browser: the server's rows for a block, old path against new, same process.

``python -m bench.viewer_live --model smollm2 --length 8192 --layers 29 --clicks 3 --old 1``: loads the model, takes
the viewer's text (the built-in Wikipedia window) at ``--length`` tokens, then

- **record**: the live server's start-up pass (``poslens.viewer.data.Recorded.record``: one forward pass keeping every
  layer's queries and keys), its time and the bytes kept;
- **new**: ``--clicks`` blocks per layer of ``--layers`` (spread over the text, the last block among them), each the
  rows the server answers (``recorded_token_level`` + ``rows_json``), wall clock;
- **old**: the first ``--old`` of those clicks by the forward per click (``token_level``: the text up to the block's
  last row, stopped after the layer), and the largest difference of the two paths' weights.

Prints one JSON record with the machine's load before and after (``--json OUT`` keeps it; a ``note`` added to it is
printed with its line); ``--write OUT ...`` writes
BENCHMARKS.md's ``viewer-live`` section from kept records. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def _load() -> str:
    return " / ".join(open("/proc/loadavg").read().split()[:3])


def main(argv=None) -> dict:
    import torch

    from poslens.viewer.data import Recorded, default_block

    a = _parse(argv)
    if a.write:
        from bench.report import write_section

        text = section([json.loads(open(f).read()) for f in a.write])
        write_section("viewer-live", "The viewer's live drill-down: recorded queries and keys against a forward per "
                      "click", text)
        return {}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model, ids = _model_and_ids(a.model, a.length)
    n, block = len(ids), default_block(len(ids))
    nb = -(-n // block)
    layers = a.layers or [model.n_layers - 1]
    rec = {"model": a.model, "length": n, "block": block, "layers": layers, "torch_threads": torch.get_num_threads(),
           "load_start": _load()}
    print(json.dumps(rec), flush=True)
    t = time.perf_counter()
    recorded = Recorded.record(model, ids)
    rec["record_s"] = time.perf_counter() - t
    rec["record_gb"] = sum(x.q.numel() * x.q.element_size() + x.k.numel() * x.k.element_size()
                           for x in recorded.layers.values()) / 1e9
    print(json.dumps({k: rec[k] for k in ("record_s", "record_gb")}), flush=True)
    blocks = sorted({(j + 1) * nb // a.clicks - 1 for j in range(a.clicks)})
    rec["new"] = _new_clicks(model, recorded, n, block, layers, blocks)
    rec["old"] = _old_clicks(model, ids, recorded, n, block, layers, blocks[:a.old])
    rec["new_median_s"] = statistics.median(x["s"] for x in rec["new"])
    rec["load_end"] = _load()
    print(json.dumps(rec), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f)
    return rec


def _parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--write", nargs="+", default=None)
    ap.add_argument("--model", default="tiny-rope")
    ap.add_argument("--length", type=int, default=None)
    ap.add_argument("--layers", type=int, nargs="+", default=None)
    ap.add_argument("--clicks", type=int, default=3)
    ap.add_argument("--old", type=int, default=1)
    return ap.parse_args(argv)


def _model_and_ids(name: str, length: int | None) -> tuple:
    """The model and the viewer's text: ``tiny-MODE`` a tiny random repo model on random token ids (512 unless
    ``length``), else the loaded model on the built-in window."""
    import torch

    if name.startswith("tiny-"):
        from tests.repo_helpers import tiny_repo

        model = tiny_repo(name[len("tiny-"):])
        return model, torch.randint(1, 250, (length or 512,), generator=torch.Generator().manual_seed(0)).tolist()
    from interp.loading import load
    from poslens.viewer import _ids

    model = load(name)
    return model, _ids(model, None, length)


def _new_clicks(model, recorded, n: int, block: int, layers: list[int], blocks: list[int]) -> list[dict]:
    """Per layer and block, the seconds the server takes to answer a click from the recording."""
    from poslens.viewer.data import block_rows, recorded_token_level
    from poslens.viewer.page import rows_json

    out = []
    for layer in layers:
        for b in blocks:
            rows = block_rows(n, block, b)
            t = time.perf_counter()
            got = recorded_token_level(recorded, rows, [layer], range(model.n_heads))
            rows_json(got, block)
            out.append({"layer": layer, "block": b, "s": time.perf_counter() - t})
            print(json.dumps(out[-1]), flush=True)
    return out


def _old_clicks(model, ids, recorded, n: int, block: int, layers: list[int], blocks: list[int]) -> list[dict]:
    """Per layer and block, the seconds of a forward per click, the largest difference of its weights from the
    recording's where both keep the same keys, and the share of rows that keep the same keys."""
    from poslens.viewer.data import block_rows, recorded_token_level, token_level

    out = []
    for layer in layers:
        for b in blocks:
            rows = block_rows(n, block, b)
            new = recorded_token_level(recorded, rows, [layer], range(model.n_heads))
            t = time.perf_counter()
            old = token_level(model, ids, rows, [layer], range(model.n_heads))
            s = time.perf_counter() - t
            diff = max(abs(x - y) for key in old if old[key][0] == new[key][0]
                       for x, y in zip(old[key][1], new[key][1]))
            same_keys = sum(old[key][0] == new[key][0] for key in old) / len(old)
            out.append({"layer": layer, "block": b, "s": s, "max_diff": diff, "same_keys": same_keys})
            print(json.dumps(out[-1]), flush=True)
    return out

INTRO = """Written by `python -m bench.viewer_live --write RUN.json ...` from runs of `python -m bench.viewer_live
--model M --length N --layers L --json RUN.json` (module docstring), one torch thread, this 2-core machine shared
with other work (load average given per run). `poslens view --serve` now makes one recording pass at start-up
(``poslens.viewer.data.Recorded``: every layer's queries and keys, the mask as a description), and a click computes
its block's rows from it (new); the old path is a forward over the text up to the block, stopped after the layer
(``token_level``), timed in the same process on the same blocks. Without the browser: the server's work per click
only (the Chromium round trip is in the section above)."""


def _secs(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.1f} s"


def section(records: list[dict]) -> str:
    lines = []
    for r in records:
        new, old = r["new"], r["old"]
        lines.append(
            f"- {r['model']} at {r['length']:,} tokens (blocks of {r['block']}), layer(s) {r['layers']}; load average "
            f"{r['load_start']} at the start, {r['load_end']} at the end: recording pass {r['record_s']:.1f} s, "
            f"{r['record_gb']:.3f} GB kept; new click median {statistics.median(x['s'] for x in new) * 1e3:.1f} ms "
            f"(n={len(new)}: " + ", ".join(f"layer {x['layer']} block {x['block']} {x['s'] * 1e3:.1f}" for x in new)
            + " ms); old click "
            + (", ".join(f"layer {x['layer']} block {x['block']} {_secs(x['s'])}" for x in old)
               + f" (n={len(old)}), largest weight difference {max(x['max_diff'] for x in old):.1e}"
               if old else "not timed") + (f"; {r['note']}" if r.get("note") else ""))
    return INTRO + "\n\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
