import math

import pytest
import torch

from analyses.byte_increments import byte_increments
from tests.helpers import tiny_model


def test_hand_set_weights_make_delta_large_exactly_at_spaces():
    model = tiny_model("shared")
    with torch.no_grad():
        emb = model.tok_emb.weight
        emb.zero_()
        emb[32, 0] = 1.0  # only the space has a non-zero first coordinate
        mlp = model.delta_mlp
        mlp.fc1.weight.zero_()
        mlp.fc1.bias.zero_()
        mlp.fc1.weight[0, 0] = 10.0
        mlp.fc2.weight.zero_()
        mlp.fc2.weight[0, 0] = 0.5
        mlp.fc2.bias.fill_(0.5413)
    df = byte_increments(model).set_index("category")
    high = math.log1p(math.exp(0.5413 + 0.5 * 10.0))  # softplus(bias + 0.5 * gelu(10))
    assert df.loc["Space", "mean"] == pytest.approx(high, rel=1e-5)
    others = df.drop(index="Space")
    assert others["max"].max() == pytest.approx(1.0, abs=1e-3) and others["min"].min() == pytest.approx(1.0, abs=1e-3)
    assert list(df["n_ids"]) == [26, 26, 10, 6, 64, 1, 3, 4, 1, 1]


def test_per_layer_model_reports_layer_zero():
    assert set(byte_increments(tiny_model("per-layer"))["source"]) == {"L0"}


def test_rope_model_is_refused():
    with pytest.raises(TypeError, match="learned increments"):
        byte_increments(tiny_model("rope"))
