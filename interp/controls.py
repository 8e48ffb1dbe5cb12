"""Controls for claims about trained models: the same architecture without what training put in its weights.

``shuffled_weights(model, seed)`` is a copy whose every floating-point tensor has its entries permuted at random
(seeded): each tensor keeps its values, so norms, scales and the spread of logits stay those of the trained model,
while every learned arrangement (a head that attends to the previous token, a sink, an induction circuit) is gone.
It is the "same architecture with random weights" control; ``source['control']`` records it for provenance.
"""

from __future__ import annotations

import copy

import torch


@torch.no_grad()
def shuffled_weights(model, seed: int = 0):
    """A copy of ``model`` with each floating-point parameter's entries randomly permuted (see the module)."""
    out = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    seen = set()
    for p in out.parameters():
        if id(p) in seen or not p.is_floating_point():
            continue
        seen.add(id(p))  # tied weights are permuted once, and stay tied
        flat = p.data.reshape(-1)
        flat.copy_(flat[torch.randperm(flat.numel(), generator=g).to(flat.device)])
    out.model_name = f"{model.model_name} (shuffled weights)"
    out.source = dict(getattr(model, "source", {}), control=f"every weight tensor's entries permuted, seed {seed}")
    from interp.fingerprint import weights_sha256

    out.source["weights_sha256"] = weights_sha256(out)
    return out.eval()
