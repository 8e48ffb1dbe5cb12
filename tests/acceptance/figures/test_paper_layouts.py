"""Paper figures at the widths they are printed, on tables shaped like the real runs: along-context's three panels
(Gemma 3's local and global layers, SmolLM2's) in a 3.3 in column, head-profiles' panels at 7 in, and
position-probes' R^2 axis holding a control below -0.2.

The geometry is read from the laid-out figure (domains, annotation positions, tick steps) with Arial's own advance
widths (``tests.figure_checks.text_width``); where a browser is found, plotly's own layout and the exported SVG's
texts are checked as well."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import figures
from figures.render import render
from figures.style import PAPER_TEXT_PX, PAPER_TICK_PX
from tests.figure_checks import text_width

needs_browser = pytest.mark.skipif(figures.find_browser() is None, reason="no Chrome/Chromium for kaleido (install "
                                   "`chromium` or run `plotly_get_chrome`): plotly's layout not computed")
COLUMN = 3.3 * 96
PAGE = 9 * 96
STATS = ("first_mass", "previous_mass", "window_mass_16", "window_mass_512", "distance_mean", "entropy")


def along_context_table(seed: int = 0) -> pd.DataFrame:
    """The real run's shape (docs/along-context): Gemma 3 270M at 32,768 tokens, 18 layers of 4 heads, every sixth
    layer global and the rest local (window 512); SmolLM2 at 8,192 tokens, 30 global layers of 9 heads; buckets at
    every half power of two; three documents, Student-t intervals."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, length, layers, heads in (("gemma3-270m", 32768, 18, 4), ("smollm2", 8192, 30, 9)):
        starts = sorted({int(2 ** (k / 2)) for k in range(int(2 * math.log2(length)))})
        ends = [s - 1 for s in starts[1:]] + [length - 1]
        for layer in range(layers):
            local = model == "gemma3-270m" and layer % 6 != 5
            for head in range(heads):
                u = rng.uniform(0.05, 1.0)
                for a, b in zip(starts, ends):
                    centre = math.sqrt(a * b)
                    values = dict(first_mass=u / (1 + math.log(centre)),
                                  previous_mass=rng.uniform(0, 1) if a == 1 else u / 5,
                                  window_mass_16=1.0 if b < 16 else u,
                                  window_mass_512=1.0 if b < 512 or local else u / 2,
                                  distance_mean=centre * u if not local or b < 512 else 120 * u,
                                  entropy=u * 2 * math.log1p(centre))
                    row = dict(model=model, layer=layer, head=head, layer_type="local" if local else "global",
                               layer_window=512.0 if local else np.nan, bucket_start=a, bucket_end=b,
                               bucket_centre=centre)
                    for stat, v in values.items():
                        row.update({stat: v, f"{stat}_low": v * 0.9, f"{stat}_high": v * 1.1})
                    rows.append({**row, "n_docs": 3, "tokens": 3 * (b - a + 1), "length": length, "interval": "t",
                                 "confidence": 0.95})
    return pd.DataFrame(rows)


def _plot_box(fig) -> tuple[float, float, float, float]:
    """``(left, width, top, height)`` of the plot area in px."""
    m = fig.layout.margin
    return m.l, fig.layout.width - m.l - m.r, m.t, fig.layout.height - m.t - m.b


def _title_boxes(fig, size=PAPER_TEXT_PX):
    """Horizontal extents (px) of the subplot titles, centred on their ``x``, each line's own Arial width."""
    left, width, _, _ = _plot_box(fig)
    boxes = []
    for a in fig.layout.annotations:
        w = max(text_width(line, size) for line in a.text.split("<br>"))
        centre = left + a.x * width
        boxes.append((centre - w / 2, centre + w / 2, a.text))
    return sorted(boxes)


def _axes(fig, letter):
    return [k for k in fig.layout.to_plotly_json() if k.startswith(f"{letter}axis")]


def _disjoint(spans, gap=0.0) -> list[str]:
    spans = sorted(spans)
    return [f"{a} and {b}" for a, b in zip(spans, spans[1:]) if a[1] + gap > b[0]]


def _log_ticks(lo: float, hi: float, dtick: float) -> list[float]:
    """Positions (log10) of the labelled ticks of a log axis drawing every ``dtick``-th decade over [lo, hi]."""
    return [k * dtick for k in range(math.ceil(lo / dtick - 1e-9), math.floor(hi / dtick + 1e-9) + 1)]


# ---- along-context in a column ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def along():
    df = along_context_table()
    return df, render("along-context", df, template="paper", width="3.3in")


def test_along_context_column_has_three_panels_side_by_side_with_apart_titles(along):
    df, fig = along
    assert fig.layout.width == pytest.approx(COLUMN) and fig.layout.height <= PAGE
    titles = _title_boxes(fig)
    assert [t[2].replace("<br>", " ") for t in titles] == ["gemma3-270m local layers", "gemma3-270m global layers",
                                                          "smollm2 global layers"]
    assert not _disjoint([t[:2] for t in titles], gap=4), "column titles overlap"
    assert titles[0][0] >= 0 and titles[-1][1] <= fig.layout.width, "a title leaves the page"
    left, width, _, _ = _plot_box(fig)
    xs = {tuple(fig.layout[k].domain) for k in _axes(fig, "x")}
    ys = {tuple(fig.layout[k].domain) for k in _axes(fig, "y")}
    assert len(xs) == 3 and len(ys) == len(STATS)
    assert not _disjoint([(a * width, b * width) for a, b in xs], gap=6) and not _disjoint(ys)
    assert min((b - a) * width for a, b in xs) >= max(text_width(line, PAPER_TEXT_PX) for t in titles
                                                      for line in t[2].split("<br>"))  # every title line fits its panel


def test_along_context_column_labels_each_row_once_and_marks_few_ticks(along):
    """One set of y tick labels per row (at the left panel), and at most three x labels a panel, unrotated and
    further apart than they are wide."""
    df, fig = along
    left, width, _, _ = _plot_box(fig)
    for k in _axes(fig, "y"):
        axis, x = fig.layout[k], fig.layout["x" + k[1:]]
        first = x.domain[0] == min(fig.layout[j].domain[0] for j in _axes(fig, "x"))
        assert first == (axis.showticklabels is not False), k
        if not first:
            assert axis.matches  # the same range as the labelled panel's
    spans = df.groupby("model")["bucket_centre"].agg(["min", "max"])
    models = [t[2].split("<br>")[0] for t in _title_boxes(fig)]
    for k in _axes(fig, "x"):
        axis = fig.layout[k]
        assert axis.type == "log" and axis.tickangle == 0
        column = sorted({fig.layout[j].domain[0] for j in _axes(fig, "x")}).index(axis.domain[0])
        lo, hi = np.log10(spans.loc[models[column]])
        ticks = _log_ticks(lo, hi, float(axis.dtick))
        assert 2 <= len(ticks) <= 3, (k, ticks)
        step = (axis.domain[1] - axis.domain[0]) * width * float(axis.dtick) / (hi - lo)
        assert step > text_width("10k", PAPER_TICK_PX) + 4, (k, step)


def test_along_context_column_legend_spans_the_width_below_the_panels(along):
    """No colour bar beside the panels: the depth scale and the mean are three legend entries below them, across the
    whole width, and the lowest panel ends above the legend."""
    _, fig = along
    assert not any(getattr(t.marker, "showscale", None) for t in fig.data if hasattr(t, "marker"))
    names = [t.name for t in fig.data if t.showlegend]
    assert sorted(names) == ["first layer", "last layer", "mean of heads"]
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.x == 0 and legend.xanchor == "left" and legend.yanchor == "top"
    assert legend.y < min(fig.layout[k].domain[0] for k in _axes(fig, "y"))
    assert legend.entrywidthmode == "fraction" and legend.entrywidth * len(names) == pytest.approx(1)
    left, width, _, _ = _plot_box(fig)
    ranked = sorted(fig.data, key=lambda t: t.legendrank or 1000)
    ordered = [t.name for t in ranked if t.showlegend]
    for i, name in enumerate(ordered):  # an entry's line and text end before the next entry, the last one on the page
        end = left + (i * legend.entrywidth) * width + 40 + text_width(name, PAPER_TICK_PX)
        assert end <= (left + (i + 1) * legend.entrywidth * width if i < len(ordered) - 1 else fig.layout.width), name


def test_along_context_screen_figure_keeps_its_grid_and_colour_bar():
    df = along_context_table()
    fig = render("along-context", df)
    assert fig.layout.width >= 990 and any(t.marker.showscale for t in fig.data)
    assert all(fig.layout[k].showticklabels is not False for k in _axes(fig, "y"))


@needs_browser
def test_along_context_column_as_plotly_draws_it(along, tmp_path):
    """plotly's own ranges hold every value (a matched row left at plotly's default range would not), and no text
    of the exported SVG overlaps another or leaves the page."""
    from figures.save import laid_out
    from tests.figure_checks import outside_axes, text_boxes, text_overlaps

    _, fig = along
    assert outside_axes(fig) == []
    full = laid_out(fig)
    for k in _axes(full, "x"):
        axis = full.layout[k]
        assert len(_log_ticks(*sorted(axis.range), float(axis.dtick))) <= 3
    svg = figures.save(fig, tmp_path / "along", "svg", width=fig.layout.width, height=fig.layout.height)[0]
    assert text_overlaps(svg) == []
    assert text_boxes(svg)[1][1] <= PAGE + 0.5


# ---- head-profiles on a page ------------------------------------------------------------------------------

def head_profiles_table(seed: int = 0) -> pd.DataFrame:
    """The small run's shape: a RePo decoder of 4 x 4 heads whose position ranges run from 1 to 47 positions (the
    log axis' span that put plotly's digits 8, 9, 10 on each other) and an encoder without them."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("repo-small", "dstg-small"):
        for layer in range(4):
            for head in range(4):
                decoder = model == "repo-small"
                rows.append(dict(model=model, layer=layer, head=head, n_layers=4, depth=layer / 3,
                                 previous_token_mass=rng.uniform(0, 0.3), first_token_mass=rng.uniform(0, 0.2),
                                 local_mass=rng.uniform(0.2, 0.8), needle_mass=rng.uniform(0, 1) if decoder else np.nan,
                                 retrieval_score=rng.choice([0, 0.125, 0.5]) if decoder else np.nan,
                                 position_range=(47.0 if layer == 0 else 1.0 if (layer, head) == (1, 0)
                                                 else rng.uniform(1.8, 6.2))
                                 if decoder else np.nan,
                                 group="mixed"))
    return pd.DataFrame(rows)


def test_head_profiles_log_axis_labels_values_apart_at_seven_inches():
    df = head_profiles_table()
    fig = render("head-profiles", df, template="paper", width="7in")
    _, _, _, plot_h = _plot_box(fig)
    axis = next(fig.layout[k] for k in _axes(fig, "y") if fig.layout[k].type == "log")
    lo, hi = axis.range
    assert lo <= math.log10(df["position_range"].min()) and math.log10(df["position_range"].max()) <= hi
    assert axis.tickmode == "array" and len(axis.tickvals) >= 2
    for value, label in zip(axis.tickvals, axis.ticktext):
        assert float(label) == pytest.approx(value)  # written out: "50", not a lone "5" standing for 50
    panel = (axis.domain[1] - axis.domain[0]) * plot_h
    gaps = np.diff(np.log10(axis.tickvals)) * panel / (hi - lo)
    assert gaps.min() > 1.3 * PAPER_TICK_PX, gaps  # a line of tick text and more between neighbouring labels


@needs_browser
def test_head_profiles_texts_apart_at_seven_inches(tmp_path):
    from tests.figure_checks import outside_axes, text_overlaps

    fig = render("head-profiles", head_profiles_table(), template="paper", width="7in")
    assert outside_axes(fig) == []
    svg = figures.save(fig, tmp_path / "profiles", "svg", width=fig.layout.width, height=fig.layout.height)[0]
    assert text_overlaps(svg) == []


# ---- position-probes' R^2 axis ----------------------------------------------------------------------------

def probes_table(low: float) -> pd.DataFrame:
    """One model, two subspaces, three targets over four layers; the segment target's shuffled control at layer 2
    scores ``low`` (std 0.04)."""
    rows = []
    for space in ("full", "ap"):
        for target in ("token", "segment", "intra"):
            for layer in range(4):
                for control in ("none", "shuffled"):
                    r2 = 0.6 - 0.05 * layer if control == "none" else -0.02
                    if control == "shuffled" and target == "segment" and layer == 2 and space == "ap":
                        r2 = low
                    rows.append(dict(model="dstg-small", layer=layer, subspace=space, target=target, control=control,
                                     r2_mean=r2, r2_std=0.04, r2_missing="", alpha=1.0, n_train=8, n_test=4, n_seeds=2))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("template", ["default", "paper"])
def test_position_probes_axis_holds_a_control_below_minus_point_two(template):
    fig = render("position-probes", probes_table(-0.27), template=template,
                 width="3.3in" if template == "paper" else None)
    lo, hi = fig.layout.yaxis.range
    assert lo <= -0.27 - 0.04 and hi >= 1.0
    assert list(render("position-probes", probes_table(-0.05)).layout.yaxis.range) == [-0.2, 1.02]  # the usual axis


@needs_browser
def test_position_probes_draws_every_error_bar_inside_its_axis():
    from tests.figure_checks import outside_axes

    assert outside_axes(render("position-probes", probes_table(-0.27))) == []
    assert outside_axes(render("position-probes", probes_table(-0.9), template="paper", width="7in")) == []
