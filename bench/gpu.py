"""GPU scale: a checkpoint shaped like the released RePo-OLMo2-1B (random bf16 weights, the released sharded
file layout) is loaded onto one GPU against a raw safetensors read of the same shards, then attention-mass
extraction runs at contexts up to 16k tokens against the bare forward pass: time, and peak GPU memory
above the weights. Runs where CUDA is present; elsewhere its section of BENCHMARKS.md is left as it was.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

LENGTHS = (2048, 4096, 8192, 16384)
OLMO2_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
                vocab_size=100352, max_position_embeddings=max(LENGTHS) + 64, position_mode="repo", start_layer=5)
DEVICE = "cuda"
REPEATS = 5


def write_checkpoint(directory: Path, config: dict) -> Path:
    from interp.families.repo.checkpoints import save_pretrained
    from interp.families.repo.model import RepoConfig, RepoTransformer

    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = RepoTransformer(RepoConfig(**config))
    model = model.to(torch.bfloat16).cpu()
    save_pretrained(model, directory, shard_size=2 * 2**30)
    return directory


def _timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def _peak_above(base: int, fn):
    torch.cuda.reset_peak_memory_stats()
    out, seconds = _timed(fn)
    return out, seconds, (torch.cuda.max_memory_allocated() - base) / 2**30


def run(config: dict = OLMO2_1B, lengths=LENGTHS) -> dict:
    from safetensors.torch import load_file

    from analyses.attention_mass import answer_attention
    from corpora.niah import niah_samples
    from interp.loading import load
    from interp.tokenizers import ByteTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        path = write_checkpoint(Path(tmp) / "repo-olmo2-1b-shaped", config)
        shards = sorted(path.glob("*.safetensors"))
        raw, raw_s = _timed(lambda: [load_file(str(s), device=DEVICE) for s in shards])
        del raw
        torch.cuda.empty_cache()
        model, load_s = _timed(lambda: load(path, device=DEVICE, dtype=torch.bfloat16).eval())
    n_params = sum(p.numel() for p in model.parameters())
    weights = torch.cuda.memory_allocated()
    tok = ByteTokenizer()
    rows = []
    for length in lengths:
        s = niah_samples(tok, 1, length - 8, seed=0, preamble=False)[0]
        seq = torch.tensor([s.token_ids + s.answer_ids], device=DEVICE)
        with torch.no_grad():
            model(seq)  # warm-up at full length: kernel choice and allocator growth are not timed
            bare = [_peak_above(weights, lambda: model(seq).sum()) for _ in range(REPEATS)]  # logits dropped at once
            extract = [_peak_above(weights, lambda: answer_attention(model, s.token_ids, s.answer_ids, s.parts))
                       for _ in range(REPEATS)]
        mass = extract[0][0]
        bare_s, extract_s = (float(np.median([r[1] for r in runs])) for runs in (bare, extract))
        bare_gb, extract_gb = (max(r[2] for r in runs) for runs in (bare, extract))
        if not torch.isfinite(mass).all() or not torch.allclose(mass.sum(-1), torch.ones(()), atol=1e-2):
            raise RuntimeError(f"attention masses at {length} tokens do not sum to 1 per head")
        rows.append(dict(length=int(seq.shape[1]), bare_s=bare_s, extract_s=extract_s, bare_gb=bare_gb,
                         extract_gb=extract_gb,
                         full_cache_gb=config["num_hidden_layers"] * config["num_attention_heads"]
                         * seq.shape[1] ** 2 * 2 / 2**30))
    return dict(device=torch.cuda.get_device_name(), torch=torch.__version__, n_params=n_params, raw_read_s=raw_s,
                load_s=load_s, weights_gb=weights / 2**30, rows=rows)


def report(r: dict) -> str:
    lines = ["| context | bare forward | attention-mass extraction | time ratio | peak GPU memory above weights, "
             "bare | extraction | ratio | bf16 full-pattern cache would need |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in r["rows"]:
        lines.append(f"| {x['length']} | {x['bare_s'] * 1e3:.0f} ms | {x['extract_s'] * 1e3:.0f} ms | "
                     f"**{x['extract_s'] / x['bare_s']:.2f}x** | {x['bare_gb']:.2f} GiB | {x['extract_gb']:.2f} GiB | "
                     f"**{x['extract_gb'] / x['bare_gb']:.2f}x** | {x['full_cache_gb']:.0f} GiB |")
    first, last = r["rows"][0], r["rows"][-1]
    return (f"RePo-OLMo2-1B-shaped checkpoint ({r['n_params'] / 1e9:.2f}B parameters, RePo from layer 5, random bf16 "
            f"weights written in the released sharded layout), {r['device']}, torch {r['torch']}.\n\n"
            "Loading with `interp.load(path, device='cuda', dtype=torch.bfloat16)` (strict key and shape checks, "
            f"config parsing, hooked model): {r['load_s']:.1f} s against {r['raw_read_s']:.1f} s for a raw "
            f"`safetensors` read of the same shards to the GPU (**{r['load_s'] / r['raw_read_s']:.1f}x**); weights "
            f"{r['weights_gb']:.2f} GiB.\n\n"
            "One NIAH prompt with a 7-digit answer, teacher-forced, masses on needle / query / rest for every layer "
            f"and head; median of {REPEATS} runs after a full-length warm-up, peak memory the largest of them:\n\n"
            + "\n".join(lines) + f"\n\nContext x{last['length'] / first['length']:.0f} -> extraction memory x"
            f"{last['extract_gb'] / first['extract_gb']:.1f} (quadratic would be "
            f"x{(last['length'] / first['length']) ** 2:.0f}).\n")


def main() -> str:
    from bench.report import write_section

    if not torch.cuda.is_available():
        return "gpu: skipped (no CUDA here; the section in BENCHMARKS.md is kept from the last GPU run)"
    r = run()
    body = report(r)
    write_section("gpu", "GPU scale: a 1B RePo checkpoint, long-context extraction", body)
    return body + "\n" + json.dumps(r)


if __name__ == "__main__":
    print(main())
