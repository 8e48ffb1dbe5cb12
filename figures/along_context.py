"""Each head's curve against its query position (log scale): one row of panels per statistic, one column per model and
layer type (local sliding-window layers apart from global ones), a line per head coloured by depth (shallow light,
deep dark) and their mean in black; hovering gives the layer, the head and the interval over documents.

Drawn narrower than ``NARROW`` px (a 3.3 in column), each row of panels shares one y axis (tick labels on the left
panel only, the room going to the panels), the x axes mark every second decade with level labels, and the depth
scale is a legend below the panels across the full width (first layer, last layer, the mean) instead of a colour
bar beside them."""

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from figures.style import TEMPLATE

TITLES = {"first_mass": "first-token mass", "previous_mass": "previous-token mass",
          "distance_mean": "mean distance (tokens)", "entropy": "entropy (nats)"}
SCALE = "Viridis"
NARROW = 5 * 96  # px: under this width, the column layout


def _stats(df) -> list[str]:
    base = ["first_mass", "previous_mass"]
    windows = sorted((c for c in df.columns if c.startswith("window_mass_") and not c.endswith(("_low", "_high"))),
                     key=lambda c: int(c.rsplit("_", 1)[1]))
    return base + windows + ["distance_mean", "entropy"]


def _title(stat: str) -> str:
    return TITLES.get(stat) or f"mass within {stat.rsplit('_', 1)[1]} tokens"


def _depth_color(share: float) -> str:
    """The colour of a layer ``share`` of the way down its model (0 first, 1 last)."""
    return sample_colorscale(SCALE, [0.9 * (1 - share)])[0]


def figure(df, width: float | None = None) -> go.Figure:
    """``width``: the px the figure is drawn at, where known (``figures.render``); under ``NARROW``, the column
    layout."""
    narrow = width is not None and width < NARROW
    stats = _stats(df)
    panels = [(m, t) for m, g in df.groupby("model", sort=False) for t in ("local", "global")
              if (g["layer_type"] == t).any()]
    titles = [f"{m}<br>{t} layers" for m, t in panels]
    fig = make_subplots(rows=len(stats), cols=len(panels), column_titles=titles, shared_xaxes=True,
                        shared_yaxes=narrow, vertical_spacing=0.025, horizontal_spacing=0.04 if narrow else 0.05)
    for c, (model, kind) in enumerate(panels, 1):
        _panel(fig, df, model, kind, stats, c)
    _axes(fig, stats, narrow)
    title = f"Heads along the context, every query row<br><sup>{_subtitle(df)}</sup>"
    if narrow:
        return _column(fig, len(stats), width, title)
    # the depth scale: an invisible marker trace carries the colour bar
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                             marker=dict(color=[0, 1], colorscale=[[0, _depth_color(0)], [1, _depth_color(1)]],
                                         cmin=0, cmax=1, showscale=True,
                                         colorbar=dict(title="depth", tickvals=[0, 1], ticktext=["first", "last"],
                                                       len=0.25, y=0.96, yanchor="top", x=1.02))), row=1, col=1)
    fig.update_layout(legend=dict(x=1.02, xanchor="left", y=1.0, yanchor="top"))
    fig.update_layout(template=TEMPLATE, height=190 * len(stats) + 170, width=max(700, 330 * len(panels)),
                      margin=dict(t=130), title=title)
    return fig


def _panel(fig: go.Figure, df, model: str, kind: str, stats: list[str], c: int) -> None:
    """Column ``c``: a line per head of ``model``'s ``kind`` layers, coloured by depth, and their mean in black, one row
    per statistic."""
    g = df[(df["model"] == model) & (df["layer_type"] == kind)].sort_values(["layer", "head", "bucket_start"])
    depth_of = max(1, int(df.loc[df["model"] == model, "layer"].max()))
    for layer, gl in g.groupby("layer", sort=True):
        color = _depth_color(layer / depth_of)
        for r, stat in enumerate(stats, 1):
            x, y, custom = [], [], []
            for head, gh in gl.groupby("head", sort=True):
                x += list(gh["bucket_centre"]) + [None]
                y += list(gh[stat]) + [None]
                custom += [[layer, head, a, b, lo, hi] for a, b, lo, hi in
                           zip(gh["bucket_start"], gh["bucket_end"], gh[f"{stat}_low"],
                               gh[f"{stat}_high"])] + [[None] * 6]
            fig.add_trace(go.Scatter(
                x=x, y=y, mode="lines", line=dict(color=color, width=1), opacity=0.8, showlegend=False,
                customdata=np.array(custom, dtype=object), name=f"layer {layer}",
                hovertemplate=("layer %{customdata[0]} head %{customdata[1]}, "
                               "positions %{customdata[2]}-%{customdata[3]}: "
                               "%{y:.3g} [%{customdata[4]:.3g}, %{customdata[5]:.3g}]<extra>"
                               + f"{model}</extra>")),
                row=r, col=c)
    mean = g.groupby("bucket_start", sort=True).agg(x=("bucket_centre", "first"), **{s: (s, "mean") for s in stats})
    for r, stat in enumerate(stats, 1):
        fig.add_trace(go.Scatter(x=mean["x"], y=mean[stat], mode="lines", line=dict(color="black", width=2.5),
                                 name="mean over heads", legendgroup="mean", showlegend=c == 1 and r == 1,
                                 hovertemplate="mean over heads: %{y:.3g}<extra>" + f"{model}, {kind}</extra>"),
                      row=r, col=c)


def _axes(fig: go.Figure, stats: list[str], narrow: bool) -> None:
    """Log position on x; per row its statistic's title and range (masses 0..1, the mean distance on a log scale)."""
    fig.update_xaxes(type="log")
    fig.update_xaxes(title_text="query position", row=len(stats))
    for r, stat in enumerate(stats, 1):
        fig.update_yaxes(title_text=_title(stat), row=r, col=1)
        if "mass" in stat:
            fig.update_yaxes(range=[-0.03, 1.03], row=r)
        elif narrow:  # plotly.js leaves a matched row at its default range once another row's range is set
            fig.update_yaxes(autorange=True, row=r)
        if stat == "distance_mean":
            fig.update_yaxes(type="log", row=r)


def _subtitle(df) -> str:
    """Each model's length and documents, and the interval shown on hover."""
    n = df.groupby("model", sort=False)[["length", "n_docs"]].max()
    said = ", ".join(f"{m}: {int(r['length'])} tokens x {int(r['n_docs'])} document{'s' if r['n_docs'] > 1 else ''}"
                     for m, r in n.iterrows())
    how = ("" if df["interval"].iloc[0] == "none"
           else f"; hover: {df['confidence'].iloc[0]:.0%} t-interval over documents")
    return f"{said}{how}"


def _column(fig: go.Figure, rows: int, width: float, title: str) -> go.Figure:
    """The column layout: a decade every second one on x, unrotated; the depth scale and the mean as a legend below
    the panels, its three entries spanning the width."""
    fig.update_xaxes(dtick=2, tickangle=0)
    for rank, (name, share) in enumerate((("first layer", 0.0), ("last layer", 1.0))):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=_depth_color(share), width=2),
                                 name=name, showlegend=True, legendrank=rank + 1, hoverinfo="skip"), row=1, col=1)
    fig.update_traces(selector=dict(legendgroup="mean"), name="mean of heads")
    items = sum(1 for t in fig.data if t.showlegend)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-0.02, yanchor="top",
                                  entrywidthmode="fraction", entrywidth=1 / items, traceorder="normal"))
    fig.update_layout(template=TEMPLATE, width=width, height=80 * rows + 110, margin=dict(t=100, l=70, r=10),
                      title=title)
    return fig
