"""attention-window's streaming setting (StreamingLLM's experiment): the table against the stream's losses computed
directly, a trained rotary model without sinks as the control that can show an effect, the figure, and the options
that belong to one setting refused in the other."""

import numpy as np
import pytest

from analyses import get
from analyses.attention_window import attention_window, buckets, stream_ids, without_start
from interp.loading import load
from interp.streaming import recomputed_nll, stream_nll


@pytest.fixture(scope="module")
def rope_small():
    return load("rope-small")  # integer RoPE, byte tokenizer, trained on 512-byte windows


@pytest.fixture(scope="module")
def tables(rope_small):
    return get("attention-window").tables(rope_small, setting="streaming", stream_tokens=1500, cache_size=128,
                                          sinks=(0, 4), n_buckets=5, dense_tokens=1200, recompute_stride=50,
                                          control=True)


@pytest.fixture(scope="module")
def table(tables):
    return tables.table


@pytest.fixture(scope="module")
def units(tables):
    return tables.units


def _row(df, condition, bucket):
    return df[(df["condition"] == condition) & (df["bucket"] == bucket)].iloc[0]


def test_the_table_is_the_mean_of_each_tokens_loss_along_the_stream(rope_small, table):
    ids = stream_ids(rope_small, 1500, seed=0)
    assert len(ids) == 1500 and ids[0] == rope_small.tokenizer.eos_id  # the byte models' document start
    position = np.arange(1, 1500)
    window = stream_nll(rope_small, ids, 128, 4)
    dense = stream_nll(rope_small, ids[:1200], None, 0)
    targets = np.arange(50, 1500, 50)
    recomputed = recomputed_nll(rope_small, ids, 129, targets)
    for a, b in buckets(1500, 5):
        row = _row(table, "window + 4 sinks", f"{a}-{b - 1}")
        assert row["loss"] == pytest.approx(window[(position >= a) & (position < b)].mean(), rel=1e-9)
        assert row["n_tokens"] == b - a and row["position"] == (a + b - 1) / 2
    assert _row(table, "dense", "all")["loss"] == pytest.approx(dense.mean(), rel=1e-9)
    assert _row(table, "dense", "all")["n_tokens"] == 1199  # dense attention read the first 1200 tokens only
    assert _row(table, "re-computation", "all")["loss"] == pytest.approx(recomputed.mean(), rel=1e-9)
    paired = _row(table, "window + 4 sinks", "re-computed tokens")
    assert paired["n_tokens"] == len(targets) and paired["loss"] == pytest.approx(window[targets - 1].mean(), rel=1e-9)
    # the control: the same bytes without the start token, each at its place in the stream with it
    control = stream_nll(rope_small, without_start(rope_small, ids), 128, 4)
    row = _row(table, "window + 4 sinks, no start token", "all")
    assert row["n_tokens"] == 1498 and row["loss"] == pytest.approx(control.mean(), rel=1e-9) and not row["start_token"]
    assert not (table["bucket"] == "past the trained length").any()  # 1500 bytes, max_seq_len 2304
    assert set(table["cache_size"].dropna()) == {128} \
        and table.loc[table["condition"] == "dense", "cache_size"].isna().all()


def test_re_computation_with_the_start_token_and_each_re_computed_tokens_loss_are_kept(rope_small, table, units):
    ids = stream_ids(rope_small, 1500, seed=0)
    targets = np.arange(50, 1500, 50)
    start = recomputed_nll(rope_small, ids, 129, targets, prefix=[ids[0]])
    row = _row(table, "re-computation, start token first", "re-computed tokens")
    assert row["n_tokens"] == len(targets) and row["loss"] == pytest.approx(start.mean(), rel=1e-9)
    # a target whose window reaches the stream's start reads it once; one further on reads it, then the 128 before
    import torch

    from interp.streaming import last_logits

    tokens = torch.tensor(ids)
    for g, got in ((50, start[0]), (1000, start[19])):
        seen = tokens[:g] if g <= 128 else torch.cat([tokens[:1], tokens[g - 128:g]])
        with torch.no_grad():
            logits = last_logits(rope_small, seen[None]).float()
        want = float(torch.nn.functional.cross_entropy(logits, tokens[g:g + 1]))
        assert got == pytest.approx(want, rel=1e-6)
    window = stream_nll(rope_small, ids, 128, 4)
    mine = units[units["condition"] == "window + 4 sinks"].sort_values("unit")
    np.testing.assert_allclose(mine["unit"], targets)
    assert set(table["part"]) == {"stream"} and (units["measure"] == "loss").all()
    np.testing.assert_allclose(mine["value"], window[targets - 1], rtol=1e-9)
    assert set(units["condition"]) >= {"re-computation", "re-computation, start token first", "window",
                                       "window + 4 sinks, no start token"}


def test_a_rotary_model_without_sinks_shows_dense_attention_failing_and_the_sinks_changing_nothing(table):
    """rope-small read 512-byte windows in training: past them dense attention fails (as the paper's dense rows do past
    the pre-training length), while window attention, with or without the first tokens, stays at re-computation's
    loss: a model that predicts text and does not sink, so the window has nothing to lose."""
    late = [b for b in table["bucket"].unique() if b[0].isdigit() and int(b.split("-")[0]) >= 600]
    mean = lambda c: table[(table["condition"] == c) & table["bucket"].isin(late)]["loss"].mean()  # noqa: E731
    assert mean("dense") > mean("window") + 0.3
    assert abs(mean("window") - mean("window + 4 sinks")) < 0.02
    paired = table[table["bucket"] == "re-computed tokens"].set_index("condition")["loss"]
    assert abs(paired["window"] - paired["re-computation"]) < 0.1


def test_the_figure_draws_the_stream_and_the_spans(table):
    from analyses.attention_window import headline, summary
    from figures.attention_window import figure

    fig = figure(table)
    curves = {t.name: t for t in fig.data if t.type == "scatter"}
    window = table[(table["condition"] == "window") & table["position"].notna()]
    np.testing.assert_allclose(curves["window"].y, window["loss"])
    bars = [t for t in fig.data if t.type == "bar" and t.name == "dense"]
    assert list(bars[0].x) == ["all", "re-computed tokens"]
    assert any(s.x0 == 128 for s in fig.layout.shapes)  # where the cache is full
    assert "rope-small (1500 tokens streamed, cache 128), over the whole stream: dense " in headline(table)
    assert set(summary(table)["bucket"]) == {"all", "re-computed tokens"}


def test_both_re_computations_are_drawn_on_their_sampled_tokens_only(table):
    """Re-computation, with or without the start token, runs on every 50th token: about 6 per bucket here, too few
    for a point along the stream, so each is a bar beside the same tokens' losses under the other conditions."""
    from figures.attention_window import figure

    sampled = ("re-computation", "re-computation, start token first")
    assert set(sampled) <= set(table["condition"])
    assert table[table["condition"].isin(sampled) & table["position"].notna()]["n_tokens"].max() < 20
    fig = figure(table)
    assert not [t for t in fig.data if t.type == "scatter" and t.name in sampled]
    bars = {t.name: list(t.x) for t in fig.data if t.type == "bar"}
    assert bars["re-computation"] == bars["re-computation, start token first"] == ["re-computed tokens"]
    colours = {t.name: t.marker.color for t in fig.data if t.type == "bar"}
    assert len({colours[c] for c in sampled} | {colours["dense"], colours["window"]}) == 4


def test_streaming_past_the_trained_length(rope_small):
    model = load("rope-small")
    model.max_seq_len = 300  # as if trained on 300 positions: the stream runs past them
    df = attention_window(model, setting="streaming", stream_tokens=400, cache_size=64, sinks=(1,), recompute_stride=0)
    past = df[df["bucket"] == "past the trained length"].set_index("condition")
    assert set(past.index) == {"dense", "window + 1 sink"} and (past["n_tokens"] == 100).all()
    assert "past its 300 trained positions" in __import__("analyses.attention_window").attention_window.headline(df)


def test_options_of_the_other_setting_are_refused_and_bad_ones_named(rope_small):
    with pytest.raises(ValueError, match="--stream-tokens 500: applies to --setting streaming, not window"):
        attention_window(rope_small, stream_tokens=500)
    with pytest.raises(ValueError, match="--window 32: applies to --setting window, not streaming"):
        attention_window(rope_small, setting="streaming", window=32)
    with pytest.raises(ValueError, match="--sinks 64: the sinks are part of the cache, so fewer than --cache-size 64"):
        attention_window(rope_small, setting="streaming", cache_size=64, sinks=(0, 64))
    with pytest.raises(ValueError, match="--dense-tokens 900: longer than the stream"):
        attention_window(rope_small, setting="streaming", stream_tokens=800, dense_tokens=900)
    with pytest.raises(ValueError, match="--control: the stream begins with token 7"):
        attention_window(rope_small, setting="streaming", documents=[[7, 8, 9, 10, 11]], control=True)
    from interp.capabilities import CapabilityError

    with pytest.raises(CapabilityError, match="repo positions computed from the tokens"):
        attention_window(load("repo-small"), setting="streaming", stream_tokens=64, cache_size=16)


def test_the_command_line_reads_the_streaming_options():
    from analyses import get

    spec = get("attention-window")
    parsed = spec.parse_cli({"setting": "streaming", "stream_tokens": "12000", "cache_size": "1024", "control": True})
    assert parsed == {"setting": "streaming", "stream_tokens": 12000, "cache_size": 1024, "control": True}
    from analyses.registry import OptionError

    with pytest.raises(OptionError, match="--setting stream: must be one of window, streaming"):
        spec.parse_cli({"setting": "stream"})
