"""Characters placed at their learned positions, one row per layer (the seed's spacing plots).

A panel per model and text (and scale): each panel is as tall as its layers need, and a model with one row of
increments, whose per-row and shared scales place every character alike, gets one panel for both."""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, layer_order

ROW_PX, TITLE_PX = 36, 54  # screen height of a row of characters, and of a panel's title and margins


def _panels(df) -> list[tuple[str, object]]:
    """``(title, rows)`` per panel: one per model, text and scale, the scales merged where they agree."""
    out = []
    for (model, text), g in df.groupby(["model", "text_id"], sort=False):
        scales = list(dict.fromkeys(g["scale"]))
        by_scale = {s: g[g["scale"] == s] for s in scales}
        same = len(scales) > 1 and all(np.allclose(by_scale[s]["position"].to_numpy(),
                                                   by_scale[scales[0]]["position"].to_numpy())
                                       for s in scales[1:])
        if same:
            out.append((f"{model}: {text} ({' and '.join(scales)} scale alike)", by_scale[scales[0]]))
        else:
            out += [(f"{model}: {text} ({s} scale)", by_scale[s]) for s in scales]
    return out


def figure(df) -> go.Figure:
    panels = _panels(df)
    rows = [max(1, g["layer"].nunique()) for _, g in panels]
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[t for t, _ in panels], row_heights=rows,
                        vertical_spacing=0.25 / max(1, len(panels)))
    for row, (_title, g) in enumerate(panels, start=1):
        layers = layer_order(g["layer"])
        y_of = {layer: len(layers) - 1 - i for i, layer in enumerate(layers)}
        if len(layers) > 1:
            for ci, gc in g.groupby("char_index"):
                gc = gc.set_index("layer").loc[layers]
                fig.add_trace(go.Scatter(x=gc["position"], y=[y_of[x] for x in layers], mode="lines", hoverinfo="skip",
                                         line=dict(color="rgba(31,119,180,0.25)", width=1),
                                         showlegend=False), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=g["position"], y=[y_of[x] for x in g["layer"]], mode="text", text=g["char"], textfont=dict(size=16),
            showlegend=False, customdata=g[["layer", "increment", "scaled"]].values,
            hovertemplate="%{text} %{customdata[0]}: δ=%{customdata[1]:.3f} (scaled "
                          "%{customdata[2]:.2f})<extra></extra>"),
            row=row, col=1)
        fig.update_yaxes(tickvals=list(y_of.values()), ticktext=list(y_of),
                         range=[-0.6, len(layers) - 0.4], row=row, col=1)
        fig.update_xaxes(showticklabels=False, row=row, col=1)
    fig.update_layout(template=TEMPLATE, height=max(320, sum(TITLE_PX + ROW_PX * n for n in rows)),
                      title="Characters spaced by their learned increments")
    return fig
