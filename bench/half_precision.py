"""How far a bfloat16 model's attention statistics sit from the float32 model's: the same checkpoint loaded twice
(``interp.load(name)`` and ``interp.load(name, dtype=torch.bfloat16)``), one document of the built-in corpus, every
query row of every layer and head through ``interp.attention.model_statistics``; per statistic the largest and the
mean absolute difference over the rows x heads x layers, and for the most attended key the share of rows on which the
two agree. The difference is the model's own (queries, keys and every layer computed in bfloat16), not the
statistics' reduction: README's "Half precision" section quotes it.

``python -m bench.half_precision [--model smollm2] [--length 2048]``"""

from __future__ import annotations

import argparse
import time

import torch

from bench.exactness import WANTED  # every statistic the table declares that a first key and a window serve

FIRST, WINDOW = 1, 16


def statistics(model, ids: list[int]) -> dict[str, torch.Tensor]:
    """``{statistic: [layer, head, row]}`` in float64 (one column of the masses that have several)."""
    from interp.attention import model_statistics

    got = model_statistics(model, torch.tensor([ids], device=model.device), WANTED, first=(FIRST,), windows=(WINDOW,))
    return {k: (v[..., 0] if v.dim() == 5 else v)[:, 0].double().cpu() for k, v in got.items()}


def compare(full: dict, half: dict) -> list[dict]:
    rows = []
    for name in WANTED:
        a, b = full[name], half[name]
        if name == "top_key":
            rows.append(dict(statistic=name, n=a.numel(), agree=float((a == b).double().mean())))
            continue
        d = (a - b).abs()
        rows.append(dict(statistic=name, n=a.numel(), max_abs=float(d.max()), p99_abs=float(d.quantile(0.99)),
                         mean_abs=float(d.mean()),
                         mean_float32=float(a.abs().mean())))
    return rows


def table(rows: list[dict], model: str, length: int, layers: int, heads: int, seconds: float) -> str:
    out = [f"{model}, {length} tokens (one built-in document), every row of {layers} layers x {heads} heads "
           f"(n = {rows[0]['n']:,} rows x heads per statistic); {seconds:.0f} s on this machine",
           "", "| statistic | max abs difference | 99th percentile | mean abs difference | mean abs value (float32) |",
           "|---|---|---|---|---|"]
    for r in rows:
        if r["statistic"] == "top_key":
            out.append(f"| top_key (position) | agrees on {r['agree']:.1%} of rows x heads | | | |")
            continue
        label = {"first_mass": f"first_mass (k = {FIRST})", "window_mass": f"window_mass (w = {WINDOW})",
                 "far_mass": f"far_mass (w = {WINDOW})"}.get(r["statistic"], r["statistic"])
        out.append(f"| {label} | {r['max_abs']:.3g} | {r['p99_abs']:.3g} | {r['mean_abs']:.3g} | "
                   f"{r['mean_float32']:.3g} |")
    return "\n".join(out)


def main(model: str = "smollm2", length: int = 2048) -> str:
    import interp
    from corpora.contexts import wikipedia_windows

    start = time.time()
    full = interp.load(model)
    ids = wikipedia_windows(full.tokenizer, 1, length)[0].ids
    reference = statistics(full, ids)
    layers, heads = full.n_layers, full.n_heads
    del full
    half = interp.load(model, dtype=torch.bfloat16)
    rows = compare(reference, statistics(half, ids))
    return table(rows, model, len(ids), layers, heads, time.time() - start)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--length", type=int, default=2048)
    args = parser.parse_args()
    print(main(args.model, args.length))
