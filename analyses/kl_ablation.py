"""Which logit component does each head rely on? KL ablation and the head taxonomy (seed 002).

For every head and every query row, the full attention distribution p = softmax(ap + sem + rp) is
compared with the distribution q_c obtained by removing one component c before the softmax:
KL(p || q_c) = sum_k p log(p / q_c). KLs are averaged over the rows of a document, then over documents
(the seed uses 500 WikiText documents; here English Wikipedia lead sections), giving a 3-vector per head,
normalised per head into influences that sum to 1.

Taxonomy (rule, applied to influences ap, sem, rp; a component a model lacks counts 0):
- ``AP-oriented``: ap is the largest;
- ``RP-oriented``: rp is the largest (the seed found none);
- ``RP-supported``: sem is the largest and rp >= ``rp_support`` (0.25);
- ``semantic-oriented``: sem is the largest and rp < ``rp_support``.
One layer's components ``[head, q, k]`` are held at a time.

Inputs: the built-in Wikipedia documents (seeded), or the user's ``documents=``: texts (strings or
``corpora.documents.Document``; ``--input PATH``) or token ids (``Window``s or lists of ids, read as given). A user
document longer than ``length`` is split into consecutive windows of at most ``length`` tokens,
each opening with the document-start token (encoders: wrapped in [CLS] ... [SEP]); each window counts as
one document in the averages (``n_docs`` is then the number of windows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import may_be_nan
from analyses.registry import Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DSTG, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd
    import torch

COMPONENTS = ("ap", "sem", "rp")
GROUPS = ("AP-oriented", "semantic-oriented", "RP-supported", "RP-oriented")
RP_SUPPORT = 0.25


def kl_per_head(components: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{c: [head]}`` mean over query rows of KL(softmax(sum) || softmax(sum - c)); inputs ``[head, q, k]``.

    Keys masked in the sum (-inf) stay masked after removing a component and contribute 0 log 0 = 0; any other
    NaN (from NaN weights or hooks) stays NaN, never becoming a KL of 0."""
    import torch

    total = sum(components.values())
    whole, masked = total.double(), torch.isneginf(total)  # each computed once for every component
    logp = torch.log_softmax(whole, -1)
    p = logp.exp()
    absent = p == 0
    out = {}
    for name, comp in components.items():
        # masked stays masked
        ablated = torch.where(masked, float("-inf"), whole - comp.double())
        logq = torch.log_softmax(ablated, -1)
        kl = torch.where(absent, 0.0, p * (logp - logq)).sum(-1)  # 0 log 0 = 0 for masked keys; NaN stays NaN
        out[name] = kl.mean(-1).float()
    return out


@no_grad
def document_kls(model, ids: list[int], present: list[str]) -> dict[str, torch.Tensor]:
    """``{c: [layer, head]}`` of one document: ``kl_per_head`` for removing component c, every query row read."""
    import torch

    current = {c: torch.zeros(model.n_layers, model.n_heads) for c in present}
    held: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(t, hook):
            held[name] = t[0].detach()
        return hook

    def reduce(layer):
        def hook(scores, hook):
            comps = {c: held.pop(c) for c in present}
            for c, t in comps.items():
                if torch.isnan(t).any():
                    raise ValueError(f"kl-ablation: blocks.{layer}.attn.hook_logits_{c} of {model.model_name} holds "
                                     f"NaN (heads {torch.isnan(t).flatten(1).any(1).nonzero().flatten().tolist()}); "
                                     "a KL computed from it would be meaningless (check the weights and any attached "
                                     "hooks)")
            for name, kl in kl_per_head(comps).items():
                if not torch.isfinite(kl).all():
                    raise ValueError(f"kl-ablation: removing '{name}' in layer {layer} of {model.model_name} gives a "
                                     f"non-finite KL for heads {(~torch.isfinite(kl)).nonzero().flatten().tolist()} "
                                     "(a component is infinite where the full attention is not)")
                current[name][layer] = kl.cpu()
        return hook

    hooks = [(f"blocks.{l}.attn.hook_logits_{c}", keep(c)) for l in range(model.n_layers) for c in present]
    hooks += [(f"blocks.{l}.attn.hook_attn_scores", reduce(l)) for l in range(model.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        model(torch.tensor([ids], device=model.device))
    return current


def kl_table(model, sums, n_docs: int, rp_support: float) -> pd.DataFrame:
    """One row per head from per-head KLs summed over ``n_docs`` documents (``sums``: ``{c: [layer, head]}``, the
    components the model has): mean KLs, influences and taxonomy group."""
    import pandas as pd

    present = list(sums)
    rows = []
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            kl = {c: float(sums[c][layer, head]) / n_docs if c in present else 0.0 for c in COMPONENTS}
            total = sum(kl.values())
            infl = {c: kl[c] / total if total > 0 else float("nan") for c in COMPONENTS}
            rows.append(dict(model=model.model_name, layer=layer, head=head, **{f"kl_{c}": kl[c] for c in COMPONENTS},
                             **{f"influence_{c}": infl[c] for c in COMPONENTS},
                             group=group_of(infl["ap"], infl["sem"], infl["rp"], rp_support) if total > 0 else "none",
                             components="+".join(present), n_docs=n_docs, rp_support=rp_support))
    return pd.DataFrame(rows)


def group_of(ap: float, sem: float, rp: float, rp_support: float) -> str:
    if ap >= sem and ap >= rp:
        return "AP-oriented"
    if rp > sem:
        return "RP-oriented"
    return "RP-supported" if rp >= rp_support else "semantic-oriented"


def headline(df) -> str:
    counts = group_counts(df)
    return "Head groups: " + "; ".join(
        f"{m}: " + ", ".join(f"{int(n)} {g}" for g, n in row.items() if n) for m, row in counts.iterrows()) + "."


def summary(df):
    return group_counts(df).reset_index()


@analysis("kl-ablation", needs=[Capability.LOGIT_COMPONENTS], headline=headline, summary=summary,
          small=Run(("dstg-small",), dict(n_docs=2, length=48)),
          main=Run(("dstg-small",), dict(n_docs=100), quick=dict(n_docs=4), section=DSTG),
          memory=Run(("dstg-small",), dict(length=128)))
@may_be_nan(**{f"influence_{c}": "undefined: removing no component changes this head (all KL 0; group 'none')"
               for c in COMPONENTS})
def kl_ablation(model, *,
                n_docs: Annotated[int, Help("documents (English Wikipedia leads joined up to the input length)"),
                                  Range(1), NotWith()] = 500,
                length: Annotated[int, Help("tokens per document"), Range(2), Fits()] = 512,
                rp_support: Annotated[float, Help("RP influence from which a semantic head counts as RP-supported"),
                                      Range(0, 1)] = RP_SUPPORT,
                seed: int = 0, documents=None) -> pd.DataFrame:
    """For each head, the KL divergence between its attention and the attention with one logit component (AP,
    semantic, relative bias) removed, normalised into an influence vector (ternary plot), and the head taxonomy
    it implies (AP-oriented, semantic-oriented, RP-supported).

    Per head: mean KL for removing each component, influences, and the taxonomy group."""
    import torch

    from corpora.contexts import analysis_windows
    from interp.runtime import parallel

    present = list(model.logit_components())
    docs = analysis_windows(model, "kl-ablation", documents, length=length, n_docs=n_docs, seed=seed)
    if len(docs) == 0:
        raise ValueError("kl-ablation needs at least one document")
    per_doc = parallel.map_items(lambda doc: document_kls(model, doc.ids, present), docs, model=model,
                                 desc=f"kl-ablation {model.model_name}")
    sums = {c: torch.zeros(model.n_layers, model.n_heads) for c in present}
    for kls in per_doc:
        for c in present:
            sums[c] += kls[c]
    return kl_table(model, sums, len(docs), rp_support)


@analysis("compare-heads", needs=[Capability.LOGIT_COMPONENTS], like=kl_ablation, headline=headline, summary=summary,
          small=Run(("dstg-small", "rp-encoder-small"), dict(n_docs=2, length=48)),
          main=Run(("dstg-small", "rp-encoder-small"), dict(n_docs=50), quick=dict(n_docs=4), section=DSTG),
          memory=Run(("dstg-small",), dict(length=128)))
@may_be_nan(**{f"influence_{c}": "undefined: removing no component changes this head (all KL 0; group 'none')"
               for c in COMPONENTS})
def compare_heads(model, **kwargs) -> pd.DataFrame:
    """The KL-ablation taxonomies of several models side by side, with the number of heads in each group.

    ``kl_ablation`` rows, for the side-by-side view of several models' taxonomies."""
    return kl_ablation(model, **kwargs)


def group_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Heads per (model, taxonomy group)."""
    counts = df.groupby(["model", "group"]).size().unstack(fill_value=0)
    for g in GROUPS:
        if g not in counts:
            counts[g] = 0
    return counts[list(GROUPS)]
