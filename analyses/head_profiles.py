"""What does each head do, across models of any depth? One profile row per model, layer and head.

Three statistics, the first two without ever holding more than one chunk of one layer's ``[head, rows, keys]``,
however long the input:

1. **Contexts** (built-in Wikipedia windows of ``length``, seeded, or the user's ``documents=``
   split into windows of that length, as ``corpora.user.token_windows``). In each context **every** query row
   1..N-1 is read (``interp.attention.model_statistics``: exact over every key, one chunk of rows at a time, in the
   memory of a forward pass), or, when ``max_rows`` is given, that many rows evenly spaced over 1..N-1 (the
   protocol before all-row statistics, whose default was 256); per head, averaged over rows and contexts:
   - ``previous_token_mass``: weight on key q - 1;
   - ``first_token_mass``: weight on key 0 (the document-start / [CLS] token: the attention sink), over rows 1..N-1
     (sink-rate's ``poslens`` estimator; Gu et al.'s α_1, sink-rate's default, also counts row 0, where A_00 = 1);
   - ``local_mass``: weight on keys with 0 < |q - k| <= ``local_window`` (default 8; for a decoder the
     8 tokens before q, for an encoder 8 on each side). The token itself is excluded, the previous one
     included;
   - ``position_range``: max - min of ``blocks.{l}.attn.hook_positions`` over the context, as
     ``position-ranges`` (models with ``Capability.POSITIONS``). NaN for models whose heads rotate by no
     per-head position (BERT's learned absolute table, the AP / RP / DSTG encoders).
2. **Needle retrieval** (causal LMs only): RULER NIAH prompts of ``niah_tokens`` tokens (seeded, the
   user's documents as haystack, or the user's NIAH prompts) with the gold answer teacher-forced; the rows that
   produce the answer (last prompt token and every answer token but the last) are read, as
   ``attention-mass``:
   - ``needle_mass``: summed weight on the needle's tokens, mean over answer rows (attention-mass's
     ``total_share`` of the needle, teacher mode);
   - ``retrieval_score``: poslens' teacher-forced variant of the retrieval-head score of Wu et al. (2024)
     (retrieval-heads ``--score poslens``): among the answer tokens that occur in the needle, the fraction whose
     producing row's top-attended key is a needle token with that same id, every prompt counted. Wu et al.'s own
     score (greedy answer, hits over the value's tokens, retrieved prompts only) is retrieval-heads' default.
   Masked LMs have no answer to copy: both are NaN for them.
3. **KL influences** (``Capability.LOGIT_COMPONENTS``): ``influence_ap / _sem / _rp`` and ``kl_group`` of
   ``kl-ablation`` on the same contexts (full patterns of one layer at a time there). NaN / "" otherwise.

``depth`` = layer / (n_layers - 1) puts models of different depth on one axis.

The three are one ``interp.runtime.parallel.fold_items`` call per model over the contexts and the NIAH prompts:
each item adds its ``[layer, head]`` statistics (masses, position ranges and KLs of a context; needle mass,
retrieval score and a count of 1 where the score is defined, for a prompt) to float64 sums, so under
``torchrun`` each rank keeps only its sums, and shards, resume and ``poslens merge`` work as for any fold.

``group``, the first rule that holds: ``retrieval`` (retrieval_score >= 0.5), ``previous-token``
(previous_token_mass >= 0.5), ``sink`` (first_token_mass >= 0.5), ``local`` (local_mass >= 0.5), else
the KL taxonomy group where the model has one, else ``mixed``. The threshold 0.5 means "most of the
weight", so each head has at most one dominant behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import may_be_nan
from analyses.registry import Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import HEADS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import torch

THRESHOLD = 0.5
CONTEXT_METRICS = ("previous_token_mass", "first_token_mass", "local_mass", "position_range")


def group_of(row: dict, threshold: float = THRESHOLD) -> str:
    if row["retrieval_score"] >= threshold:  # NaN compares False
        return "retrieval"
    for name, col in (("previous-token", "previous_token_mass"), ("sink", "first_token_mass"), ("local", "local_mass")):
        if row[col] >= threshold:
            return name
    return row.get("kl_group") or "mixed"


EVERY_ROW = 0  # ``max_rows`` meaning every query row


def sampled_rows(n: int, max_rows: int):
    """The query rows 1..n-1 read in a context of ``n`` tokens: every one (``max_rows`` 0, the default, or at least
    n - 1), else ``max_rows`` evenly spaced."""
    import torch

    if max_rows == EVERY_ROW or max_rows >= n - 1:
        return torch.arange(1, n)
    return torch.unique(torch.linspace(1, n - 1, max_rows).round().long())


@no_grad
def context_masses(model, ids: list[int], max_rows: int, local_window: int) -> dict[str, torch.Tensor]:
    """``{metric: [layer, head]}`` row-averaged masses (and ``position_range`` when the model has positions), from
    ``interp.attention.model_statistics``: ``previous_mass``, ``first_mass`` (k = 1) and ``window_mass`` at
    ``local_window`` less ``self_mass``, per query row, averaged over rows 1..N-1 (or the sampled ones)."""
    import torch

    from interp.attention import model_statistics

    n = len(ids)
    rows = sampled_rows(n, max_rows)
    every = rows.numel() == n - 1
    out = {}
    hooks = []
    if Capability.POSITIONS in model.capabilities:
        out["position_range"] = torch.zeros(model.n_layers, model.n_heads)

        def positions(layer):
            def hook(z, hook):
                z = z[0].float()
                out["position_range"][layer] = (z.max(-1).values - z.min(-1).values).cpu()
            return hook

        hooks += [(f"blocks.{l}.attn.hook_positions", positions(l)) for l in range(model.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        stats = model_statistics(model, torch.tensor([ids], device=model.device),
                                 ("first_mass", "previous_mass", "self_mass", "window_mass"), first=(1,),
                                 windows=(local_window,), rows=None if every else rows)
    read = slice(1, None) if every else slice(None)  # every row: 0..N-1 came back, row 0 is left out
    out["previous_token_mass"] = stats["previous_mass"][:, 0, :, read].mean(-1)
    out["first_token_mass"] = stats["first_mass"][:, 0, :, read, 0].mean(-1)
    out["local_mass"] = (stats["window_mass"][:, 0, :, read, 0] - stats["self_mass"][:, 0, :, read]).mean(-1)
    return out


@no_grad
def needle_scores(model, sample) -> tuple[torch.Tensor, torch.Tensor]:
    """``[layer, head]`` needle mass and retrieval score of one teacher-forced NIAH prompt."""
    import torch

    from corpora.niah import PARTS
    from interp.attention import model_statistics

    seq = list(sample.token_ids) + list(sample.answer_ids)
    rows = torch.arange(len(sample.token_ids) - 1, len(seq) - 1)
    needle = torch.zeros(len(seq), dtype=torch.bool)
    needle[: len(sample.parts)] = torch.as_tensor(sample.parts == PARTS.index("needle"))
    ids = torch.tensor(seq)
    target = ids[rows + 1]  # the token each row produces
    copyable = torch.tensor([bool((ids[needle] == t).any()) for t in target.tolist()])
    needle, ids, target, copyable = (x.to(model.device) for x in (needle, ids, target, copyable))
    stats = model_statistics(model, torch.tensor([seq], device=model.device), ("span_mass", "top_key"),
                             key_parts=needle.long().cpu() - 1, n_parts=1, rows=rows)  # the needle is part 0
    mass = stats["span_mass"][:, 0, :, :, 0].mean(-1)
    top = stats["top_key"][:, 0].to(needle.device)  # [layer, head, rows]
    hit = needle[top] & (ids[top] == target) & copyable
    score = (hit.sum(-1).float() / copyable.sum().clamp(min=1)).cpu()
    if not bool(copyable.any()):
        score[:] = float("nan")
    return mass, score


def _needle_samples(model, niah_prompts: int, niah_tokens: int, seed: int, documents):
    """NIAH prompts for a causal LM (``documents=`` prompts as given, or prompts on its texts or on Wikipedia; checked
    to fit with their answers), None for other models."""
    if Capability.CAUSAL_LM not in model.capabilities:
        return None
    from corpora.documents import input_kind
    from corpora.niah import prompts_for

    if documents is not None and input_kind(documents) == "tokens":
        documents = None  # token ids are contexts; the needles come from the built-in haystack
    return prompts_for(model, "head-profiles", documents, niah_prompts, niah_tokens, seed=seed)


def profile_state(model, kl_components: list[str], needles: bool) -> dict:
    """The zero sums ``profile_statistics`` adds to: ``[layer, head]`` float64 per statistic, summed over items."""
    import numpy as np

    names = list(CONTEXT_METRICS[:3])
    names += ["position_range"] if Capability.POSITIONS in model.capabilities else []
    names += [f"kl_{c}" for c in kl_components]
    names += ["needle_mass", "retrieval_sum", "retrieval_count"] if needles else []
    return {k: np.zeros((model.n_layers, model.n_heads)) for k in names}


def profile_statistics(model, item, max_rows: int, local_window: int, kl_components: list[str]) -> dict:
    """One item's additive share of the state: a context ``("context", ids)`` gives its row-averaged masses (and
    KLs), a NIAH prompt ``("needle", sample)`` its needle mass and, where an answer token is copyable, its
    retrieval score with a count of 1. Every value is ``[layer, head]`` float64."""
    import numpy as np

    kind, x = item
    out = {}
    if kind == "needle":
        mass, score = needle_scores(model, x)
        score = score.double().numpy()
        finite = np.isfinite(score)
        return {"needle_mass": mass.double().numpy(), "retrieval_sum": np.where(finite, score, 0.0),
                "retrieval_count": finite.astype(np.float64)}
    if len(x) >= 2:  # one token has no query row after the first
        out.update({k: v.double().numpy() for k, v in context_masses(model, x, max_rows, local_window).items()})
    if kl_components:
        from analyses.kl_ablation import document_kls

        out.update({f"kl_{c}": v.double().numpy() for c, v in document_kls(model, x, kl_components).items()})
    return out


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        counts = g["group"].value_counts()
        parts.append(f"{model}: " + ", ".join(f"{n} {grp}" for grp, n in counts.items()))
    return "Heads by dominant behaviour: " + "; ".join(parts) + "."


def summary(df):
    """Heads per group and the strongest head of each kind, per model (for SUMMARY.md)."""
    counts = df.groupby(["model", "group"], sort=False).size().unstack(fill_value=0)
    best = df.groupby("model", sort=False)[["previous_token_mass", "first_token_mass", "retrieval_score"]].max()
    best.columns = [f"max {c}" for c in best.columns]
    return counts.join(best).reset_index()


@analysis("head-profiles", needs=[Capability.ATTENTION], headline=headline, summary=summary,
          small=Run(("repo-small", "dstg-small"),
                    dict(n_docs=1, length=48, max_rows=16, niah_prompts=1, niah_tokens=224)),
          main=Run(("repo-small", "rope-small", "increments-per-layer", "dstg-small", "smollm2", "minilm"),
                   dict(n_docs=4, length=256, niah_prompts=8, niah_tokens=480),
                   quick=dict(n_docs=1, niah_prompts=1, max_rows=32),
                   per_model={"smollm2": dict(n_docs=2, length=256, niah_prompts=2, niah_tokens=256)}, section=HEADS),
          memory=Run(("repo-small",), dict(length=128, niah_prompts=2, niah_tokens=256)))
@may_be_nan(position_range="the model's heads assign no per-head positions", needle_mass="a masked LM copies no answer",
            retrieval_score="a masked LM copies no answer, or no answer token occurs once in the needle",
            influence_ap="the model does not decompose its attention logits",
            influence_sem="the model does not decompose its attention logits",
            influence_rp="the model does not decompose its attention logits")
def head_profiles(model, *,
                  n_docs: Annotated[int, Help("contexts for the attention masses (built-in Wikipedia windows)"),
                                    Range(1), NotWith(("texts", "tokens"))] = 8,
                  length: Annotated[int, Help("tokens per context (at most the model's context)"), Range(3),
                                    Fits()] = 512,
                  max_rows: Annotated[int, Help("query rows read per context: 0 (default) every row 1..N-1; a "
                                                "number, that many evenly spaced"), Range(0)] = EVERY_ROW,
                  local_window: Annotated[int, Help("keys within this distance (token itself excluded) count as local"),
                                          Range(1)] = 8,
                  niah_prompts: Annotated[int, Help("NIAH prompts for needle mass and retrieval score (causal LMs)"),
                                          Range(1), NotWith(("prompts",))] = 8,
                  niah_tokens: Annotated[int, Help("NIAH prompt length in the model's tokens (causal LMs; 16 more "
                                                   "must fit for the answer; default: 512, lowered to fit)"), Range(32),
                                       Fits(margin=16, only=Capability.CAUSAL_LM)] = 512,
                  seed: int = 0, documents=None):
    """Per head of each model, on one normalised-depth axis: attention on the previous token, the first token (sink)
    and a local window, the range of its positions, its attention to the needle while answering and its retrieval
    score (top attention on the needle token being copied), KL influences where logits decompose, and the dominant
    behaviour as a group.

    One row per layer and head: depth, masses, position range, needle retrieval, KL influences, group.
    ``documents=`` (``--input``) texts are split into windows of ``length`` tokens and are the NIAH haystack; token ids
    are the contexts; NIAH prompts are the needle prompts."""
    import numpy as np
    import pandas as pd

    from corpora.contexts import analysis_windows
    from corpora.documents import input_kind
    from interp.runtime import parallel

    samples = _needle_samples(model, niah_prompts, niah_tokens, seed, documents)  # checked before any work
    prompts = documents is not None and input_kind(documents) == "prompts"
    contexts = [w.ids for w in analysis_windows(model, "head-profiles", None if prompts else documents, length=length,
                                                n_docs=n_docs, seed=seed)]
    kl_components = list(model.logit_components()) if Capability.LOGIT_COMPONENTS in model.capabilities else []
    items = [("context", ids) for ids in contexts] + [("needle", s) for s in samples or []]
    state = profile_state(model, kl_components, samples is not None)

    def one(item):
        return profile_statistics(model, item, max_rows, local_window, kl_components)

    def add(state, i, stats):
        for k, v in stats.items():
            state[k] += v

    state = parallel.fold_items(one, items, state, add, model=model, desc=f"head-profiles {model.model_name}")
    nan = np.full((model.n_layers, model.n_heads), float("nan"))
    masses = {m: state[m] / len(contexts) if m in state else nan for m in CONTEXT_METRICS}
    needle, retrieval = nan, nan
    if samples is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            needle = state["needle_mass"] / len(samples)
            retrieval = state["retrieval_sum"] / state["retrieval_count"]  # nanmean over samples: NaN where none counts
    kl = None
    if kl_components:
        from analyses.kl_ablation import RP_SUPPORT, kl_table

        kl = kl_table(model, {c: state[f"kl_{c}"] for c in kl_components}, len(contexts), RP_SUPPORT)
        kl = kl.set_index(["layer", "head"])
    rows = []
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            row = dict(model=model.model_name, layer=layer, head=head, n_layers=model.n_layers,
                       depth=layer / max(1, model.n_layers - 1),
                       **{m: float(masses[m][layer, head]) for m in CONTEXT_METRICS},
                       needle_mass=float(needle[layer, head]), retrieval_score=float(retrieval[layer, head]))
            for c in ("ap", "sem", "rp"):
                row[f"influence_{c}"] = float(kl.loc[(layer, head),
                                                     f"influence_{c}"]) if kl is not None else float("nan")
            row["kl_group"] = kl.loc[(layer, head), "group"] if kl is not None else ""
            row["group"] = group_of(row)
            rows.append(row)
    df = pd.DataFrame(rows)
    df["n_docs"] = len(contexts)
    df["length"] = max(len(c) for c in contexts)
    df["local_window"] = local_window
    df["niah_prompts"] = len(samples) if samples is not None else 0
    return df
