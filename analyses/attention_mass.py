"""Where do answer tokens look in a needle-in-a-haystack prompt? (seed 000, Table 4)

For each RULER-format prompt the model answers greedily (up to 8 tokens more than the gold answer, as RULER
generates freely and string-matches the value); then the prompt plus an answer is run once more
and the attention rows of the positions that produce the answer (the last prompt token and every answer
token but the last) are reduced, layer by layer, to the attention falling on each part of the context
(``interp.attention.model_span_masses``: a fused kernel with the part indicators as values, no pattern):
the needle, the query (question and answer prefix) and the rest (haystack and preamble); 'other' is the document-start token and earlier answer tokens. The answer is either the
model's own greedy output (``greedy``) or the gold value teacher-forced (``teacher``).

Two numbers per part: ``mean_per_token``, the mean attention weight a token of that part receives (the
seed's convention, its Table 4 in units of 0.01), and ``total_share``, the summed weight on the part.
Rows with ``layer='all', head='all'`` average over heads and layers, as the seed reports. Nothing larger
than one layer's answer rows ``[head, rows, keys]`` is ever held (that much only when a pattern hook is attached).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from interp.progress import progress
from corpora.answers import answer_budget, answered_prefix, stop_ids
from corpora.niah import OTHER, PARTS, niah_samples
from interp.attention import model_span_masses
from interp.base import Capability, require

PART_NAMES = PARTS + ("other",)
MODES = ("greedy", "teacher")


@torch.no_grad()
def answer_attention(model, prompt: list[int], continuation: list[int], prompt_parts: np.ndarray) -> torch.Tensor:
    """``[layer, head, 4]`` attention of the answer-producing rows on rest / needle / query / other."""
    seq = list(prompt) + list(continuation)
    rows = torch.arange(len(prompt) - 1, len(seq) - 1)
    labels = np.concatenate([prompt_parts, np.full(len(continuation), OTHER)])
    columns = np.where(labels == OTHER, len(PARTS), np.where((labels >= 0) & (labels < len(PARTS)), labels, -1))
    masses = model_span_masses(model, torch.tensor([seq], device=model.device), rows, columns, len(PART_NAMES))
    return masses[:, 0].mean(2).cpu()


def attention_mass(model, *, n_samples: int = 16, context_tokens: int = 512, depth: float | None = None,
                   haystack: str = "wiki", preamble: bool = True, modes=MODES, seed: int = 0, samples=None) -> pd.DataFrame:
    """Per model, mode, layer, head and part: mean attention per token and total share; plus NIAH accuracy."""
    require(model, Capability.ATTENTION, "attention-mass")
    require(model, Capability.CAUSAL_LM, "attention-mass")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (choose from {MODES})")
    tokenizer = model.require_tokenizer("attention-mass")
    if n_samples < 1 and samples is None:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if context_tokens + 16 > model.max_seq_len:
        raise ValueError(f"--context-tokens={context_tokens} plus the answer does not fit in {model.model_name} "
                         f"(max_seq_len={model.max_seq_len})")
    if samples is None:
        samples = niah_samples(tokenizer, n_samples, context_tokens, seed=seed, depth=depth, haystack=haystack, preamble=preamble)
    share = {m: torch.zeros(model.n_layers, model.n_heads, len(PART_NAMES)) for m in modes}
    per_token = {m: torch.zeros_like(share[m]) for m in modes}
    correct = 0
    for s in progress(samples, f"attention-mass {model.model_name}"):
        generated = model.generate([s.token_ids], answer_budget(s.answer_ids), stop_ids(tokenizer))
        done = answered_prefix(tokenizer, generated, s.value)
        correct += int(done is not None)
        for mode in modes:
            # greedy: the generated tokens up to the one completing the value (or as many as the gold answer has)
            continuation = generated[: done or len(s.answer_ids)] if mode == "greedy" else s.answer_ids
            mass = answer_attention(model, s.token_ids, continuation, s.parts)
            # 'other' per token counts the most other tokens any answer row sees (document start + earlier answer tokens)
            n_other = int((s.parts == OTHER).sum()) + len(continuation) - 1
            counts = torch.tensor([(s.parts == p).sum() for p in range(len(PARTS))] + [n_other], dtype=torch.float32)
            share[mode] += mass
            per_token[mode] += mass / counts.clamp(min=1)
    n = len(samples)
    rows = []
    for mode in modes:
        sh, pt = share[mode] / n, per_token[mode] / n
        for p, part in enumerate(PART_NAMES):
            rows.append(dict(mode=mode, layer="all", head="all", part=part, mean_per_token=float(pt[..., p].mean()),
                             total_share=float(sh[..., p].mean())))
            for layer in range(model.n_layers):
                for head in range(model.n_heads):
                    rows.append(dict(mode=mode, layer=layer, head=head, part=part, mean_per_token=float(pt[layer, head, p]),
                                     total_share=float(sh[layer, head, p])))
    df = pd.DataFrame(rows)
    df.insert(0, "model", model.model_name)
    df["n_samples"] = n
    df["context_tokens"] = context_tokens
    df["accuracy"] = correct / n
    return df
