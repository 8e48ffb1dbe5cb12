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
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from interp import parallel
from interp.base import Capability, require

COMPONENTS = ("ap", "sem", "rp")
GROUPS = ("AP-oriented", "semantic-oriented", "RP-supported", "RP-oriented")


def kl_per_head(components: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{c: [head]}`` mean over query rows of KL(softmax(sum) || softmax(sum - c)); inputs ``[head, q, k]``."""
    total = sum(components.values())
    logp = torch.log_softmax(total.double(), -1)
    p = logp.exp()
    out = {}
    for name, comp in components.items():
        logq = torch.log_softmax((total - comp).double(), -1)
        kl = (p * (logp - logq)).nan_to_num(0.0).sum(-1)  # 0 log 0 = 0 for masked keys
        out[name] = kl.mean(-1).float()
    return out


def group_of(ap: float, sem: float, rp: float, rp_support: float) -> str:
    if ap >= sem and ap >= rp:
        return "AP-oriented"
    if rp > sem:
        return "RP-oriented"
    return "RP-supported" if rp >= rp_support else "semantic-oriented"


@torch.no_grad()
def kl_ablation(model, *, n_docs: int = 500, max_tokens: int = 512, rp_support: float = 0.25, seed: int = 0, docs=None) -> pd.DataFrame:
    """Per head: mean KL for removing each component, influences, and the taxonomy group."""
    from probes.position import probe_documents

    require(model, Capability.LOGIT_COMPONENTS, "kl-ablation")
    present = list(model.logit_components())
    if docs is None:
        docs = probe_documents(model.require_tokenizer("kl-ablation"), n_docs, min(max_tokens, model.max_seq_len), seed=seed)
    if len(docs) == 0:
        raise ValueError("kl-ablation needs at least one document")
    current: dict[str, torch.Tensor] = {}
    held: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(t, hook):
            held[name] = t[0].detach()
        return hook

    def reduce(layer):
        def hook(scores, hook):
            for name, kl in kl_per_head({c: held.pop(c) for c in present}).items():
                current[name][layer] = kl.cpu()
        return hook

    def one(doc):
        current.update({c: torch.zeros(model.n_layers, model.n_heads) for c in present})
        model(torch.tensor([doc.ids], device=model.device))
        return {c: current[c].clone() for c in present}

    hooks = [(f"blocks.{l}.attn.hook_logits_{c}", keep(c)) for l in range(model.n_layers) for c in present]
    hooks += [(f"blocks.{l}.attn.hook_attn_scores", reduce(l)) for l in range(model.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        per_doc = parallel.map_items(one, docs, model=model, desc=f"kl-ablation {model.model_name}")
    sums = {c: torch.zeros(model.n_layers, model.n_heads) for c in present}
    for kls in per_doc:
        for c in present:
            sums[c] += kls[c]
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


def compare_heads(model, **kwargs) -> pd.DataFrame:
    """``kl_ablation`` rows, for the side-by-side view of several models' taxonomies."""
    return kl_ablation(model, **kwargs)


def group_counts(df: pd.DataFrame) -> pd.DataFrame:
    counts = df.groupby(["model", "group"]).size().unstack(fill_value=0)
    for g in GROUPS:
        if g not in counts:
            counts[g] = 0
    return counts[list(GROUPS)]
