import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score

from corpora.contexts import wikipedia_windows
from probes.position import fit_position_probes
from probes.targets import position_targets
from tests.helpers import tiny_model


@pytest.fixture(scope="module")
def setup():
    model = tiny_model("per-layer", max_seq_len=256)
    docs = wikipedia_windows(model.tokenizer, 30, 256)
    return model, docs


def test_position_written_into_one_coordinate_gives_r2_near_one(setup):
    model, docs = setup

    def plant(t, hook):
        t = t.clone()
        t[..., 0] = torch.arange(t.shape[1], dtype=t.dtype)
        return t

    model.add_hook("blocks.1.hook_resid_post", plant)
    df = fit_position_probes(model, docs, n_seeds=2, n_train=24, n_test=6, layers=[0, 1])
    model.reset_hooks()
    r = df.set_index(["layer", "target", "control"])["r2_mean"]
    assert r[(1, "token", "none")] > 0.999
    assert abs(r[(1, "token", "shuffled")]) < 0.02
    assert r[(0, "token", "none")] < 0.9  # layer 0's output comes before the plant


def test_streaming_probe_equals_sklearn_on_the_same_rows(setup):
    model, docs = setup
    alpha = 10.0
    df = fit_position_probes(model, docs, n_seeds=1, n_train=24, n_test=6, alphas=[alpha], layers=[1], seed=3)
    # the same split, materialised
    order = np.random.default_rng([3, 0]).permutation(len(docs))
    train, test = order[:24], order[24:30]
    Xs, Ys = {}, {}
    for split, idx in (("train", train), ("test", test)):
        xs, ys = [], []
        for i in idx:
            _, cache = model.run_with_cache(torch.tensor([docs[i].ids]), names_filter="blocks.1.hook_resid_post")
            rows, Y = position_targets(docs[i].text, docs[i].spans)
            xs.append(cache["blocks.1.hook_resid_post"][0, rows].double().numpy())
            ys.append(Y)
        Xs[split], Ys[split] = np.concatenate(xs), np.concatenate(ys)
    ref = Ridge(alpha=alpha).fit(Xs["train"], Ys["train"])
    pred = ref.predict(Xs["test"])
    got = df[df.control == "none"].set_index("target")["r2_mean"]
    for t, name in enumerate(("token", "segment", "intra")):
        assert got[name] == pytest.approx(r2_score(Ys["test"][:, t], pred[:, t]), abs=1e-6)


def test_bad_arguments(setup):
    model, docs = setup
    with pytest.raises(ValueError, match="no subspace 'ap'"):
        fit_position_probes(model, docs, subspaces=["ap"])
    with pytest.raises(ValueError, match="n_train \\+ n_test"):
        fit_position_probes(model, docs, n_train=30, n_test=5)
