"""Distribution over heads of the position range d = max z - min z within a context.

The y axis is logarithmic (RePo's ranges of a few positions sit beside RoPE's 511): its labelled ticks are values
written out (1, 10, 100, 1000; with 2 and 5 between them when the data span few decades, finer where they span less
than one), with unlabelled grid lines at the other digits, so no label is a bare digit of another decade. A head
whose range is 0 (a NoPE layer: every token at one position) has no place on a log axis: such heads are drawn as
open triangles in a band below a dotted line, labelled 0, with their number beside them; each violin holds the
positive ranges only, so it stays inside the axis.
"""

import math

import numpy as np
import plotly.graph_objects as go

from figures.style import TEMPLATE, log_range, model_colors

ZERO_BAND = 0.1  # of the data's span on the axis (log10 units): the band below it where heads with d = 0 are drawn


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """``(labelled, grid)`` tick values for a log axis over ``[10**lo, 10**hi]``: decades, plus 2 and 5 times them
    when the axis spans less than three decades, a linear step instead when that still leaves fewer than two;
    ``grid`` is every other digit of each decade (unlabelled)."""
    def inside(values):
        return sorted({float(v) for v in values if lo <= math.log10(v) <= hi})

    decades = [10.0 ** k for k in range(math.floor(lo) - 1, math.ceil(hi) + 1)]
    labelled = inside(decades)
    if hi - lo < 3:
        labelled = inside([m * d for d in decades for m in (1, 2, 5)])
    if len(labelled) < 2:  # less than a decade: a linear 1-2-5 step giving two to six labels
        span = 10.0 ** hi - 10.0 ** lo
        step = min(m * 10.0 ** k for k in range(math.floor(math.log10(span)) - 2, math.floor(math.log10(span)) + 1)
                   for m in (1, 2, 5) if span / (m * 10.0 ** k) <= 6)
        labelled = inside(np.arange(math.ceil(10.0 ** lo / step), math.floor(10.0 ** hi / step) + 1) * step)
    grid = [v for v in inside([m * d for d in decades for m in range(1, 10)]) if not np.isclose(labelled, v).any()]
    return labelled, grid


def written_out(value: float) -> str:
    """A tick value as a reader writes it: ``1000``, ``0.5``, ``250`` (no exponent, no SI suffix)."""
    return np.format_float_positional(float(f"{value:.12g}"), trim="-")


def figure(df) -> go.Figure:
    fig = go.Figure()
    per_head = df.groupby(["model", "layer", "head", "mode"], as_index=False)["d"].mean()
    colors = model_colors(df["model"])
    lo, hi = log_range(per_head.loc[per_head["d"] > 0, "d"]) or [-0.1, 0.1]
    zero_heads = per_head[per_head["d"] == 0]
    bottom = lo - ZERO_BAND * (hi - lo) if len(zero_heads) else lo  # a band below the data for d = 0
    floor = 10 ** ((bottom + lo) / 2)
    for model, g in per_head.groupby("model", sort=False):
        n = df[df["model"] == model]["n_tokens"].median()
        zeros = zero_heads[zero_heads["model"] == model]
        label = f"{model}<br>({int(n)} tokens)"
        shown = g[g["d"] > 0]
        fig.add_trace(go.Violin(x=[label] * len(shown), y=shown["d"], name=model, box_visible=True, spanmode="hard",
                                points="all", pointpos=0, marker=dict(size=4), line_color=colors[model],
                                customdata=shown[["layer", "head", "mode"]].values,
                                hovertemplate="layer %{customdata[0]} head %{customdata[1]} (%{customdata[2]}): "
                                              "d=%{y:.2f}<extra></extra>"))
        if len(zeros):
            fig.add_trace(go.Scatter(x=[label] * len(zeros), y=[floor] * len(zeros),
                                     mode="markers+text", name=f"{model} d = 0",
                                     marker=dict(symbol="triangle-down-open", size=9, color=colors[model]),
                                     text=[f"  {len(zeros)} heads"] + [""] * (len(zeros) - 1),
                                     textposition="middle right", textfont=dict(color=colors[model]),
                                     customdata=zeros[["layer", "head", "mode"]].values,
                                     hovertemplate="layer %{customdata[0]} head %{customdata[1]} (%{customdata[2]}): "
                                                   "d = 0 (every token at one position)<extra></extra>"))
    labelled, grid = log_ticks(lo, hi)
    text = [written_out(v) for v in labelled]
    if len(zero_heads):
        labelled, text = [floor] + labelled, ["0"] + text
        # the axis break: log values above, 0 below
        fig.add_hline(y=10 ** lo, line=dict(color="#888", width=1, dash="dot"))
    fig.update_layout(template=TEMPLATE, title="Position range per head, d = max z - min z (mean over contexts)",
                      yaxis_title="d (log scale)",
                      showlegend=False, height=520)
    fig.update_yaxes(type="log", range=[bottom, hi], tickmode="array", tickvals=labelled, ticktext=text,
                     minor=dict(tickmode="array", tickvals=grid, showgrid=True, ticks=""))
    return fig
