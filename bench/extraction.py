"""Extraction cost: per-layer increments + every layer's attention pattern over N windows, against the
bare forward pass over the same windows; and peak memory for N and 4N windows (each in a fresh process),
which must not grow with N because extraction streams.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from bench.harness import cell, emit

WINDOW = 512
BATCH = 8


def _model():
    from interp.catalog import lookup
    from interp.loading import load

    entry = lookup("increments-per-layer")
    if entry is not None:
        return load(entry.name)
    from interp.families.increments.model import IncrementConfig, IncrementTransformer
    from poslens.train.recipes.increments import SMALL_BYTES

    torch.manual_seed(0)  # same size as the bundled model when it is not there
    return IncrementTransformer(IncrementConfig(**SMALL_BYTES, pos_encoding="selective_rope",
                                                per_layer_delta=True)).eval()


def _windows(n: int) -> np.ndarray:
    from corpora.streams import bilingual_streams

    return bilingual_streams("validation", 0).windows(np.random.default_rng(0), n, WINDOW)


@torch.no_grad()
def bare(model, windows) -> None:
    for i in range(0, len(windows), BATCH):
        model(torch.from_numpy(windows[i : i + BATCH]))


def extract(model, windows) -> float:
    from interp import extract as ex

    names = [h for _, h in model.increment_sources()] + [f"blocks.{l}.attn.hook_pattern" for l in range(model.n_layers)]
    total = 0.0
    for _, acts in ex.stream(model, list(windows), names, batch_size=BATCH):
        total += float(acts[names[0]].sum()) + float(acts[names[-1]][:, -1].max())  # consume, keep nothing
    return total


def child(mode: str, n: int) -> dict:
    model = _model()
    windows = _windows(n)
    bare(model, windows[:BATCH])  # warm-up
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    (bare if mode == "bare" else extract)(model, windows)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"mode": mode, "n": n, "seconds": seconds, "peak_rss_mb": peak / 1024,
            "growth_mb": (peak - rss_before) / 1024}


def run_child(mode: str, n: int) -> dict:
    return cell("bench.extraction", mode, n)


def main(n: int = 16) -> str:
    from bench.report import machine, write_section

    runs = {(m, k): run_child(m, k) for m, k in (("bare", n), ("extract", n), ("extract", 4 * n))}
    b, e, e4 = runs["bare", n], runs["extract", n], runs["extract", 4 * n]
    body = f"""Model: `increments-per-layer` (4 layers, 4 heads), {WINDOW}-byte windows, batch {BATCH}; {machine()}.

| measure | value |
| --- | --- |
| bare forward, {n} windows | {b['seconds']:.2f} s |
| extraction (per-layer increments + all attention patterns), {n} windows | {e['seconds']:.2f} s |
| **time ratio extraction / bare** | **{e['seconds'] / b['seconds']:.2f}x** |
| peak RSS, extraction of {n} windows | {e['peak_rss_mb']:.0f} MB (grew {e['growth_mb']:.0f} MB while extracting) |
| peak RSS, extraction of {4 * n} windows | {e4['peak_rss_mb']:.0f} MB (grew {e4['growth_mb']:.0f} MB while \
extracting) |
| **peak memory ratio {4 * n} / {n} windows** | **{e4['peak_rss_mb'] / e['peak_rss_mb']:.3f}x** (streaming: should \
stay near 1) |
"""
    write_section("extraction", "Increment and pattern extraction vs the bare forward pass", body)
    return body


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=2, metavar=("MODE", "N"))
    p.add_argument("--n", type=int, default=16)
    a = p.parse_args()
    if a.child:
        torch.set_num_threads(1)
        emit(child(a.child[0], int(a.child[1])))
    else:
        print(main(a.n))
