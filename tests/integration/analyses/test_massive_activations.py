"""Planted truth for massive-activations: an activation written into a tiny model's residual stream at the first
token, in one dimension, is found at that position and dimension, with the ratio to the median it was given; without
the plant the largest activation is ordinary."""

import numpy as np
import pytest

from analyses.massive_activations import massive_activations
from tests.repo_helpers import tiny_repo

DIM, SIZE = 7, 5000.0


@pytest.fixture
def model():
    return tiny_repo("rope")  # bytes, causal, with a start token: 3 layers


def _plant(model, layer):
    def hook(resid, hook):
        resid[:, 0, DIM] = SIZE
        return resid
    return model.add_hook(f"blocks.{layer}.hook_resid_post", hook)


def test_a_planted_massive_activation_is_found_at_the_first_token_and_its_dimension(model):
    _plant(model, 1)
    df = massive_activations(model, length=32, n_docs=3, top_k=2)
    assert set(df["start_token"]) == {True, False} and len(df) == 2 * 3 * model.n_layers * 2
    top = df[(df["rank"] == 1) & (df["layer"] == 1)]
    assert (top["position"] == 0).all() and (top["dim"] == DIM).all() and top["first_token"].all()
    assert top["magnitude"].to_numpy() == pytest.approx(SIZE)
    assert (top["ratio"] == top["magnitude"] / top["median"]).all() and (top["ratio"] > 1e3).all()
    # layer 0 has no plant: its largest activation is within a few hundred times its median
    assert (df[(df["rank"] == 1) & (df["layer"] == 0)]["ratio"] < 1e3).all()
    # ranks are ordered and the median is the layer's, the same at every rank
    for _, g in df.groupby(["start_token", "layer", "sequence"]):
        assert np.all(np.diff(g.sort_values("rank")["magnitude"].to_numpy()) <= 0)
        assert g["median"].nunique() == 1


def test_the_median_is_over_every_position_and_dimension(model):
    seen = {}

    def grab(resid, hook):
        seen["x"] = resid[0].detach().abs().double()
        return resid
    model.add_hook("blocks.2.hook_resid_post", grab)
    df = massive_activations(model, length=16, n_docs=1, top_k=1, documents=["The quick fox."])
    row = df[(df["layer"] == 2) & df["start_token"]].iloc[0]  # the last pass: the start-token condition
    assert row["median"] == pytest.approx(float(seen["x"].flatten().median()))
    assert row["magnitude"] == pytest.approx(float(seen["x"].max()))
