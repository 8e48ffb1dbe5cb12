"""The generic ``hf`` family at long context, against TransformerLens' bridge on the same checkpoint.

A random Qwen2 directory (written by transformers; the bridge boots Qwen2 as it is) is read by both tools.
Each measurement is one fresh process: load, a 64-token warm-up, then one timed call with the peak-RSS mark
reset just before it (``/proc/self/clear_refs``); memory is the peak above the RSS before the call. Children run
with ``MALLOC_MMAP_THRESHOLD_=65536`` so every tensor is its own mapping, freed back at once: the RSS peak is the
peak of live memory, not of what glibc's heap kept from earlier calls. Workloads:

- ``poslens bare``: the generic family's plain forward (fused attention, no pattern built);
- ``poslens mass``: ``answer_attention`` (attention-mass of the 8 answer rows, every layer and head,
  patterns streamed through ``query_rows``);
- ``bridge bare``: the bridge's forward (eager attention);
- ``bridge cache``: the bridge's ``run_with_cache`` of every layer's ``hook_pattern``, the way a
  TransformerLens user reads patterns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.harness import cell, emit
from bench.report import reset_peak_rss, rss_mb

LENGTH = 4096
MODES = ("poslens bare", "poslens mass", "bridge bare", "bridge cache")
CONFIG = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              vocab_size=300, max_position_embeddings=LENGTH + 64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def write_checkpoint(directory: Path) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(**CONFIG)).save_pretrained(directory)


def _sample(length: int):
    from corpora.niah import niah_samples
    from interp.tokenizers import ByteTokenizer

    return niah_samples(ByteTokenizer(), 1, length - 8, seed=0, preamble=False)[0]


def child(mode: str, directory: str, length: int) -> dict:
    os.environ["HF_HUB_OFFLINE"] = "1"
    s = _sample(length)
    seq = torch.tensor([s.token_ids + s.answer_ids])
    if mode.startswith("poslens"):
        import interp
        from analyses.attention_mass import answer_attention

        model = interp.load(directory)
        run = (lambda: model(seq)) if mode == "poslens bare" else (
            lambda: answer_attention(model, s.token_ids, s.answer_ids, s.parts))
    else:
        from transformer_lens.model_bridge import TransformerBridge

        model = TransformerBridge.boot_transformers(directory, device="cpu", dtype=torch.float32)
        names = [f"blocks.{l}.attn.hook_pattern" for l in range(CONFIG["num_hidden_layers"])]
        run = (lambda: model(seq)) if mode == "bridge bare" else (lambda: model.run_with_cache(seq, names_filter=names))
    with torch.no_grad():
        model(seq[:, :64])
        reset_peak_rss()
        base = rss_mb()
        t0 = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - t0
        peak = rss_mb("VmHWM")
    del result
    return {"mode": mode, "seconds": seconds, "peak_mb": peak - base, "length": seq.shape[1]}


def main(repeats: int = 2) -> str:
    from bench.report import machine, write_section

    with tempfile.TemporaryDirectory() as tmp:
        write_checkpoint(Path(tmp))
        runs: dict[str, list[dict]] = {m: [] for m in MODES}
        for _ in range(repeats):
            for mode in MODES:
                runs[mode].append(cell("bench.generic", mode, tmp, env={"MALLOC_MMAP_THRESHOLD_": "65536"}))
    med = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("seconds", "peak_mb")} for m in MODES}
    n = runs[MODES[0]][0]["length"]
    full = CONFIG["num_hidden_layers"] * CONFIG["num_attention_heads"] * n * n * 4 / 2**20
    lines = ["| workload | time | time ratio | peak memory above the loaded model | memory ratio |",
             "| --- | --- | --- | --- | --- |"]
    for mode, against in (("poslens bare", "poslens bare"), ("poslens mass", "poslens bare"),
                          ("bridge bare", "poslens bare"), ("bridge cache", "poslens mass")):
        a, b = med[mode], med[against]
        lines.append(f"| {mode} | {a['seconds']:.2f} s | {a['seconds'] / b['seconds']:.2f}x {against} | "
                     f"{a['peak_mb']:.0f} MB | {a['peak_mb'] / b['peak_mb']:.2f}x {against} |")
    body = ("Generic `hf` family on a random Qwen2 directory (4 layers x 4 heads, 2 KV heads, d_model 256), one NIAH "
            f"prompt of {n} tokens with a teacher-forced 8-token answer; each number the median of {repeats} fresh "
            f"processes; {machine()}.\n\n"
            + "\n".join(lines) + f"\n\nattention-mass on the generic family peaks at "
            f"{med['poslens mass']['peak_mb'] / med['poslens bare']['peak_mb']:.2f}x the bare forward's memory; the "
            f"bridge's pattern cache holds {full:.0f} MB of patterns (every layer's [head, N, N]) and peaks at "
            f"{med['bridge cache']['peak_mb'] / med['poslens mass']['peak_mb']:.1f}x what attention-mass needs, taking "
            f"{med['bridge cache']['seconds'] / med['poslens mass']['seconds']:.1f}x its time. Times come from a "
            "shared 2-core machine (other jobs running): read the time ratios to within about 40%; the memory ratios "
            "do not depend on load.\n")
    write_section("generic", "Generic family at 4096 tokens vs the TransformerLens bridge", body)
    return body


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=2, metavar=("MODE", "DIR"))
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    if a.child:
        torch.set_num_threads(1)
        emit(child(a.child[0], a.child[1], LENGTH))
    else:
        print(main(a.repeats))
