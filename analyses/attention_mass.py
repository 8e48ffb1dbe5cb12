"""Where do answer tokens look in a needle-in-a-haystack prompt? (seed 000, Table 4)

For each RULER-format prompt the model answers greedily (up to 8 tokens more than the gold answer, as RULER
generates freely and string-matches the value); then the prompt plus an answer is run once more
and the attention rows of the positions that produce the answer (the last prompt token and every answer
token but the last) are reduced, layer by layer, to the attention falling on each part of the context
(``interp.attention.model_statistics``' ``span_mass`` of those rows, exact over every key, one chunk of rows at a time):
the needle, the query (question and answer prefix) and the rest (haystack and preamble); 'other' is the document-start
token and earlier answer tokens. The answer is either the model's own greedy output (``greedy``) or the gold value
teacher-forced (``teacher``).

Two numbers per part: ``mean_per_token``, the mean attention weight a token of that part receives (the
seed's convention, its Table 4 in units of 0.01), and ``total_share``, the summed weight on the part.
Rows with ``layer='all', head='all'`` average over heads and layers, as the seed reports. Nothing larger
than one layer's answer rows ``[head, rows, keys]`` is ever held. The statistic is of the answer rows by definition, so
this analysis reads those rows, never a sample of them.

Inputs: seeded prompts on Wikipedia or noise (``haystack``), prompts whose haystack is the user's own
``documents=`` texts (``--input PATH``; their sentences in order, needle inserted at ``depth``), or ``documents=``
holding ready NIAH prompts (``corpora.niah.NiahSample``): ``length`` is then the longest prompt given, and
every prompt plus its answer budget must fit the model (refused otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.registry import Choices, Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DECODERS, REPO, Run
from corpora.answers import answer_budget, answered_prefix, stop_ids
from corpora.niah import OTHER, PARTS, prompts_for
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd
    import torch

PART_NAMES = PARTS + ("other",)
MODES = ("greedy", "teacher")


@no_grad
def answer_attention(model, prompt: list[int], continuation: list[int], prompt_parts: np.ndarray) -> torch.Tensor:
    """``[layer, head, 4]`` attention of the answer-producing rows on rest / needle / query / other."""
    import torch

    from interp.attention import model_statistics

    seq = list(prompt) + list(continuation)
    rows = torch.arange(len(prompt) - 1, len(seq) - 1)
    labels = np.concatenate([prompt_parts, np.full(len(continuation), OTHER)])
    columns = np.where(labels == OTHER, len(PARTS), np.where((labels >= 0) & (labels < len(PARTS)), labels, -1))
    masses = model_statistics(model, torch.tensor([seq], device=model.device), ("span_mass",), key_parts=columns,
                              n_parts=len(PART_NAMES), rows=rows)["span_mass"]
    return masses[:, 0].mean(2).cpu()


def headline(df) -> str:
    agg = df[(df["layer"].astype(str) == "all") & (df["mode"] == "teacher")].set_index(["model", "part"])
    parts = []
    for model in dict.fromkeys(df["model"]):
        g = agg.loc[model]
        needle, query, rest = (g.loc[p, "mean_per_token"] for p in ("needle", "query", "rest"))
        parts.append(f"{model}: needle {100 * needle:.3f}%, query {100 * query:.3f}%, rest {100 * rest:.3f}% "
                     f"(needle/rest x{needle / rest:.1f}), accuracy {g['accuracy'].iloc[0]:.2f}")
    return "Attention per key token while teacher-forcing the answer: " + "; ".join(parts) + "."


def summary(df):
    d = df[(df["layer"].astype(str) == "all") & df["part"].isin(["needle", "query", "rest"])]
    d = d.assign(per_token_x100=100 * d["mean_per_token"])
    wide = d.pivot_table(index=["model", "mode"], columns="part", values="per_token_x100",
                         sort=False)[["needle", "query", "rest"]]
    wide.columns = [f"{part} (% per token)" for part in wide.columns]
    acc = d.groupby(["model", "mode"], sort=False)[["accuracy", "n_docs", "length"]].first()
    return wide.join(acc).reset_index()


@analysis("attention-mass", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary,
          small=Run(("repo-small",), dict(n_docs=1, length=300, preamble=False)),
          main=Run(DECODERS + ("smollm2",), dict(n_docs=16, length=512, preamble=False), quick=dict(n_docs=2),
                   per_model={"smollm2": dict(n_docs=4, length=256)}, section=REPO),
          memory=Run(("repo-small",), dict(length=256, preamble=False)))
def attention_mass(model, *,
                   n_docs: Annotated[int, Help("NIAH prompts"), Range(1), NotWith(("prompts",))] = 16,
                   length: Annotated[int, Help("prompt length in the model's tokens (16 more must fit for the answer)"),
                                     Range(32), Fits(margin=16)] = 512,
                   depth: Annotated[float, Help("needle depth in [0, 1] (default: spread evenly)"), Range(0, 1)] = None,
                   haystack: Annotated[str, Help("wiki (English prose) or noise (RULER's repeated sentences)"),
                                       Choices(("wiki", "noise")), NotWith(("texts", "prompts"))] = "wiki",
                   preamble: Annotated[bool, Help("RULER's opening instruction (--no-preamble drops it)")] = True,
                   modes=MODES, seed: int = 0, documents=None) -> pd.DataFrame:
    """Attention from the answer tokens of needle-in-a-haystack prompts to the needle, the query and the rest of the
    context (mean weight per token, the seed's Table 4, and total share), per layer and head and averaged; answers
    are the model's greedy output or the gold value teacher-forced, and retrieval accuracy is reported.

    Per model, mode, layer, head and part: mean attention per token and total share; plus NIAH accuracy.
    ``documents=`` (``--input``) is the haystack, or ready NIAH prompts (``length`` is then the longest)."""
    import pandas as pd
    import torch

    from interp.runtime import parallel

    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (choose from {MODES})")
    tokenizer = model.require_tokenizer("attention-mass")
    samples = prompts_for(model, "attention-mass", documents, n_docs, length, seed=seed, depth=depth, haystack=haystack,
                          preamble=preamble)
    length = max(len(s.token_ids) for s in samples)

    def one(s):
        generated = model.generate([s.token_ids], answer_budget(s.answer_ids), stop_ids(tokenizer))
        done = answered_prefix(tokenizer, generated, s.value)
        out = {"correct": int(done is not None)}
        for mode in modes:
            # greedy: the generated tokens up to the one completing the value (or as many as the gold answer has)
            continuation = generated[: done or len(s.answer_ids)] if mode == "greedy" else s.answer_ids
            # 'other' per token counts the most other tokens any answer row sees (document start + earlier answer
            # tokens)
            n_other = int((s.parts == OTHER).sum()) + len(continuation) - 1
            counts = torch.tensor([(s.parts == p).sum() for p in range(len(PARTS))] + [n_other], dtype=torch.float32)
            out[mode] = (answer_attention(model, s.token_ids, continuation, s.parts), counts)
        return out

    share = {m: torch.zeros(model.n_layers, model.n_heads, len(PART_NAMES)) for m in modes}
    per_token = {m: torch.zeros_like(share[m]) for m in modes}
    correct = 0
    for out in parallel.map_items(one, samples, model=model, desc=f"attention-mass {model.model_name}"):
        correct += out["correct"]
        for mode in modes:
            mass, counts = out[mode]
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
                    rows.append(dict(mode=mode, layer=layer, head=head, part=part,
                                     mean_per_token=float(pt[layer, head, p]), total_share=float(sh[layer, head, p])))
    df = pd.DataFrame(rows)
    df.insert(0, "model", model.model_name)
    df["n_docs"] = n
    df["length"] = length
    df["accuracy"] = correct / n
    return df
