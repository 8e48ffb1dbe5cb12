import math

import pytest
import torch

from interp import rope


def test_interleaved_rotates_consecutive_pairs_by_position_times_frequency():
    x = torch.zeros(1, 1, 1, 4)
    x[..., 0] = 1.0  # unit vector in pair (0, 1)
    x[..., 2] = 1.0  # unit vector in pair (2, 3)
    out = rope.rotate_interleaved(x, torch.tensor([[3.0]]), theta=100.0)[0, 0, 0]
    f0, f1 = 1.0, 100.0 ** (-2 / 4)
    assert out[0].item() == pytest.approx(math.cos(3 * f0), abs=1e-6)
    assert out[1].item() == pytest.approx(math.sin(3 * f0), abs=1e-6)
    assert out[2].item() == pytest.approx(math.cos(3 * f1), abs=1e-6)
    assert out[3].item() == pytest.approx(math.sin(3 * f1), abs=1e-6)


def test_half_split_pairs_dim_i_with_dim_i_plus_half():
    x = torch.zeros(1, 1, 1, 4)
    x[..., 1] = 1.0  # second frequency, first half
    out = rope.rotate_half_split(x, torch.tensor([[2.0]]), theta=100.0)[0, 0, 0]
    f1 = 100.0 ** (-2 / 4)
    assert out[1].item() == pytest.approx(math.cos(2 * f1), abs=1e-6)
    assert out[3].item() == pytest.approx(math.sin(2 * f1), abs=1e-6)
    assert out[0].item() == pytest.approx(0.0, abs=1e-6) and out[2].item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("fn", [rope.rotate_interleaved, rope.rotate_half_split])
def test_scores_depend_only_on_position_difference(fn):
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    def score(pq, pk):
        return (fn(q, torch.tensor([[pq]]), 10000.0) * fn(k, torch.tensor([[pk]]), 10000.0)).sum().item()
    assert score(7.25, 2.0) == pytest.approx(score(105.25, 100.0), abs=1e-4)
    assert score(7.25, 2.0) != pytest.approx(score(8.25, 2.0), abs=1e-4)


def test_per_head_positions_rotate_each_head_by_its_own_position():
    x = torch.randn(2, 5, 3, 8)
    pos = torch.rand(2, 3, 5) * 50  # [batch, head, pos]
    out = rope.rotate_interleaved(x, pos, 10000.0)
    for h in range(3):
        alone = rope.rotate_interleaved(x[:, :, h : h + 1], pos[:, h], 10000.0)
        torch.testing.assert_close(out[:, :, h : h + 1], alone)


def test_bad_position_shape_is_named():
    with pytest.raises(ValueError, match="positions must be"):
        rope.rotate_interleaved(torch.randn(1, 2, 1, 4), torch.zeros(2), 10000.0)


@pytest.mark.parametrize("scaling", [None, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cached_integer_positions_give_the_bits_of_per_head_positions(scaling, dtype):
    x = torch.randn(2, 7, 3, 16).to(dtype)
    for start in (0, 5, 300):  # 300 grows the table past its first size
        pos = torch.arange(start, start + 7, dtype=torch.float32).expand(2, 3, 7)
        want = rope.rotate_half_split(x, pos, 500.0, scaling)
        got = rope.rotate_half_split_range(x, start, 500.0, scaling)
        assert got.dtype == dtype and torch.equal(got, want)
    assert not torch.equal(rope.rotate_half_split_range(x, 0, 500.0, scaling),
                           rope.rotate_half_split_range(x, 0, 50.0, scaling))
