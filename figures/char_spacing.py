"""Characters placed at their learned positions, one row per layer (the seed's spacing plots)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, layer_order


def figure(df) -> go.Figure:
    panels = list(df.groupby(["model", "text_id", "scale"], sort=False))
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[f"{m}: {t} ({s} scale)" for (m, t, s), _ in panels],
                        vertical_spacing=0.25 / max(1, len(panels)))
    for row, ((_m, _t, _s), g) in enumerate(panels, start=1):
        layers = layer_order(g["layer"])
        y_of = {layer: len(layers) - 1 - i for i, layer in enumerate(layers)}
        if len(layers) > 1:
            for ci, gc in g.groupby("char_index"):
                gc = gc.set_index("layer").loc[layers]
                fig.add_trace(go.Scatter(x=gc["position"], y=[y_of[x] for x in layers], mode="lines", hoverinfo="skip",
                                         line=dict(color="rgba(31,119,180,0.25)", width=1), showlegend=False), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=g["position"], y=[y_of[x] for x in g["layer"]], mode="text", text=g["char"], textfont=dict(size=16),
            showlegend=False, customdata=g[["layer", "increment", "scaled"]].values,
            hovertemplate="%{text} %{customdata[0]}: δ=%{customdata[1]:.3f} (scaled %{customdata[2]:.2f})<extra></extra>"),
            row=row, col=1)
        fig.update_yaxes(tickvals=list(y_of.values()), ticktext=list(y_of), range=[-0.5, len(layers) - 0.5], row=row, col=1)
        fig.update_xaxes(showticklabels=False, row=row, col=1)
    fig.update_layout(template=TEMPLATE, height=max(320, sum(90 + 40 * g["layer"].nunique() for _, g in panels)),
                      title="Characters spaced by their learned increments")
    return fig
