"""along-context against planted ground truth (a layer whose queries are zero attends uniformly, so every statistic has
a closed form along the context; Gemma 3's sliding layers are bounded by their window), against the statistics of each
layer's full hooked pattern computed in float64, its intervals against scipy on the same per-document numbers, and its
refusals."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from analyses.along_context import along_context, buckets, document_statistics, stat_columns
from analyses.registry import OptionError
from interp.base import InputError
from tests.helpers import tiny_model

WINDOWS = (3, 40)


def _uniform_first_layer():
    model = tiny_model("rope", max_seq_len=256)
    with torch.no_grad():
        model.blocks[0].attn.wq.weight.zero_()  # every score 0: row t attends 1 / (t + 1) to each key 0..t
    return model


def _docs(n_docs: int, length: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 257, (length,), generator=g).tolist() for _ in range(n_docs)]


@pytest.fixture(scope="module")
def uniform():
    model = _uniform_first_layer()
    docs = _docs(3, 120)
    return model, docs, along_context(model, documents=docs, length=120, windows=WINDOWS, buckets_per_octave=3)


def test_buckets_are_log_spaced_and_cover_every_row_but_the_first_once():
    for n, per in ((200, 3), (8192, 2), (32768, 2), (2, 1), (17, 4)):
        spans = buckets(n, per)
        covered = [t for a, b in spans for t in range(a, b + 1)]
        assert covered == list(range(1, n)), (n, per)
    spans = buckets(8192, 2)
    assert spans[:6] == [(1, 1), (2, 3), (4, 4), (5, 7), (8, 10), (11, 15)] and spans[-1] == (5792, 8191)
    assert len(spans) == 24  # edges 1, 2, then two per octave up to 5792


def test_a_layer_with_zero_queries_gives_the_closed_forms_of_uniform_attention(uniform):
    _, _, df = uniform
    first = df[df["layer"] == 0]
    assert len(first) == 4 * len(buckets(120, 3)) and set(first["layer_type"]) == {"global"}
    for _, row in first.iterrows():
        t = np.arange(row["bucket_start"], row["bucket_end"] + 1, dtype=np.float64)
        assert row["first_mass"] == pytest.approx(np.mean(1 / (t + 1)), rel=1e-5)
        assert row["previous_mass"] == pytest.approx(np.mean(1 / (t + 1)), rel=1e-5)
        for w in WINDOWS:
            assert row[f"window_mass_{w}"] == pytest.approx(np.mean(np.minimum(w + 1, t + 1) / (t + 1)), rel=1e-5)
        assert row["distance_mean"] == pytest.approx(np.mean(t / 2), rel=1e-4)
        assert row["entropy"] == pytest.approx(np.mean(np.log(t + 1)), rel=1e-5)
        assert row["first_mass_high"] - row["first_mass_low"] < 1e-5  # the same on every document: no spread
        assert row["n_docs"] == 3 and row["tokens"] == 3 * len(t) and row["bucket_centre"] == pytest.approx(
            math.sqrt(row["bucket_start"] * row["bucket_end"]))
    later = df[(df["layer"] == 1) & (df["bucket_start"] >= 20)]
    # a trained-like layer is not uniform
    assert (later["entropy"] < later["bucket_centre"].add(1).apply(math.log) - 0.05).any()


def _expected_per_doc(model, ids, spans) -> np.ndarray:
    """``[stat, layer, head, bucket]`` from each layer's full hooked pattern, in float64, from the definitions."""
    _, cache = model.run_with_cache(torch.tensor([ids]), names_filter=lambda n: n.endswith("hook_pattern"))
    n = len(ids)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None]).double()
    out = []
    for layer in range(model.n_layers):
        p = cache[f"blocks.{layer}.attn.hook_pattern"][0].double()  # [head, q, k]
        rows = [p[..., 0], torch.cat([torch.zeros(p.shape[0], 1, dtype=torch.float64),
                                      p.diagonal(-1, dim1=-2, dim2=-1)], -1)]
        rows += [(p * (d.abs() <= w)).sum(-1) for w in WINDOWS]
        rows += [(p * d).sum(-1), -torch.where(p > 0, p * p.log(), 0.0).sum(-1)]
        per_row = torch.stack(rows).numpy()  # [stat, head, q]
        out.append(np.stack([per_row[..., a:b + 1].mean(-1) for a, b in spans], -1))
    return np.stack(out, 1)


def test_the_table_equals_the_full_pattern_statistics_and_its_interval_is_scipys():
    model = tiny_model("rope", max_seq_len=256, seed=3)
    docs = _docs(3, 90, seed=1)
    df = along_context(model, documents=docs, length=90, windows=WINDOWS, buckets_per_octave=2, confidence=0.9)
    spans = buckets(90, 2)
    per_doc = np.stack([_expected_per_doc(model, ids, spans) for ids in docs])  # [doc, stat, layer, head, bucket]
    got_doc, rows = document_statistics(model, docs[0], WINDOWS, spans)
    np.testing.assert_allclose(got_doc, per_doc[0], atol=2e-5, rtol=1e-5)
    assert rows.tolist() == [b - a + 1 for a, b in spans]
    df = df.sort_values(["layer", "head", "bucket_start"])
    for j, name in enumerate(stat_columns(WINDOWS)):
        values = per_doc[:, j].reshape(len(docs), -1)  # [doc, layer * head * bucket], the table's order
        ci = stats.ttest_1samp(values, 0.0, axis=0).confidence_interval(0.9)
        scale = 1e-4 * max(1.0, float(np.abs(values).max()))
        np.testing.assert_allclose(df[name], values.mean(0), atol=scale, rtol=1e-5, err_msg=name)
        spread = values.std(0) > 1e-3  # where the documents differ, the interval is scipy's
        np.testing.assert_allclose(df[f"{name}_low"][spread], ci.low[spread], atol=scale, rtol=1e-4, err_msg=name)
        np.testing.assert_allclose(df[f"{name}_high"][spread], ci.high[spread], atol=scale, rtol=1e-4, err_msg=name)
    assert set(df["n_docs"]) == {3} and set(df["interval"]) == {"t"}


def test_documents_of_different_lengths_count_where_they_reach():
    model = _uniform_first_layer()
    docs = _docs(2, 90) + _docs(1, 40, seed=5)
    df = along_context(model, documents=docs, length=90, windows=(3,))
    g = df[(df["layer"] == 1) & (df["head"] == 0)].sort_values("bucket_start")
    assert g["n_docs"].iloc[0] == 3 and g["n_docs"].iloc[-1] == 2
    short = g[(g["bucket_start"] <= 39) & (g["bucket_end"] > 39)].iloc[0]  # the bucket the short document ends in
    assert short["tokens"] == 2 * (short["bucket_end"] - short["bucket_start"] + 1) + (39 - short["bucket_start"] + 1)
    one = along_context(model, documents=docs, length=90, windows=(3,), interval="none")
    assert one["first_mass_low"].isna().all() and np.allclose(one["first_mass"], df["first_mass"])


def test_gemma3_local_layers_stay_inside_their_window_and_the_global_layer_reaches_past_it(tmp_path):
    from figures.along_context import figure
    from tests.hf_helpers import saved_gemma3

    _, model = saved_gemma3(tmp_path)  # three sliding layers of 6 keys (distance <= 5), then one global layer
    docs = _docs(2, 120, seed=2)
    docs = [[min(i, 299) for i in ids] for ids in docs]
    df = along_context(model, documents=docs, length=120, windows=(5, 40))
    local, full = df[df["layer_type"] == "local"], df[df["layer_type"] == "global"]
    assert sorted(local["layer"].unique()) == [0, 1, 2] and list(full["layer"].unique()) == [3]
    assert set(local["layer_window"]) == {6} and full["layer_window"].isna().all()
    np.testing.assert_allclose(local["window_mass_5"], 1.0, atol=1e-5)
    assert local["distance_mean"].max() <= 5 + 1e-5
    far = full[full["bucket_start"] >= 20]
    assert far["window_mass_5"].max() < 0.99 and far["distance_mean"].max() > 5
    fig = figure(df)
    assert [a.text for a in fig.layout.annotations][:2] == [f"{model.model_name}<br>local layers",
                                                            f"{model.model_name}<br>global layers"]
    # first row, second column: first-token mass
    drawn = [t for t in fig.data if t.name == "layer 3" and t.yaxis == "y2"]
    want = full.sort_values(["head", "bucket_start"])["first_mass"].to_numpy()
    got = np.array([v for v in drawn[0].y if v is not None], dtype=float)
    np.testing.assert_allclose(got, want)


def test_bad_input_is_refused_before_any_work():
    model = _uniform_first_layer()
    calls = []
    model.blocks[0].register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(OptionError, match="--length 300: longer than|length 300: longer than"):
        along_context(model, documents=_docs(2, 20), length=300)
    with pytest.raises(OptionError, match="n_docs 1: a t-interval needs at least 2 documents"):  # its precheck
        along_context(model, n_docs=1)
    with pytest.raises(InputError, match="make 1 context .* a t-interval needs at least 2"):
        along_context(model, documents=_docs(1, 20), length=50)
    with pytest.raises(InputError, match=r"documents\[1\] has 60 token ids, more than --length 50"):
        along_context(model, documents=_docs(1, 20) + _docs(1, 60), length=50)
    with pytest.raises(OptionError, match="interval .*must be one of t, none"):
        along_context(model, documents=_docs(2, 20), interval="bootstrap")
    with pytest.raises(OptionError, match="n_docs 2: does not apply with your documents"):
        along_context(model, documents=_docs(2, 20), n_docs=2)
    assert calls == []


def test_the_progress_bar_counts_every_row_of_every_layer(monkeypatch):
    import interp.runtime.progress

    bars = []

    class Bar:
        def __init__(self, iterable, desc, total=None):
            self.desc, self.total, self.done, self.notes = desc, total, 0, []
            bars.append(self)

        def update(self, n):
            self.done += n

        def set_postfix_str(self, text, refresh=True):
            self.notes.append(text)

        def close(self):
            self.closed = True

    monkeypatch.setattr(interp.runtime.progress, "progress", Bar)
    model = _uniform_first_layer()
    document_statistics(model, _docs(1, 70)[0], (3,), buckets(70, 2), desc="doc 1/1")
    (bar,) = bars
    assert bar.desc == "doc 1/1" and bar.total == bar.done == model.n_layers * 70 and bar.closed
    assert bar.notes[-1] == f"layer {model.n_layers - 1}/{model.n_layers - 1}"
