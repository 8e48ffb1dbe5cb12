"""Attention sinks: how many heads put most of their attention on the first token (Gu et al., ICLR 2025, "When
Attention Sink Emerges in Language Models: An Empirical View").

The paper's metric (Section 3): for head h of layer l on a sequence of T tokens, the first token's importance is
"α_1 = 1/T Σ_{t=1}^{T} A_{t,1}" (1-indexed; in general α_k = 1/(T−k+1) Σ_{t=k}^{T} A_{t,k}), so "1/T ≤ α_1 ≤ 1 since
A_{1,1} = 1"; a head is a sink when α_1 > ε, ε = 0.3, and Sink_1^ε is the share of sink heads over layers, heads and
sequences; "For fair comparisons, we need to fix T … e.g., T = 64". The authors' code (sail-sg/Attention-Sink,
``eval_sink_open_source.py``) thresholds each sequence's α_1 and then averages the indicator over 100 sequences,
layers and heads. Table 1 at T = 64, natural / random tokens: GPT2-XL 77.00 / 70.29%, Mistral-7B 97.49 / 75.21%,
LLaMA2-7B 92.47 / 90.13%, LLaMA3-8B 99.02 / 91.23%. The sink sits where pretraining fixed the first token: with a
token fixed at position 2 in pretraining, Sink_1 is 0.00% and Sink_2 69.03% (their Table 10), so a model trained with
a BOS first (Gemma 3) needing it is what the paper predicts. Their Fig. 3: Sink_1^ε "tends to decrease with larger
token lengths T" (evaluation length). Barbero et al. (COLM 2025, "Why do LLMs attend to the first token?") vary the
*training* context length, which fixed checkpoints cannot test. A model with random weights has no sinks (attention
near uniform: row t gives key 0 about 1 / (t + 1)).

``estimator`` picks how a head becomes a sink:

- ``gu`` (default, the paper's): per sequence α_1 = (A_00 + Σ_{t=1}^{T-1} A_{t,0}) / T, row 0 included (A_00 = 1 in a
  causal model; it is read, not assumed); a head is a sink *in that sequence* when α_1 > ``epsilon`` (strict), and
  ``sink_share`` is the share of sequences in which it is; the sink rate (Sink_1^ε) is the mean of ``sink_share`` over
  heads (and layers). ``lengths`` defaults to 64 (Gu's T). Every row 0..T-1 is read, at any length
  (``interp.attention.model_statistics``: exact over every key, one chunk of rows at a time, in the memory of a forward
  pass), so α_1 is the paper's sum. Given ``max_rows`` (sampling, the protocol before all-row statistics, whose default
  was 256), that many evenly spaced rows stand for rows 1..T-1: α_1 = (A_00 + (T - 1) · their mean) / T.
- ``poslens`` (what poslens reported before): ``first_token_mass`` = mean over query rows 1..T-1 (row 0 left out;
  head-profiles' statistic, ``head_profiles.context_masses``), averaged over the sequences *before* thresholding:
  ``sink_share`` is 1 when that average exceeds ``epsilon``, else 0. Row 0 shifts the mean: for a head that gives
  mass m to key 0 on every row, α_1 = (1 + (T - 1) m) / T, so at T = 64 poslens' ε = 0.3 is Gu's ε ≈ 0.311, and
  Gu's 0.3 is poslens' m > 0.289. Defaults to the lengths 64, 256 and 1024 (those that fit).

Both ``alpha_1`` and ``first_token_mass`` are in every row (means over sequences), whichever estimator decided
``sink_share``; ``estimator`` names it. Where poslens departs from Gu under either: its texts are English Wikipedia
leads (or the user's ``documents=``) rather than their probe set, it adds conditions, and it reads one model family
at a time through its own attention.

Conditions, each at every length of ``lengths``:

- ``input``: ``text`` (English Wikipedia leads, or the user's ``documents=``) or ``random`` (random ordinary
  tokens, ``corpora.random_tokens``): a sink that survives random tokens is positional, not semantic (Gu's
  "random" column);
- ``start_token``: with the document-start token (BOS, or a byte model's EOS) first, or without it (the first
  token is then an ordinary one; the same text or tokens, shifted by one). Models without a start token have only
  the second.

Each context adds its ``[layer, head]`` sums (``interp.runtime.parallel.fold_items``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Adapts, Choices, Cli, Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from analyses.units import Tables, Units
from interp.capabilities import Capability

if TYPE_CHECKING:
    pass

INPUTS = ("text", "random", "repeat", "start-second", "separator-first")
ESTIMATORS = ("gu", "poslens")
GU_LENGTH = 64  # Gu et al.'s T
# a condition is its input, "+start" when the start token comes first; "start-second" puts the start token second;
# "separator-first" puts the document separator named by --separator first (SmolLM2's <|endoftext|>)
CONDITIONS = ("text", "text+start", "random", "random+start", "repeat", "repeat+start", "start-second",
              "separator-first")
DEFAULT_CONDITIONS = ("text", "text+start", "random", "random+start")


def _lengths(model, options) -> tuple[int, ...]:
    wanted = (GU_LENGTH,) if options.get("estimator", "gu") == "gu" else (64, 256, 1024)
    return tuple(n for n in wanted if n < model.max_seq_len) or (model.max_seq_len - 1,)


def condition_name(kind: str, start: bool) -> str:
    return kind if kind in ("start-second", "separator-first") or not start else f"{kind}+start"


_NO_SEPARATOR = ("sink-rate --condition separator-first: name the separator it puts first (--separator, e.g. "
                 "<|endoftext|>)")


def precheck(options: dict, label) -> None:
    """Before any model loads: the separator-first condition needs its separator."""
    from analyses.registry import OptionError

    if "separator-first" in set(options["conditions"]) | set(options["long_conditions"]) and not options["separator"]:
        raise OptionError(_NO_SEPARATOR)


def separator_id(model, separator: str) -> int | None:
    """The id of ``separator``, a token written as the tokenizer decodes it; None for "" (no separator-first)."""
    if not separator:
        return None
    tok = model.require_tokenizer("sink-rate")
    found = tok.convert_tokens_to_ids(separator)
    if not isinstance(found, int) or tok.decode([found]) != separator:  # an unknown token decodes as the unk token
        hint = f", e.g. {tok.decode([tok.eos_token_id])!r}" if tok.eos_token_id is not None else ""
        raise ValueError(f"sink-rate --separator {separator!r}: not a token of {model.model_name}'s vocabulary "
                         f"(write it as the tokenizer decodes it{hint})")
    return found


def _contexts(model, n_docs: int, length: int, seed: int, documents,
              wanted=DEFAULT_CONDITIONS, stage: str = "any",
              separator: int | None = None) -> dict[tuple[str, bool], list[list[int]]]:
    """``{(input, start_token): [ids]}``: each context of ``length`` tokens in each condition of ``wanted`` that the
    model has (a model without a start token has no ``+start`` or ``start-second`` condition). ``repeat``: one
    random ordinary token (one per sequence, seeded) repeated ``length`` times (Gu et al.'s Table 1 "repeat"
    column); ``start-second``: the text's first ordinary token, then the start token, then the text (the start token
    at position 2, as Gu's Table 10 fixes a token there; read as Sink_2); ``separator-first``: the document separator
    ``separator`` (an id), then the text."""
    import numpy as np

    from corpora.contexts import analysis_windows
    from corpora.random_tokens import ordinary_ids, random_sequences, start_token
    from corpora.stages import stage_seed

    bos = start_token(model)
    text = [w.ids for w in analysis_windows(model, "sink-rate", documents, length=length + 1, n_docs=n_docs, seed=seed,
                                            stage=stage)]
    plain = [ids[1:] if bos is not None and ids and ids[0] == bos else ids for ids in text]
    n = n_docs if documents is None else len(text)
    rand = random_sequences(model, n, length, seed, stage)
    tokens = np.random.default_rng(stage_seed([seed, 1], stage)).choice(ordinary_ids(model), size=n).tolist()
    out = {("text", False): [ids[:length] for ids in plain if len(ids) >= 2],
           ("random", False): rand, ("repeat", False): [[t] * length for t in tokens]}
    if bos is not None:
        out[("text", True)] = [[bos] + ids[: length - 1] for ids in plain if len(ids) >= 1]
        out[("random", True)] = [[bos] + r[: length - 1] for r in rand]
        out[("repeat", True)] = [[bos] + [t] * (length - 1) for t in tokens]
        out[("start-second", True)] = [ids[:1] + [bos] + ids[1: length - 1] for ids in plain if len(ids) >= 2]
    if separator is not None:
        out[("separator-first", True)] = [[separator] + ids[: length - 1] for ids in plain if len(ids) >= 1]
    return {k: v for k, v in out.items() if condition_name(*k) in wanted}


@no_grad
def first_token_attention(model, ids: list[int], max_rows: int) -> dict:
    """``{"row0": [layer, head] A_00, "mass": [layer, head] mean over query rows 1..N-1 of the attention to key 0,
    "mass2": the same to key 1}`` (float64 numpy; every row by default, through ``interp.attention.model_statistics``,
    or the ``max_rows`` evenly spaced rows of ``head_profiles.sampled_rows``)."""
    import torch

    from analyses.head_profiles import sampled_rows
    from interp.attention import model_statistics

    n = len(ids)
    rows = sampled_rows(n, max_rows)
    every = rows.numel() == n - 1
    first = model_statistics(model, torch.tensor([ids], device=model.device), ("first_mass",), first=(1, 2),
                             rows=None if every else torch.cat([torch.zeros(1, dtype=torch.long), rows]))["first_mass"]
    first = first[:, 0].double()  # [layer, head, 1 + rows, (first key, first two keys)]
    to_first, to_second = first[..., 0], first[..., 1] - first[..., 0]
    return {"row0": to_first[..., 0].numpy(), "mass": to_first[..., 1:].mean(-1).numpy(),
            "mass2": to_second[..., 1:].mean(-1).numpy()}


def gu_alpha(row0, mass, length: int):
    """Gu et al.'s α_1 of one sequence of ``length`` tokens: (A_00 + (T - 1) · mean over rows 1..T-1) / T."""
    return (row0 + (length - 1) * mass) / length


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        top = g[g["length"] == g["length"].min()]
        cells = ", ".join(f"{i}{' +start' if s else ''} {h['sink_share'].mean():.0%}"
                          for (i, s), h in top.groupby(["input", "start_token"], sort=False))
        parts.append(f"{model} at {top['length'].iloc[0]} tokens: {cells}")
    estimator = df["estimator"].iloc[0]
    how = ("Gu et al.'s Sink_1: alpha_1 over all query rows > {eps:g}, per sequence" if estimator == "gu"
           else "poslens' estimator: first-token mass over rows 1..T-1, averaged over sequences, > {eps:g}")
    return f"Sink heads ({how.format(eps=df['epsilon'].iloc[0])}): " + "; ".join(parts) + "."


def summary(df):
    return (df.groupby(["model", "estimator", "input", "start_token", "length"], sort=False)
            .agg(heads=("sink_share", "size"), sink_rate=("sink_share", "mean"), mean_alpha_1=("alpha_1", "mean"),
                 mean_first_token_mass=("first_token_mass", "mean"))
            .reset_index())


UNITS = Units("sequence", keys=("input", "start_token", "length", "layer", "head"),
              measures={"sink": "1 where the head's alpha_1 > epsilon in that sequence (Gu's Sink_1 indicator), else 0",
                        "sink_2": "1 where the head's alpha_2 > epsilon in that sequence (Sink_2), else 0"})


@analysis("sink-rate", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary,
          units=UNITS,
          small=Run(("repo-small",), dict(lengths=(32, 64), n_docs=1, max_rows=16)),
          main=Run(DECODERS, dict(lengths=(64, 256), n_docs=4), quick=dict(lengths=(64,), n_docs=1, max_rows=32),
                   section=HEADS),
          # Gu et al.'s estimator (the default) at their T = 64 on their 100 sequences per condition, with their
          # "repeat" column and the start token at position 2 (their Table 10); at a longer evaluation length (their
          # Fig. 3) the text in the Gu-comparable condition only (their code's tokenizer(prompt): no BOS for SmolLM2's
          # tokenizer, <bos> for Gemma's) on 50 sequences at T = 128 .. 1,024, every query row as their alpha_1 has it
          # (past 512 Gemma 3's sliding layers cannot see token 0: its fall is judged on its global layers); SmolLM2
          # also with its document separator <|endoftext|> first (separator-first), the token its pretraining fixes
          real=Run(PRETRAINED, dict(estimator="gu", lengths=(64, 128, 256, 512, 1024), n_docs=100, long_docs=50,
                                    conditions=CONDITIONS[:-1], stage="judged"),
                   quick=dict(lengths=(64,), n_docs=2, max_rows=32), section=KNOWN,
                   per_model={"smollm2": dict(long_conditions=("text",), conditions=CONDITIONS,
                                              separator="<|endoftext|>"),
                              "gemma3-270m": dict(long_conditions=("text+start",))}),
          memory=Run(("rope-small",), dict(lengths=(128,))),
          builds_logits=False, precheck=precheck)
def sink_rate(model, *,
              estimator: Annotated[str, Help("gu: Gu et al.'s alpha_1 over all query rows (row 0 included), "
                                             "thresholded per sequence; poslens: the mass over rows 1..T-1, averaged "
                                             "over sequences, then thresholded"), Choices(ESTIMATORS)] = "gu",
              lengths: Annotated[tuple[int, ...], Help("context length(s), comma-separated or repeated (left out: 64, "
                                                       "Gu et al.'s T, for gu; 64, 256, 1024 for poslens; those that "
                                                       "fit the model)"),
                                 Range(2), Fits(), Adapts(_lengths), Cli("--length")] = (GU_LENGTH,),
              n_docs: Annotated[int, Help("contexts per condition"), Range(1), NotWith()] = 8,
              epsilon: Annotated[float, Help("a head is a sink when its first-token attention exceeds this (Gu et "
                                             "al.: 0.3)"),
                                 Range(0, 1)] = 0.3,
              max_rows: Annotated[int, Help("query rows 1..T-1 read per context: 0 (default) every row; a number, "
                                            "that many evenly spaced (every row when at least T - 1)"), Range(0)] = 0,
              conditions: Annotated[tuple[str, ...], Help("conditions read (repeatable; default text and random, "
                                                          "each with and without the start token)"),
                                    Choices(CONDITIONS), Cli("--condition")] = DEFAULT_CONDITIONS,
              long_conditions: Annotated[tuple[str, ...], Help("the conditions read at lengths above the shortest "
                                                               "(default: every one of --condition)"),
                                         Choices(CONDITIONS), Cli("--long-condition")] = (),
              long_docs: Annotated[int, Help("contexts per condition at lengths above the shortest (default 0: "
                                             "--n-docs)"), Range(0)] = 0,
              separator: Annotated[str, Help("a document separator, written as the tokenizer decodes it (e.g. "
                                             "<|endoftext|>, SmolLM2's), that the separator-first condition puts "
                                             "first; needed by that condition")] = "",
              stage: STAGE = "any", seed: int = 0, documents=None) -> Tables:
    """Share of heads whose attention goes mostly to the first token (attention sinks), per layer, on text and on
    random tokens, with and without the document-start token (Gu et al.'s Sink_1 by default).

    One row per input, start token, length, layer and head: alpha_1 (Gu), first-token mass (rows 1..T-1), the share
    of contexts in which the head is a sink under ``estimator``, alpha_2 and its share (the second token's, Gu's
    Sink_2). ``key_window`` is the layer's attention window (0: every earlier key); ``start_text`` the start token as
    the tokenizer writes it ("none" without one). The unit-level values behind the shares (``UNITS``: each sequence's
    0/1 sink indicators ``sink`` and ``sink_2`` per head, in the same sequence order for every head of a condition) are
    the units a rate's interval is bootstrapped over."""
    import numpy as np
    import pandas as pd

    from analyses import units
    from corpora.random_tokens import start_token
    from interp.runtime import parallel

    if "separator-first" in set(conditions) | set(long_conditions) and not separator:  # called without a plan
        raise ValueError(_NO_SEPARATOR)
    sep = separator_id(model, separator)
    items, keys, index = [], [], []
    for i, length in enumerate(sorted(lengths)):
        wanted = conditions if i == 0 or not long_conditions else long_conditions
        docs = n_docs if i == 0 or not long_docs else long_docs
        for (kind, start), seqs in _contexts(model, docs, length, seed, documents, wanted, stage, sep).items():
            for j, ids in enumerate(seqs):
                items.append(ids)
                keys.append((kind, start, length))
                index.append(j)
    conds = sorted(set(keys), key=lambda k: (INPUTS.index(k[0]), k[1], k[2]))
    counts = {c: keys.count(c) for c in conds}
    shape = (model.n_layers, model.n_heads)
    state = {f"{m}|{k}|{s}|{n}": np.zeros(shape) for m in ("mass", "alpha", "sink", "alpha2", "sink2")
             for k, s, n in conds}
    state |= {f"{m}|{k}|{s}|{n}": np.zeros((counts[(k, s, n)], *shape)) for m in ("seq", "seq2") for k, s, n in conds}
    state |= {f"count|{k}|{s}|{n}": np.zeros(1) for k, s, n in conds}

    def one(ids):
        seen = first_token_attention(model, ids, max_rows)
        alpha = gu_alpha(seen["row0"], seen["mass"], len(ids))
        alpha2 = seen["mass2"]  # alpha_2 = 1/(T - 1) sum over rows 1..T-1 of A_{t,1} (row 0 cannot see key 1)
        return {"mass": seen["mass"], "alpha": alpha, "sink": (alpha > epsilon).astype(np.float64),
                "alpha2": alpha2, "sink2": (alpha2 > epsilon).astype(np.float64)}

    def add(state, i, stats):
        k, s, n = keys[i]
        for m, v in stats.items():
            state[f"{m}|{k}|{s}|{n}"] += v
        state[f"seq|{k}|{s}|{n}"][index[i]] += stats["sink"]
        state[f"seq2|{k}|{s}|{n}"][index[i]] += stats["sink2"]
        state[f"count|{k}|{s}|{n}"] += 1

    state = parallel.fold_items(one, items, state, add, model=model, desc=f"sink-rate {model.model_name}")
    df = pd.concat(_frames(model, state, conds, estimator, epsilon), ignore_index=True)
    df.insert(0, "model", model.model_name)
    bos = start_token(model)
    df["start_text"] = "none" if bos is None else model.tokenizer.decode([bos])
    df["separator_text"] = separator or "none"
    return Tables(df, units.frame(UNITS, [
        units.long(model.model_name, measure, state[f"{m}|{k}|{s}|{n}"],
                   {"layer": range(model.n_layers), "head": range(model.n_heads)}, input=k, start_token=s, length=n)
        for k, s, n in conds for measure, m in (("sink", "seq"), ("sink_2", "seq2"))]))


def _frames(model, state: dict, conds: list, estimator: str, epsilon: float) -> list:
    """One frame per condition (input, start token, length): a row per layer and head, from the summed statistics."""
    import numpy as np
    import pandas as pd

    layer, head = np.meshgrid(np.arange(model.n_layers), np.arange(model.n_heads), indexing="ij")
    windows = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    frames = []
    for k, s, n in conds:
        count = int(state[f"count|{k}|{s}|{n}"][0])
        mass, alpha = state[f"mass|{k}|{s}|{n}"] / count, state[f"alpha|{k}|{s}|{n}"] / count
        share = state[f"sink|{k}|{s}|{n}"] / count if estimator == "gu" else (mass > epsilon).astype(np.float64)
        frames.append(pd.DataFrame(dict(estimator=estimator, input=k, start_token=s, length=n, layer=layer.ravel(),
                                        head=head.ravel(), depth=layer.ravel() / max(1, model.n_layers - 1),
                                        key_window=[windows[int(x)] or 0 for x in layer.ravel()],
                                        alpha_1=alpha.ravel(), first_token_mass=mass.ravel(), sink_share=share.ravel(),
                                        alpha_2=state[f"alpha2|{k}|{s}|{n}"].ravel() / count,
                                        sink_2_share=state[f"sink2|{k}|{s}|{n}"].ravel() / count,
                                        epsilon=epsilon, n_docs=count)))
    return frames
