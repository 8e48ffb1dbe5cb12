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

Inputs: the built-in Wikipedia documents (seeded), or the user's ``documents=`` (strings or
``corpora.user.Document``; ``--input PATH``) or ``token_ids=`` (lists of ids, read as given). A user
document longer than ``max_tokens`` is split into consecutive windows of at most ``max_tokens`` tokens,
each opening with the document-start token (encoders: wrapped in [CLS] ... [SEP]); each window counts as
one document in the averages (``n_docs`` is then the number of windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from interp.progress import progress
from analyses.tables import may_be_nan
from interp.base import Capability, require

COMPONENTS = ("ap", "sem", "rp")
GROUPS = ("AP-oriented", "semantic-oriented", "RP-supported", "RP-oriented")


def kl_per_head(components: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{c: [head]}`` mean over query rows of KL(softmax(sum) || softmax(sum - c)); inputs ``[head, q, k]``.

    Keys masked in the sum (-inf) stay masked after removing a component and contribute 0 log 0 = 0; any other
    NaN (from NaN weights or hooks) stays NaN, never becoming a KL of 0."""
    total = sum(components.values())
    logp = torch.log_softmax(total.double(), -1)
    p = logp.exp()
    out = {}
    for name, comp in components.items():
        ablated = torch.where(torch.isneginf(total), float("-inf"), total.double() - comp.double())  # masked stays masked
        logq = torch.log_softmax(ablated, -1)
        kl = torch.where(p == 0, 0.0, p * (logp - logq)).sum(-1)  # 0 log 0 = 0 for masked keys; NaN stays NaN
        out[name] = kl.mean(-1).float()
    return out


def group_of(ap: float, sem: float, rp: float, rp_support: float) -> str:
    if ap >= sem and ap >= rp:
        return "AP-oriented"
    if rp > sem:
        return "RP-oriented"
    return "RP-supported" if rp >= rp_support else "semantic-oriented"


@may_be_nan(**{f"influence_{c}": "undefined: removing no component changes this head (all KL 0; group 'none')" for c in COMPONENTS})
@torch.no_grad()
def kl_ablation(model, *, n_docs: int = 500, max_tokens: int = 512, rp_support: float = 0.25, seed: int = 0, docs=None,
                documents=None, token_ids=None) -> pd.DataFrame:
    """Per head: mean KL for removing each component, influences, and the taxonomy group."""
    from probes.position import ProbeDoc, probe_documents

    require(model, Capability.LOGIT_COMPONENTS, "kl-ablation")
    present = list(model.logit_components())
    if sum(x is not None for x in (docs, documents, token_ids)) > 1:
        raise ValueError("give one of docs=, documents= and token_ids=")
    if documents is not None:
        from corpora.user import as_documents, token_windows

        if max_tokens > model.max_seq_len:
            raise ValueError(f"--max-tokens={max_tokens} is longer than {model.model_name} allows (max_seq_len={model.max_seq_len})")
        docs = token_windows(model.require_tokenizer("kl-ablation"), as_documents(documents), max_tokens)
    elif token_ids is not None:
        docs = [ProbeDoc("", [int(i) for i in ids], []) for ids in token_ids]
        for i, d in enumerate(docs):
            if not 0 < len(d.ids) <= model.max_seq_len:
                raise ValueError(f"token_ids[{i}] has {len(d.ids)} tokens; {model.model_name} takes 1 to {model.max_seq_len}")
    if docs is None:
        docs = probe_documents(model.require_tokenizer("kl-ablation"), n_docs, min(max_tokens, model.max_seq_len), seed=seed)
    if len(docs) == 0:
        raise ValueError("kl-ablation needs at least one document")
    sums = {c: torch.zeros(model.n_layers, model.n_heads) for c in present}
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
                    raise ValueError(f"kl-ablation: blocks.{layer}.attn.hook_logits_{c} of {model.model_name} holds NaN "
                                     f"(heads {torch.isnan(t).flatten(1).any(1).nonzero().flatten().tolist()}); a KL computed "
                                     "from it would be meaningless (check the weights and any attached hooks)")
            for name, kl in kl_per_head(comps).items():
                if not torch.isfinite(kl).all():
                    raise ValueError(f"kl-ablation: removing '{name}' in layer {layer} of {model.model_name} gives a "
                                     f"non-finite KL for heads {(~torch.isfinite(kl)).nonzero().flatten().tolist()} "
                                     "(a component is infinite where the full attention is not)")
                sums[name][layer] += kl.cpu()
        return hook

    hooks = [(f"blocks.{l}.attn.hook_logits_{c}", keep(c)) for l in range(model.n_layers) for c in present]
    hooks += [(f"blocks.{l}.attn.hook_attn_scores", reduce(l)) for l in range(model.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        for doc in progress(docs, f"kl-ablation {model.model_name}"):
            model(torch.tensor([doc.ids], device=model.device))
    rows = []
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            kl = {c: float(sums[c][layer, head]) / len(docs) if c in present else 0.0 for c in COMPONENTS}
            total = sum(kl.values())
            infl = {c: kl[c] / total if total > 0 else float("nan") for c in COMPONENTS}
            rows.append(dict(model=model.model_name, layer=layer, head=head, **{f"kl_{c}": kl[c] for c in COMPONENTS},
                             **{f"influence_{c}": infl[c] for c in COMPONENTS},
                             group=group_of(infl["ap"], infl["sem"], infl["rp"], rp_support) if total > 0 else "none",
                             components="+".join(present), n_docs=len(docs), rp_support=rp_support))
    return pd.DataFrame(rows)


@may_be_nan(**{f"influence_{c}": "undefined: removing no component changes this head (all KL 0; group 'none')" for c in COMPONENTS})
def compare_heads(model, **kwargs) -> pd.DataFrame:
    """``kl_ablation`` rows, for the side-by-side view of several models' taxonomies."""
    return kl_ablation(model, **kwargs)


def group_counts(df: pd.DataFrame) -> pd.DataFrame:
    counts = df.groupby(["model", "group"]).size().unstack(fill_value=0)
    for g in GROUPS:
        if g not in counts:
            counts[g] = 0
    return counts[list(GROUPS)]
