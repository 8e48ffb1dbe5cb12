import numpy as np
import pytest

from analyses.char_spacing import char_spacing
from interp.base import InputError
from interp.tokenizers import TokenizerError
from tests.helpers import tiny_model
from tests.planting import planted_increments


def test_planted_increments_place_characters_at_their_cumulative_positions():
    text = "ab 中"
    planted = [5.0, 1.0, 2.0, 4.0, 0.5, 0.25, 0.25]  # EOS, a, b, space, 3 bytes of 中
    model = tiny_model("per-layer")
    with planted_increments(model, "blocks.0.hook_delta", lambda ids: planted):
        df = char_spacing(model, documents={"t": text})
    raw = np.array([1.0, 2.0, 4.0, 1.0])  # EOS dropped, the Chinese character sums its three bytes
    rows = df[(df.layer == "L0") & (df.scale == "per-row")]
    np.testing.assert_allclose(rows["increment"], raw)
    np.testing.assert_allclose(rows["scaled"], raw / raw.mean())
    np.testing.assert_allclose(rows["position"], np.cumsum(raw / raw.mean()) - raw[0] / raw.mean())
    shared = df[df.scale == "shared"]
    assert shared["divisor"].nunique() == 1  # one scale for every layer
    assert list(rows["char"]) == list(text)


@pytest.mark.parametrize("text, message", [("", "is empty"), ("ab\udcffc", "not valid UTF-8")])
def test_bad_text(text, message):
    with pytest.raises((TokenizerError, InputError), match=message):
        char_spacing(tiny_model("per-layer"), documents={"x": text})


def test_text_longer_than_the_context():
    with pytest.raises(ValueError, match="longer than"):
        char_spacing(tiny_model("per-layer"), documents={"x": "a" * 100})


def test_two_character_text_is_fine():
    df = char_spacing(tiny_model("per-layer"), documents={"x": "ab"}, scales=("per-row",))
    assert list(df[df.layer == "L0"]["char"]) == ["a", "b"]
