"""poslens against the tools a researcher would otherwise use, on the same model and the same inputs.

Peers: TransformerLens 4.3 (``TransformerBridge.boot_transformers(dir)``; ``run_with_cache`` with a names
filter, ``run_with_hooks`` with hooks that reduce at once) and Hugging Face transformers (eager attention where
patterns are read, sdpa otherwise; ``output_attentions`` / ``output_hidden_states``; forward hooks that reduce).
Workloads: (a) every layer's attention pattern of one sequence; (b) attention mass of the 8 answer rows of a
NIAH prompt on needle / query / rest, every layer and head; (c) every layer's residual stream of many
documents reduced to probe statistics (per layer sum x and X^T X in float64; poslens through
``interp.extract.moments``). Models: SmolLM2-135M (poslens' ``smollm2``, de-quantised to fp32 and saved as a Hugging
Face directory every tool loads) and a random LLaMA with the shape of a 1B model (Llama-3.2-1B: d_model 2048, 16 layers,
32 heads / 8 KV heads, SwiGLU 8192; SmolLM2's tokenizer).

Protocol on the CPU: each measurement is a fresh process (import, load, a 64-token warm-up, then one timed call
with the peak-RSS mark reset just before it: ``/proc/self/clear_refs``), one torch thread, repeated in
alternating tool order; medians. Protocol on a GPU (the ``gpu-`` plans, bf16 weights for every tool): one process
per tool and model runs every cell of the plan, each cell after a warm-up at its full size, timed between CUDA
synchronisations, median of the repeats; memory is the allocator's peak above what was allocated before the
call (the weights); the tools' processes run one after another, in alternating order per model. Every tool's
numbers are checked against each other (``agree`` column). On the CPU a peer whose memory need exceeds the limit
is recorded as out of memory without being run; on a GPU a cell that runs out of memory is recorded so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench import harness
from bench.harness import emit, run
from bench.report import reset_peak_rss, rss_mb

TOOLS = ("poslens", "transformerlens", "transformers")
CACHE = Path(os.environ.get("POSLENS_BENCH_DIR", Path.home() / ".cache" / "poslens-bench"))
LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                tie_word_embeddings=True)
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5,
                    tie_word_embeddings=True)
SHAPES = {"llama-1b": LLAMA_1B, "smollm2-shaped": SMOLLM2_135M}  # random weights: cost does not depend on their values
MEMORY_LIMIT_GB = 12.0  # of the 24 GB machine, shared with other work
N_ANSWER = 8
DEVICE, DTYPE = "cpu", torch.float32  # a GPU child sets cuda and bf16


# ---------------------------------------------------------------- models on disk


def model_dir(name: str) -> Path:
    path = CACHE / name
    if (path / "config.json").exists():
        return path
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from interp.catalog import SMOLLM2
    from interp.package_files import package_file

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.environ.get("POSLENS_BENCH_TOKENIZER"):  # SmolLM2's tokenizer files, where its package is not installed
        tok = AutoTokenizer.from_pretrained(os.environ["POSLENS_BENCH_TOKENIZER"])
    else:
        gguf = package_file(*SMOLLM2)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if name == "smollm2":
        gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        cfg = gguf_model.config
        for key in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(cfg, key):
                delattr(cfg, key)
        hf = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)  # a plain fp32 copy: GGUF models do not save
        hf.load_state_dict(gguf_model.state_dict())
    elif name in SHAPES:
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                          **SHAPES[name])
        hf = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    else:
        raise ValueError(f"unknown bench model {name!r}")
    tmp = path.with_suffix(".partial")
    hf.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(path)
    return path


# ---------------------------------------------------------------- inputs (the same for every tool)


def inputs(model: str, workload: str, length: int, n_docs: int) -> dict:
    """Token ids (and for (b) rows and key parts), drawn from a fixed seed."""
    from transformers import AutoTokenizer

    from corpora.niah import niah_samples
    from interp.tokenizers import HFTokenizer

    if workload == "mass":
        tok = HFTokenizer(AutoTokenizer.from_pretrained(model_dir(model)), "smollm2")  # every bench model has SmolLM2's
        s = niah_samples(tok, 1, length - N_ANSWER - 16, seed=0, preamble=False)[0]
        answer = (s.answer_ids + [s.answer_ids[-1]] * N_ANSWER)[:N_ANSWER]
        seq = s.token_ids + answer
        return {"tokens": [seq], "rows": list(range(len(s.token_ids) - 1, len(seq) - 1)),
                "prompt": s.token_ids, "answer": answer, "parts": [int(p) for p in s.parts]}
    g = torch.Generator().manual_seed(0)
    if workload == "patterns":
        return {"tokens": torch.randint(100, 40000, (1, length), generator=g).tolist()}
    return {"tokens": torch.randint(100, 40000, (n_docs, length), generator=g).tolist()}


def key_columns(parts: list[int], n_answer: int) -> torch.Tensor:
    """Key label per token: rest / needle / query 0..2, everything else (document start, answer) -1."""
    return torch.tensor(list(parts) + [-1] * n_answer)


# ---------------------------------------------------------------- one measurement (child process)


def _load(tool: str, path: Path, workload: str):
    from transformers import AutoModel, AutoModelForCausalLM

    if tool == "poslens":
        from interp.families.llama.model import LlamaTransformer

        hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model = LlamaTransformer.from_hf(hf).to(device=DEVICE, dtype=DTYPE)
        model.max_seq_len = max(model.max_seq_len, 8192)
        del hf
        return model
    if tool == "transformerlens":
        from transformer_lens.model_bridge import TransformerBridge

        return TransformerBridge.boot_transformers(str(path), device=DEVICE, dtype=DTYPE)
    attn = "sdpa" if workload == "hidden" else "eager"
    cls = AutoModel if workload == "hidden" else AutoModelForCausalLM  # the base model stops before the unembedding
    return cls.from_pretrained(path, dtype=DTYPE, attn_implementation=attn).to(DEVICE).eval()


def _patterns(tool, model, data):
    tokens = torch.tensor(data["tokens"], device=DEVICE)
    if tool == "poslens":
        from interp.extract import run_and_collect

        names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.n_layers)]
        acts = run_and_collect(model, tokens, names, to=None)  # where the model ran, as the peers leave them
        pats = [acts[n] for n in names]
    elif tool == "transformerlens":
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("attn.hook_pattern"))
        pats = [cache[f"blocks.{l}.attn.hook_pattern"] for l in range(len(model.blocks))]
    else:
        pats = list(model(tokens, output_attentions=True).attentions)
    return [float(p[0, :, -1, :16].sum()) for p in pats], pats  # a fingerprint per layer; the patterns stay alive


def _mass(tool, model, data):
    tokens = torch.tensor(data["tokens"], device=DEVICE)
    rows = torch.tensor(data["rows"], device=DEVICE)
    labels = key_columns(data["parts"], len(data["answer"])).to(DEVICE)
    if tool == "poslens":
        from analyses.attention_mass import answer_attention

        out = answer_attention(model, data["prompt"], data["answer"], data["parts"])[..., :3]
        return out.flatten().tolist(), None
    indicators = torch.nn.functional.one_hot(labels.clamp(min=0), 3).float() * (labels >= 0)[:, None]
    out = {}

    def reduce(layer, pattern):
        out[layer] = (pattern[0][:, rows].float() @ indicators).mean(1)

    if tool == "transformerlens":
        hooks = [(f"blocks.{l}.attn.hook_pattern", (lambda l: lambda p, hook: reduce(l, p))(l))
                 for l in range(len(model.blocks))]
        model.run_with_hooks(tokens, fwd_hooks=hooks)
    else:
        layers = model.model.layers
        handles = [layer.self_attn.register_forward_hook((lambda l: lambda m, a, o: reduce(l, o[1]))(l))
                   for l, layer in enumerate(layers)]
        model(tokens)
        for h in handles:
            h.remove()
    return torch.stack([out[l] for l in sorted(out)]).flatten().tolist(), None


def _hidden(tool, model, data, batch_size=8):
    docs = torch.tensor(data["tokens"], device=DEVICE)
    sums, grams = {}, {}

    def add(layer, x):
        x = x.reshape(-1, x.shape[-1]).double()
        sums[layer] = sums.get(layer, 0) + x.sum(0)
        grams[layer] = grams.get(layer, 0) + x.T @ x

    if tool == "poslens":
        from interp.extract import moments

        names = [f"blocks.{l}.hook_resid_post" for l in range(model.n_layers)]
        stats = moments(model, docs.tolist(), names, batch_size=batch_size)
        for l, n in enumerate(names):
            sums[l], grams[l] = stats[n].sum, stats[n].gram
    else:
        for start in range(0, len(docs), batch_size):
            batch = docs[start : start + batch_size]
            if tool == "transformerlens":
                _, cache = model.run_with_cache(batch, names_filter=lambda n: n.endswith("hook_resid_post")
                                                and n.count(".") == 2)
                for l in range(len(model.blocks)):
                    add(l, cache[f"blocks.{l}.hook_resid_post"])
            else:
                hs = model(batch, output_hidden_states=True).hidden_states
                # hidden_states[0] is the embedding, [-1] the last layer after the final norm
                for l in range(len(hs) - 1):
                    add(l, hs[l + 1])
    last = max(sums)  # compared up to the layer below: the last one differs by convention (HF applies the final norm)
    return [float(grams[l].trace()) for l in sorted(sums) if l < last], None


WORKLOADS = {"patterns": _patterns, "mass": _mass, "hidden": _hidden}


def child(tool: str, model_name: str, workload: str, length: int, n_docs: int) -> dict:
    torch.set_num_threads(1)
    os.environ["HF_HUB_OFFLINE"] = "1"
    data = inputs(model_name, workload, length, n_docs)
    model = _load(tool, model_dir(model_name), workload)
    fn = WORKLOADS[workload]
    with torch.no_grad():
        if workload == "mass":  # the same workload on 64 tokens: 56 of prompt, 8 answer rows
            warm = dict(data, tokens=[data["tokens"][0][:64]], rows=list(range(55, 63)), prompt=data["prompt"][:56],
                        answer=data["tokens"][0][56:64], parts=data["parts"][:56])
        else:
            warm = dict(data, tokens=[row[:64] for row in data["tokens"][:8]])
        fn(tool, model, warm)
        base = rss_mb()
        reset_peak_rss()
        t0 = time.perf_counter()
        check, held = fn(tool, model, data)
        seconds = time.perf_counter() - t0
        peak = rss_mb("VmHWM")
    return {"seconds": seconds, "memory_mb": max(peak - base, 0.0), "check": check}


def gpu_child(tool: str, model_name: str, cells: list, repeats: int, device: str = "cuda",
              dtype=torch.bfloat16) -> list[dict]:
    """Every cell of one model for one tool on the GPU: a warm-up at full size, then ``repeats`` timed calls."""
    global DEVICE, DTYPE
    DEVICE, DTYPE = device, dtype
    os.environ["HF_HUB_OFFLINE"] = "1"
    loaded: dict[str, object] = {}
    out = []
    for workload, length, n_docs in cells:
        kind = ("sdpa" if workload == "hidden" else "eager") if tool == "transformers" else "any"
        if kind not in loaded:
            loaded.clear()
            torch.cuda.empty_cache()
            loaded[kind] = _load(tool, model_dir(model_name), workload)
        model, fn = loaded[kind], WORKLOADS[workload]
        data = inputs(model_name, workload, length, n_docs)
        try:
            with torch.no_grad():
                fn(tool, model, data)
                times, peaks = [], []
                for _ in range(repeats):
                    torch.cuda.synchronize()
                    base = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                    t0 = time.perf_counter()
                    check, held = fn(tool, model, data)
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
                    peaks.append((torch.cuda.max_memory_allocated() - base) / 2**20)
                    del held
            out.append({"seconds": statistics.median(times), "memory_mb": max(peaks), "check": check})
        except torch.cuda.OutOfMemoryError:
            out.append({"skipped": "OOM (CUDA)"})
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- the comparison (parent)


def needs_gb(tool: str, model_name: str, workload: str, length: int) -> float:
    """What a tool must hold at once beyond the weights: every layer's patterns for (a), one layer's for (b)."""
    shape = SHAPES.get(model_name, SMOLLM2_135M)
    one = shape["num_attention_heads"] * length**2 * 4 / 2**30
    if workload == "patterns":
        return shape["num_hidden_layers"] * one
    if workload == "mass" and tool != "poslens":
        return 3 * one  # scores, pattern and its copy inside an eager layer
    return 0.0


def measure(model_name: str, workload: str, length: int, n_docs: int, repeats: int, timeout: int) -> dict:
    runs: dict[str, list[dict]] = {t: [] for t in TOOLS}
    skipped = {t: f"OOM: needs {needs_gb(t, model_name, workload, length):.0f} GB" for t in TOOLS
               if needs_gb(t, model_name, workload, length) > MEMORY_LIMIT_GB}
    for r in range(repeats):
        for tool in TOOLS if r % 2 == 0 else TOOLS[::-1]:
            if tool in skipped:
                continue
            row = harness.cell("bench.peers", tool, model_name, workload, length, n_docs, timeout=timeout, check=False,
                       threads=None)
            if "failed" in row:
                skipped[tool] = row["failed"] if row["failed"].startswith(("over", "OOM", "killed")) \
                    else f"failed: {row['failed']}"
                continue
            runs[tool].append(row)
    result = {"model": model_name, "workload": workload, "length": length, "n_docs": n_docs, "skipped": skipped}
    for tool, rs in runs.items():
        if rs:
            result[tool] = {"seconds": statistics.median(r["seconds"] for r in rs),
                            "memory_mb": statistics.median(r["memory_mb"] for r in rs),
                            "check": rs[0]["check"], "n": len(rs)}
    return _agree(result)


def _agree(result: dict) -> dict:
    """Add the largest relative difference between the tools' check values (``agree``) where two or more ran."""
    checks = [torch.tensor(result[t]["check"], dtype=torch.float64) for t in TOOLS if t in result]
    if len(checks) > 1:
        scale = checks[0].abs().max().clamp(min=1e-12)
        result["agree"] = max(float((c - checks[0]).abs().max() / scale) for c in checks[1:])
    return result


def measure_gpu(model_name: str, cells: list, repeats: int, timeout: int, order) -> list[dict]:
    per_tool = {}
    for tool in order:
        done = run([sys.executable, "-m", "bench.peers", "--gpu-child", tool, model_name, json.dumps(cells),
                    str(repeats)], timeout=timeout, threads=None)
        per_tool[tool] = json.loads(done.stdout.strip().splitlines()[-1]) if not done.failed else \
            [{"skipped": done.failed if done.failed.startswith("over") else f"failed: {done.failed}"}] * len(cells)
        print(tool, model_name, json.dumps(per_tool[tool])[:300], file=sys.stderr, flush=True)
    results = []
    for i, (workload, length, n_docs) in enumerate(cells):
        result = {"model": model_name, "workload": workload, "length": length, "n_docs": n_docs, "skipped": {}}
        for tool in TOOLS:
            r = per_tool[tool][i]
            if "skipped" in r:
                result["skipped"][tool] = r["skipped"]
            else:
                result[tool] = dict(r, n=repeats)
        results.append(_agree(result))
    return results


GPU_CELLS = [("mass", 512, 1), ("mass", 2048, 1), ("mass", 4096, 1), ("patterns", 512, 1), ("patterns", 2048, 1),
             ("patterns", 4096, 1), ("hidden", 512, 100), ("hidden", 4096, 100)]
PLANS = {
    # (model, workload, length, documents); sized for the shared 2-core CPU machine
    "smollm2": [("smollm2", "mass", 512, 1), ("smollm2", "patterns", 512, 1), ("smollm2", "hidden", 32, 100),
                ("smollm2", "mass", 2048, 1), ("smollm2", "patterns", 1024, 1), ("smollm2", "mass", 4096, 1),
                ("smollm2", "patterns", 2048, 1)],
    "llama-1b": [("llama-1b", "mass", 512, 1), ("llama-1b", "patterns", 512, 1), ("llama-1b", "hidden", 32, 100),
                 ("llama-1b", "mass", 2048, 1)],
    "smoke": [("smollm2", "patterns", 128, 1), ("smollm2", "mass", 160, 1), ("smollm2", "hidden", 32, 4)],
    # on a GPU: SmolLM2-135M's shape with random weights (its package is not installed there) and the 1B shape
    "gpu-smollm2": [("smollm2-shaped", *cell) for cell in GPU_CELLS],
    "gpu-llama-1b": [("llama-1b", *cell) for cell in GPU_CELLS],
}
LABELS = {"patterns": "(a) all layers' attention patterns, one sequence",
          "mass": "(b) attention mass of 8 answer rows on 3 spans",
          "hidden": "(c) every layer's hidden states -> probe statistics"}


def _cell(result, tool):
    if tool in result.get("skipped", {}):
        return result["skipped"][tool]
    return f"{result[tool]['seconds']:.2f} s, {result[tool]['memory_mb']:.0f} MB"


def table(results: list[dict]) -> str:
    lines = ["| model | workload | tokens | poslens | TransformerLens | transformers | time vs fastest peer | "
             "memory vs least peer | agree |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        peers = [t for t in TOOLS[1:] if t in r]
        tokens = f"{r['n_docs']} x {r['length']}" if r["workload"] == "hidden" else str(r["length"])
        if "poslens" in r and peers:
            fastest = min(r[t]["seconds"] for t in peers)
            least = min(r[t]["memory_mb"] for t in peers)
            t_ratio = f"**{r['poslens']['seconds'] / fastest:.2f}x**"
            m_ratio = f"{r['poslens']['memory_mb'] / max(least, 1):.2f}x"
        else:
            t_ratio = m_ratio = "-"
        agree = f"{r['agree']:.1e}" if "agree" in r else "-"
        lines.append(f"| {r['model']} | {LABELS[r['workload']]} | {tokens} | {_cell(r, 'poslens')} | "
                     f"{_cell(r, 'transformerlens')} | {_cell(r, 'transformers')} | {t_ratio} | {m_ratio} | {agree} |")
    return "\n".join(lines)


def _report(plan: str, repeats: int, results: list[dict]) -> str:
    import datetime as dt
    import platform

    from bench.report import write_section

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}, plan `{plan}`"
    if plan.startswith("gpu"):
        import transformers

        where = (f"{when}, on one {torch.cuda.get_device_name()} (bf16 weights for every tool), torch "
                 f"{torch.__version__}, transformers {transformers.__version__}, {repeats} timed calls per cell after "
                 "a full-size warm-up, medians. ")
    else:
        from bench.report import FILE

        gpu = ("GPU rows: the `gpu-` sections" if "<!-- peers-gpu-" in FILE.read_text(encoding="utf-8") else
               "GPU rows: not measured yet, no GPU was lent to this work; `--plan gpu-smollm2` / `gpu-llama-1b` "
               "measure them on one")
        where = (f"{when}, on the CPU ({platform.machine()}), torch {torch.__version__}, one torch thread per process, "
                 f"{repeats} repeats per cell in alternating tool order, medians ({gpu}). ")
    body = (where + __doc__.split("\n\n", 1)[1].replace("\n", " ") + " Times and memory are medians per tool; ratios "
            "are poslens over the fastest (least) peer of the same row.\n\n" + table(results) + "\n")
    if plan != "smoke":
        device = "GPU" if plan.startswith("gpu") else "CPU"
        write_section(f"peers-{plan}", f"poslens against TransformerLens and transformers: {plan} ({device})", body)
    return body


def main(plan: str = "smollm2", repeats: int = 2, timeout: int = 600) -> str:
    for name in {cell[0] for cell in PLANS[plan]}:
        model_dir(name)
    if plan.startswith("gpu"):
        (name,) = {cell[0] for cell in PLANS[plan]}
        order = TOOLS if plan.endswith("smollm2") else TOOLS[::-1]
        results = measure_gpu(name, [cell[1:] for cell in PLANS[plan]], repeats, timeout, order)
        body = _report(plan, repeats, results)
        (CACHE / f"peers-{plan}.json").write_text(json.dumps(results, indent=1))
        return body
    results = []
    for model_name, workload, length, n_docs in PLANS[plan]:
        results.append(measure(model_name, workload, length, n_docs, repeats, timeout))
        print(json.dumps(results[-1], default=str)[:400], file=sys.stderr, flush=True)
        body = _report(plan, repeats, results)  # after every cell: a cut-short run still leaves what it measured
    (CACHE / f"peers-{plan}.json").write_text(json.dumps(results, indent=1))
    return body


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=5)
    p.add_argument("--gpu-child", nargs=4)
    p.add_argument("--prepare", action="store_true")
    p.add_argument("--plan", default="smollm2", choices=sorted(PLANS))
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    if a.gpu_child:
        tool, model_name, cells, repeats = a.gpu_child
        emit(gpu_child(tool, model_name, json.loads(cells), int(repeats)))
    elif a.child:
        tool, model_name, workload, length, n_docs = a.child
        emit(child(tool, model_name, workload, int(length), int(n_docs)))
    elif a.prepare:
        for name in ("smollm2", "llama-1b"):
            print(model_dir(name))
    else:
        print(main(a.plan, a.repeats))
