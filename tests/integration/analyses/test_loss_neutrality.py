import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from analyses.loss_neutrality import loss_neutrality, window_losses
from tests.helpers import tiny_model


def test_window_losses_equal_plain_cross_entropy():
    model = tiny_model("shared")
    windows = np.random.default_rng(0).integers(0, 257, (5, 20))
    direct = [F.cross_entropy(model(torch.tensor(w[None, :-1]))[0], torch.tensor(w[1:])).item() for w in windows]
    np.testing.assert_allclose(window_losses(model, windows, batch_size=2), direct, rtol=1e-5)


def test_uniform_logits_give_log_vocabulary():
    model = tiny_model("rope", max_seq_len=128)
    model.add_hook("hook_final", lambda t, hook: torch.zeros_like(t))
    df = loss_neutrality(model, n_docs=4, length=64, n_boot=20).set_index("language")
    model.reset_hooks()
    assert df.loc["all", "loss"] == pytest.approx(math.log(257), rel=1e-5)
    assert df.loc["all", "bits_per_byte"] == pytest.approx(math.log2(257), rel=1e-5)
    assert set(df.index) == {"en", "zh", "all"}
