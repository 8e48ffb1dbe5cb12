"""KL ablation on real encoders: planted heads and an independent recomputation from the components."""

import numpy as np
import pytest
import torch
from scipy.special import softmax
from scipy.stats import entropy

from analyses.kl_ablation import kl_ablation
from corpora.documents import Window
from tests.encoder_helpers import tiny_encoder, token_ids


def _docs(model, n=3, length=20):
    return [Window("", token_ids(model, 1, length, seed=s)[0].tolist()) for s in range(n)]


def test_a_head_reading_only_ap_logits_has_influence_one_zero_zero():
    model = tiny_encoder("disentangled")

    def only_ap(name):
        def hook(t, hook):
            t = t.clone()
            t[:, 2] = 0.0  # layer-1 head 2: no semantic and no RP logit
            return t
        return hook

    model.add_hook("blocks.1.attn.hook_logits_sem", only_ap("sem"))
    model.add_hook("blocks.1.attn.hook_logits_rp", only_ap("rp"))
    df = kl_ablation(model, documents=_docs(model)).set_index(["layer", "head"])
    model.reset_hooks()
    row = df.loc[(1, 2)]
    assert (row.influence_ap, row.influence_sem, row.influence_rp) == pytest.approx((1.0, 0.0, 0.0), abs=1e-9)
    assert row.group == "AP-oriented"
    other = df.loc[(1, 1)]
    assert other.influence_sem > 0 and other.influence_rp > 0


def test_kl_values_match_scipy_on_the_cached_components():
    model = tiny_encoder("disentangled")
    docs = _docs(model, n=2)
    df = kl_ablation(model, documents=docs).set_index(["layer", "head"])
    expected = {c: np.zeros((2, 4)) for c in ("ap", "sem", "rp")}
    for doc in docs:
        _, cache = model.run_with_cache(torch.tensor([doc.ids]), names_filter=lambda n: "hook_logits_" in n)
        for layer in range(2):
            comps = {c: cache[f"blocks.{layer}.attn.hook_logits_{c}"][0].double().numpy() for c in expected}
            total = sum(comps.values())
            p = softmax(total, -1)
            for c, comp in comps.items():
                q = softmax(total - comp, -1)
                expected[c][layer] += np.array([[entropy(p[h, r], q[h, r]) for r in range(p.shape[1])]
                                                for h in range(4)]).mean(1)
    for c in expected:
        got = np.array([[df.loc[(l, h), f"kl_{c}"] for h in range(4)] for l in range(2)])
        np.testing.assert_allclose(got, expected[c] / len(docs), rtol=1e-4, atol=1e-9)


def test_rp_baseline_has_two_components_and_others_are_refused():
    model = tiny_encoder("rp")
    df = kl_ablation(model, documents=_docs(model, 1))
    assert (df["kl_ap"] == 0).all() and (df["components"] == "sem+rp").all()
    assert np.allclose(df["influence_sem"] + df["influence_rp"], 1.0)
    with pytest.raises(TypeError, match="decomposable attention logits"):
        kl_ablation(tiny_encoder("rope"), documents=[])
