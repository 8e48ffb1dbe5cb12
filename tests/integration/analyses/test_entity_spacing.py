import numpy as np
import pytest
from scipy.stats import wilcoxon

from analyses.entity_spacing import (
    CARRIERS,
    INVENTED_NAMES,
    REAL_ENTITIES,
    entity_spacing,
    internal_space_increments,
    space_offset,
)
from tests.helpers import tiny_model
from tests.planting import planted_increments


def test_entity_lists():
    assert len(REAL_ENTITIES) >= 60 and len(INVENTED_NAMES) >= 30
    assert len(set(REAL_ENTITIES)) == len(REAL_ENTITIES)
    for a, b in REAL_ENTITIES + INVENTED_NAMES:
        assert a.isascii() and b.isascii() and a[0].isupper() and b[0].isupper() and " " not in a + b
    assert len(CARRIERS) == 5


def test_space_offset_points_at_the_internal_space():
    ids = [256, *"they went to New York".encode()]
    assert ids[space_offset("they went to {a} {b}", "New", "York")] == ord(" ")
    assert space_offset("{a} {b}", "New", "York") == 4


def _plant(real_pairs, real_value, reversed_value):
    """Planted δ at the internal space: depends on whether the two words are a real pair, in which order."""
    lookup = {}
    for i, (a, b) in enumerate(real_pairs):
        lookup[(a, b)] = real_value(i)
        lookup[(b, a)] = reversed_value(i)

    def plant(ids):
        text = bytes(ids[1:]).decode()
        values = np.ones(len(ids))
        for (a, b), v in lookup.items():
            for carrier in CARRIERS:
                if text == carrier.format(a=a, b=b):
                    values[space_offset(carrier, a, b)] = v
        return values

    return plant


def test_planted_closer_real_order_is_recovered_and_matches_scipy():
    pairs = REAL_ENTITIES[:20]
    rng = np.random.default_rng(0)
    real = rng.uniform(0.3, 0.9, len(pairs))
    rev = real + rng.uniform(-0.2, 1.0, len(pairs))
    model = tiny_model("per-layer")
    with planted_increments(model, "blocks.1.hook_delta", _plant(pairs, lambda i: real[i], lambda i: rev[i])):
        df = entity_spacing(model, real=pairs, invented=INVENTED_NAMES[:10])
    r = df.set_index(["set", "layer"])
    expected = wilcoxon(rev - real)
    assert r.loc[("real", "L1"), "p_value"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert r.loc[("real", "L1"), "mean_real"] == pytest.approx(real.mean())
    assert r.loc[("real", "L1"), "mean_reversed"] == pytest.approx(rev.mean())
    assert r.loc[("real", "L1"), "frac_real_smaller"] == pytest.approx((real < rev).mean())
    # invented names get no planted difference; layer 0 reads byte identity: both orders are identical
    assert r.loc[("invented", "L1"), "p_value"] == 1.0 and r.loc[("invented", "L1"), "frac_real_smaller"] == 0.0
    assert r.loc[("real", "L0"), "p_value"] == 1.0 \
        and r.loc[("real", "L0"), "mean_real"] == r.loc[("real", "L0"), "mean_reversed"]
    assert set(df.columns) >= {"layer", "mean_real", "mean_reversed", "frac_real_smaller", "p_value", "n_pairs"}


def test_shared_model_cannot_tell_the_orders_apart():
    df = entity_spacing(tiny_model("shared"), real=REAL_ENTITIES[:12], invented=())
    assert list(df["p_value"]) == [1.0] and list(df["frac_real_smaller"]) == [0.0]


def test_batched_values_equal_one_sentence_at_a_time():
    model = tiny_model("per-layer")
    pairs = REAL_ENTITIES[:6]
    batched = internal_space_increments(model, pairs, batch_size=32)
    single = internal_space_increments(model, pairs, batch_size=1)
    np.testing.assert_allclose(batched, single, atol=1e-5)
