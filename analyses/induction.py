"""Induction and previous-token heads (Olsson et al. 2022, "In-context Learning and Induction Heads").

Protocol, TransformerLens' convention: ``n_docs`` sequences of ``half`` random ordinary tokens repeated twice
(``corpora.random_tokens``), after the document-start token where the model has one. Per head:

- ``induction_score``: mean attention from each token of the second copy to the token after its first
  occurrence (key = query - half + 1);
- ``previous_token_score``: mean attention from every token after the first to the one before it;
- ``wiki_previous_token_score``: the same previous-token score on ``n_docs`` English Wikipedia windows of
  ``2 * half`` tokens after the start token (where the model has one), as long as the repeated sequences:
  Olsson et al.'s head activation evaluator reads it on "an example from the training distribution", which random
  tokens are not.

Unit-level values are kept (``UNITS``, ``induction.units.csv``): each sequence's scores per head and its losses on
each copy, so a 95% interval over sequences (``stats.intervals``) can be computed from the files alone.

Random tokens carry no meaning, so only an in-context mechanism can attend this way; a trained model has a few
heads with induction scores far above a random-weight model's, which attend near uniformly (about 1 / query
position). ``second_copy_loss`` / ``first_copy_loss`` (causal LMs) show the mechanism at work: the second copy is
predictable only by copying. Each sequence adds its ``[layer, head]`` sums (``interp.runtime.parallel.fold_items``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import may_be_nan
from analyses.registry import Fits, Help, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from analyses.units import Tables, Units
from interp.capabilities import Capability

if TYPE_CHECKING:
    pass



@no_grad
def previous_scores(model, ids: list[int]):
    """``[layer, head]`` mean attention from every token after the first to the one before it, on one text window."""
    import numpy as np
    import torch

    n = len(ids)
    rows = torch.arange(1, n)
    out = np.zeros((model.n_layers, model.n_heads))

    def reduce(layer):
        def hook(pattern, hook):
            p = pattern[0].float().cpu()  # [head, rows, keys]
            out[layer] = p[:, torch.arange(len(rows)), rows - 1].mean(-1).double().numpy()
        return hook

    with model.query_rows(rows), model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", reduce(l))
                                                        for l in range(model.n_layers)]):
        model.final_hidden(torch.tensor([ids], device=model.device))
    return out


@no_grad
def sequence_scores(model, ids: list[int], offset: int, half: int) -> dict:
    """One repeated sequence's ``[layer, head]`` induction and previous-token sums (and its copies' losses)."""
    import numpy as np
    import torch

    n = len(ids)
    rows = torch.arange(1, n)
    second = rows >= offset + half
    previous = torch.zeros(len(rows), n, dtype=torch.bool)
    previous[torch.arange(len(rows)), rows - 1] = True
    induct = torch.zeros(len(rows), n, dtype=torch.bool)
    induct[second.nonzero()[:, 0], rows[second] - half + 1] = True
    out = {k: np.zeros((model.n_layers, model.n_heads)) for k in ("induction", "previous")}

    def reduce(layer):
        def hook(pattern, hook):
            p = pattern[0].float().cpu()  # [head, rows, keys]
            out["induction"][layer] = (p * induct).sum(-1)[:, second].mean(-1).double().numpy()
            out["previous"][layer] = (p * previous).sum(-1).mean(-1).double().numpy()
        return hook

    tokens = torch.tensor([ids], device=model.device)
    with model.query_rows(rows), model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", reduce(l))
                                                        for l in range(model.n_layers)]):
        nll = None
        if Capability.CAUSAL_LM in model.capabilities:
            nll = model.token_losses(tokens)[0].cpu()
        else:
            model.final_hidden(tokens)
    if nll is not None:
        out["first_loss"] = np.array([[float(nll[offset: offset + half - 1].mean())]])
        out["second_loss"] = np.array([[float(nll[offset + half - 1:].mean())]])
    return out


def headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        best = g.loc[g["induction_score"].idxmax()]
        strong = int((g["induction_score"] >= 0.4).sum())
        loss = f"; loss {g['first_copy_loss'].iloc[0]:.2f} -> {g['second_copy_loss'].iloc[0]:.2f} nats on the repeat" \
            if g["second_copy_loss"].notna().any() else ""
        parts.append(f"{model}: {strong} of {len(g)} heads score >= 0.4, best L{best['layer']}H{best['head']} "
                     f"{best['induction_score']:.2f}{loss}")
    return "Induction heads: " + "; ".join(parts) + "."


def summary(df):
    return df.groupby("model", sort=False).agg(heads=("head", "size"), max_induction=("induction_score", "max"),
                                               heads_over_0_4=("induction_score", lambda s: int((s >= 0.4).sum())),
                                               max_previous_token=("previous_token_score", "max"),
                                               first_copy_loss=("first_copy_loss", "first"),
                                               second_copy_loss=("second_copy_loss", "first")).reset_index()


UNITS = Units("sequence", keys=("layer", "head"), measures={
    "induction": "the head's induction score on one repeated random sequence",
    "previous": "the head's previous-token score on one repeated random sequence",
    "wiki_previous": "the head's previous-token score on one Wikipedia window",
    "first_copy_loss": "one repeated sequence's mean next-token loss on its first copy (nats; no layer or head)",
    "second_copy_loss": "the same on its second copy"})


@analysis("induction", needs=[Capability.ATTENTION], headline=headline, summary=summary, units=UNITS,
          small=Run(("repo-small", "dstg-small"), dict(half=16, n_docs=1)),
          main=Run(DECODERS, dict(half=128, n_docs=4), quick=dict(half=32, n_docs=1), section=HEADS),
          real=Run(PRETRAINED, dict(half=256, n_docs=16, stage="judged"), quick=dict(half=32, n_docs=1), section=KNOWN),
          memory=Run(("rope-small",), dict(half=64)),
          builds_logits=False)
@may_be_nan(first_copy_loss="the model is not a causal LM", second_copy_loss="the model is not a causal LM",
            wiki_previous_token_score="the model was loaded without a tokenizer: no text to read")
def induction(model, *,
              half: Annotated[int, Help("random tokens in each of the two copies (default: 256, or what fits the "
                                        "model's context twice)"), Range(2),
                              Fits(times=2, margin=1, for_what="the start token")] = 256,
              n_docs: Annotated[int, Help("repeated sequences"), Range(1)] = 8,
              stage: STAGE = "any", seed: int = 0) -> Tables:
    """Per head the induction score (attention from a repeated token to the token after its first occurrence) and
    the previous-token score, on random tokens repeated twice, and the previous-token score on Wikipedia windows.

    One row per layer and head: ``induction_score``, ``previous_token_score``; per model the mean next-token loss
    on each copy; the unit-level values behind them (``UNITS``)."""
    import numpy as np
    import pandas as pd

    from analyses import units
    from corpora.contexts import analysis_windows
    from corpora.random_tokens import random_sequences, start_token
    from interp.runtime import parallel

    bos = start_token(model)
    prefix = [] if bos is None else [bos]
    seqs = [prefix + r + r for r in random_sequences(model, n_docs, half, seed, stage)]
    shape = (model.n_layers, model.n_heads)
    n = len(seqs)
    state = {k: np.zeros((n,) + shape) for k in ("induction", "previous", "wiki")}
    if Capability.CAUSAL_LM in model.capabilities:
        state |= {"first_loss": np.zeros(n), "second_loss": np.zeros(n)}
    # the windows begin with the start token already (corpora.contexts: doc_start=True), as a document does
    # a model loaded without a tokenizer has no text to read: its scores on text are NaN (may_be_nan)
    texts = [] if getattr(model, "tokenizer", None) is None else [
        list(w.ids) for w in analysis_windows(model, "induction", None, length=2 * half + len(prefix), n_docs=n_docs,
                                              seed=seed, stage=stage)]
    if prefix and any(t[:1] != prefix or t[1:2] == prefix for t in texts):
        raise ValueError(f"induction: a Wikipedia window of {model.model_name} does not begin with exactly one start "
                         f"token {prefix[0]}")
    items = [("repeat", ids) for ids in seqs] + [("wiki", ids) for ids in texts]

    def one(item):
        kind, ids = item
        if kind == "wiki":
            return {"wiki": previous_scores(model, ids)}
        return sequence_scores(model, ids, len(prefix), half)

    def add(state, i, stats):  # each unit in its own slot: the shares' states sum to every unit's values
        for k, v in stats.items():
            slot = i if k != "wiki" else i - n
            state[k][slot] += v.reshape(state[k][slot].shape)

    state = parallel.fold_items(one, items, state, add, model=model, desc=f"induction {model.model_name}")
    n_wiki = len(texts)
    state["wiki"] = state["wiki"][:n_wiki]
    layer, head = np.meshgrid(np.arange(model.n_layers), np.arange(model.n_heads), indexing="ij")
    causal = "first_loss" in state
    loss = {k: float(state[k].mean()) if causal else float("nan") for k in ("first_loss", "second_loss")}

    heads = {"layer": range(model.n_layers), "head": range(model.n_heads)}
    kept = [units.long(model.model_name, m, state[k], heads) for m, k in
            (("induction", "induction"), ("previous", "previous"), ("wiki_previous", "wiki")) if len(state[k])]
    kept += [units.long(model.model_name, m, state[k]) for m, k in
             (("first_copy_loss", "first_loss"), ("second_copy_loss", "second_loss")) if causal]
    table = pd.DataFrame(dict(model=model.model_name, layer=layer.ravel(), head=head.ravel(),
                             depth=layer.ravel() / max(1, model.n_layers - 1),
                             induction_score=state["induction"].mean(0).ravel(),
                             previous_token_score=state["previous"].mean(0).ravel(),
                             wiki_previous_token_score=(state["wiki"].mean(0).ravel() if n_wiki
                                                        else np.full(layer.size, np.nan)),
                             first_copy_loss=loss["first_loss"], second_copy_loss=loss["second_loss"],
                             half=half, n_docs=len(seqs), n_wiki=n_wiki, start_token=bos is not None))
    return Tables(table, units.frame(UNITS, kept))
