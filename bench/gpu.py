"""The GPU check of issue 38: every-row statistics against the forward on one lent H100 / H200, in at most 6 minutes.

Random-weight bf16 models with the shapes of SmolLM2-135M, Gemma 3 270M, Llama-3.2-1B and Llama-3.1-8B are built on
the device (no weights travel: transformers modules from their configs; Gemma 3 through a temporary directory, as the
hf family loads). Per model and length (8k, 32k; 128k for the 8B shape), one 1 x N batch of random ids:

- ``hf_sdpa``: transformers' base model (no unembedding), sdpa attention;
- ``forward``: poslens' forward up to the output head (``final_hidden``);
- ``masses``: ``model_statistics(model, ids, MASSES, first=(1,), windows=(8,))`` (head-profiles' statistics);
- ``statistics``: every statistic (``STATISTICS``; key parts: three spans);
- ``eager``: transformers' eager ``output_attentions`` where its patterns fit in 80% of the free memory; else the
  memory it would need (layers x heads x N^2 x 2 bytes), not run.

Then exactness per family at 2,048 tokens: every statistic against float64 patterns of the very queries, keys and
masks each attention was handed (``bench.exactness.with_own_patterns``). Timing: a warm-up call, then the median of
two calls between ``torch.cuda.synchronize()`` (one timed call where the warm-up took over 5 s); memory: the
allocator's peak above what was allocated before the call (the weights). Targets: masses at most 1.15x the
transformers sdpa forward at 32k, every statistic at most 2x; peak memory at most the forward's + 1 GiB.

The run honours ``--budget`` seconds (default 330: stops itself before 6 minutes; a cell cut short is recorded as
such), writes ``gpu.json`` and ``gpu.md`` to ``--out`` after every cell and, with ``--write``, the GPU section of
BENCHMARKS.md at the end. ``--device cpu --tiny`` runs the same code on tiny shapes on the CPU (the test suite does).
After it, ``python -m pytest -m cuda tests/integration/interp/test_attention_cuda.py`` runs the CUDA tests there.

``python -m bench.gpu [--device cuda] [--tiny] [--budget 330] [--out DIR] [--models ...] [--write]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics as stats
import tempfile
import time
from pathlib import Path

import torch

MASSES = ("first_mass", "previous_mass", "self_mass", "window_mass")
SHAPES = {  # name: (family, transformers config, lengths)
    "smollm2-135m": ("llama", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                                   num_key_value_heads=3, vocab_size=49152, rope_theta=100000.0,
                                   tie_word_embeddings=True), (8192, 32768)),
    "gemma3-270m": ("gemma3", dict(hidden_size=640, intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
                                   num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256, vocab_size=262144,
                                   sliding_window=512), (8192, 32768)),
    "llama-3.2-1b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                   num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                                   rope_theta=500000.0, tie_word_embeddings=True), (8192, 32768)),
    "llama-3.1-8b": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                   rope_theta=500000.0), (8192, 32768, 131072)),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=512)
TINY_LENGTHS, EXACT_TOKENS, TINY_EXACT_TOKENS = (256, 512), 2048, 128
FAMILY_OF_EXACTNESS = {"llama": "smollm2-135m", "gemma3": "gemma3-270m"}  # one shape per family for exactness


class OutOfTime(BaseException):
    pass


def _on_alarm(signum, frame):
    raise OutOfTime


def config_of(name: str, tiny: bool, longest: int):
    import transformers as T

    family, shape, _ = SHAPES[name]
    shape = {**shape, **({**TINY, "query_pre_attn_scalar": 16, "sliding_window": 32} if tiny and family == "gemma3"
                         else TINY if tiny else {})}
    if family == "gemma3":
        shape.pop("head_dim", None) if not tiny else None
        n = shape["num_hidden_layers"]
        types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
        return T.Gemma3TextConfig(**{"head_dim": 256, **shape}, layer_types=types, max_position_embeddings=longest + 64,
                                  pad_token_id=0, bos_token_id=2, eos_token_id=1, attn_implementation="sdpa")
    shape = {k: v for k, v in shape.items() if k not in ("query_pre_attn_scalar", "sliding_window")}
    return T.LlamaConfig(**shape, max_position_embeddings=longest + 64, attn_implementation="sdpa")


def build(name: str, device: str, tiny: bool, longest: int, folder: Path):
    """``(transformers model, poslens model)`` with the same random bf16 weights on ``device``."""
    import transformers as T

    import interp

    family = SHAPES[name][0]
    config = config_of(name, tiny, longest)
    torch.manual_seed(0)
    with torch.device(device):
        cls = T.Gemma3ForCausalLM if family == "gemma3" else T.LlamaForCausalLM
        hf = cls._from_config(config, dtype=torch.bfloat16).eval()
    if family == "gemma3":
        hf.save_pretrained(folder / name)
        try:
            model = interp.load(folder / name, device=device, dtype=torch.bfloat16)
        except Exception:  # bf16 loading of the hf family (issue 38, item 1): float32 first, then bf16
            model = interp.load(folder / name, device=device).to(torch.bfloat16)
    else:
        model = interp.load(hf).to(device=device, dtype=torch.bfloat16)
    return hf, model.eval()


class Clock:
    """Time and peak memory of one call on ``device``."""

    def __init__(self, device: str):
        self.device = torch.device(device)

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def once(self, fn) -> tuple[float, float]:
        """(seconds, peak GiB above what was allocated before)."""
        self.sync()
        if self.device.type == "cuda":
            base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = time.perf_counter()
        out = fn()
        self.sync()
        seconds = time.perf_counter() - t0
        del out
        peak = (torch.cuda.max_memory_allocated(self.device) - base) / 2**30 if self.device.type == "cuda" else 0.0
        return seconds, peak

    def measure(self, fn) -> dict:
        first, peak = self.once(fn)
        if first > 5.0:
            return {"s": first, "gib": peak, "n": 1, "note": "the warm-up call (over 5 s)"}
        runs = [self.once(fn) for _ in range(2)]
        return {"s": stats.median(r[0] for r in runs), "gib": max(r[1] for r in runs), "n": 2}


def eager_need_gib(config, n: int) -> float:
    heads = config.num_attention_heads
    return config.num_hidden_layers * heads * n * n * 2 / 2**30


def free_gib(device: str) -> float:
    if torch.device(device).type == "cuda":
        return torch.cuda.mem_get_info(torch.device(device))[0] / 2**30
    return float("inf")


@torch.no_grad()
def cells_of(name: str, hf, model, n: int, device: str, clock: Clock):
    """``(cell name, thunk)`` per cell of one model and length; the thunk returns the cell's row."""
    from interp.attention import STATISTICS, model_statistics

    ids = torch.randint(10, hf.config.vocab_size - 10, (1, n), generator=torch.Generator().manual_seed(n)).to(device)
    parts = (torch.arange(n) * 3 // n).to(device)
    base = getattr(hf, "model", hf)
    forward = model.final_hidden if hasattr(model, "final_hidden") else model

    def eager():
        need = eager_need_gib(hf.config, n)
        if need > 0.8 * free_gib(device):
            return {"not_run": f"needs about {need:.0f} GiB for the patterns"}
        hf.set_attn_implementation("eager")
        try:
            return clock.measure(lambda: base(input_ids=ids, output_attentions=True).attentions)
        finally:
            hf.set_attn_implementation("sdpa")

    return [
        ("hf_sdpa", lambda: clock.measure(lambda: base(input_ids=ids).last_hidden_state)),
        ("forward", lambda: clock.measure(lambda: forward(ids))),
        ("masses", lambda: clock.measure(lambda: model_statistics(model, ids, MASSES, first=(1,), windows=(8,)))),
        ("statistics", lambda: clock.measure(lambda: model_statistics(
            model, ids, tuple(STATISTICS), first=(1,), windows=(8,), key_parts=parts.cpu(), n_parts=3))),
        ("eager", eager),
    ]


@torch.no_grad()
def exactness(model, n: int, device: str) -> dict:
    """The largest difference of every statistic against float64 of the inputs each attention was handed."""
    from bench.exactness import differences, with_own_patterns
    from interp.attention import STATISTICS

    ids = torch.randint(10, 500, (1, n), generator=torch.Generator().manual_seed(1)).to(device)
    wanted = tuple(s for s in STATISTICS if s != "span_mass")
    out = {}
    for path, asked in (("masses", MASSES), ("every", wanted)):
        got, own = with_own_patterns(model, ids, asked, first=(1, 4), windows=(0, 8, 512))
        out[path] = differences(got, own)
    return out


def estimate(rows: list[dict], name: str, cell: str, n: int) -> float | None:
    """Seconds the cell is expected to take (its warm-up and timed calls) from the same cell of the model at the
    longest shorter length, scaled by the square of the lengths (attention's cost); None without one."""
    done = [(r["tokens"], r[cell]) for r in rows if r["model"] == name and r["tokens"] < n and "s" in r.get(cell, {})]
    if not done:
        return None
    tokens, c = max(done, key=lambda x: x[0])
    once = c["s"] * (n / tokens) ** 2
    return once if once > 5.0 else 3 * once


def report(results: dict) -> str:
    """The GPU section's markdown from the results so far."""
    lines = [f"{results['device']}, torch {results['torch']}, transformers {results['transformers']}; "
             f"`python -m bench.gpu{' --tiny' if results['tiny'] else ''}` ({results['elapsed_s']:.0f} s of a "
             f"{results['budget_s']:.0f} s budget{'; STOPPED at the budget' if results.get('stopped') else ''}). "
             "Random bf16 weights with the shapes named; times: median of 2 calls after a warm-up (n=1: the warm-up "
             "itself, where it took over 5 s); memory: allocator peak above the weights. Ratios against transformers' "
             "sdpa forward (no unembedding). Targets: masses <= 1.15x, every statistic <= 2x at 32k; peak memory <= "
             "forward + 1 GiB.", "",
             "| model shape | tokens | transformers sdpa | poslens forward | masses | every statistic | eager "
             "`output_attentions` |", "|---|---|---|---|---|---|---|"]
    for row in results["rows"]:
        base = row.get("hf_sdpa", {}).get("s")

        def cell(key):
            c = row.get(key)
            if c is None:
                return "-"
            if "not_run" in c:
                return f"not run: {c['not_run']}"
            ratio = f" ({c['s'] / base:.2f}x)" if base and key != "hf_sdpa" else ""
            return f"{c['s']:.3f} s{ratio}, {c['gib']:.2f} GiB" + (" (n=1)" if c.get("n") == 1 else "")

        lines.append(f"| {row['model']} | {row['tokens']:,} | " + " | ".join(
            cell(k) for k in ("hf_sdpa", "forward", "masses", "statistics", "eager")) + " |")
    if results["exactness"]:
        names = sorted({s for e in results["exactness"].values() for p in e.values() for s in p})
        lines += ["", f"Exactness at {results['exact_tokens']:,} tokens: largest difference against float64 of the "
                  "very inputs (distances relative to their largest value, the spread as a variance; top_key: clear "
                  "top keys that differ).", "", "| family (shape) | path | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for family, paths in results["exactness"].items():
            for path, diffs in paths.items():
                lines.append(f"| {family} | {path} | " + " | ".join(
                    "-" if s not in diffs else f"{int(diffs[s])} keys" if s == "top_key" else f"{diffs[s]:.1e}"
                    for s in names) + " |")
    return "\n".join(lines) + "\n"


def run(device: str = "cuda", tiny: bool = False, budget: float = 330.0, out: Path | None = None,
        models=tuple(SHAPES), write: bool = False) -> dict:
    import transformers

    start = time.perf_counter()
    out = Path(out or tempfile.mkdtemp(prefix="poslens-gpu-"))
    out.mkdir(parents=True, exist_ok=True)
    results = {"device": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda")
               else f"CPU ({torch.get_num_threads()} threads)", "torch": torch.__version__,
               "transformers": transformers.__version__, "tiny": tiny, "budget_s": budget, "rows": [],
               "exactness": {}, "exact_tokens": TINY_EXACT_TOKENS if tiny else EXACT_TOKENS, "elapsed_s": 0.0}

    def save():
        results["elapsed_s"] = time.perf_counter() - start
        (out / "gpu.json").write_text(json.dumps(results, indent=1))
        (out / "gpu.md").write_text(report(results))

    clock = Clock(device)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, budget)
        with tempfile.TemporaryDirectory() as tmp:
            for name in models:
                family, _, lengths = SHAPES[name]
                lengths = TINY_LENGTHS if tiny else lengths
                hf, model = build(name, device, tiny, max(lengths), Path(tmp))
                if FAMILY_OF_EXACTNESS.get(family) == name:
                    results["exactness"][f"{family} ({name})"] = exactness(model, results["exact_tokens"], device)
                    save()
                for n in lengths:
                    row = {"model": name, "tokens": n}
                    results["rows"].append(row)
                    for cell, thunk in cells_of(name, hf, model, n, device, clock):
                        left = budget - (time.perf_counter() - start)
                        guess = estimate(results["rows"], name, cell, n)
                        if guess is not None and guess > left - 5:
                            row[cell] = {"not_run": f"about {guess:.0f} s expected, {left:.0f} s of the budget left"}
                            save()
                            continue
                        try:
                            row[cell] = thunk()
                        except torch.OutOfMemoryError as error:
                            row[cell] = {"not_run": f"out of memory ({str(error).splitlines()[0][:80]})"}
                        save()
                        if device.startswith("cuda"):
                            torch.cuda.empty_cache()
                del hf, model
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
    except OutOfTime:
        results["stopped"] = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        save()
    if write:
        from bench.report import write_section

        write_section("gpu", "GPU: every-row statistics against the forward (issue 38)", report(results))
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes and lengths (the CPU check of this script)")
    parser.add_argument("--budget", type=float, default=330.0, help="seconds; the run stops itself after them")
    parser.add_argument("--out", type=Path, default=None, help="folder for gpu.json / gpu.md (written after each cell)")
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--write", action="store_true", help="write the GPU section of BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("bench.gpu: no CUDA device here (use --device cpu --tiny to check the script)")
    with contextlib.suppress(AttributeError):
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 value columns stay float32
    results = run(args.device, args.tiny, args.budget, args.out, args.models, args.write)
    print(report(results))


if __name__ == "__main__":
    main()
