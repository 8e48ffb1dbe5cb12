"""NIAH retrieval accuracy against context length, with Wilson intervals."""

import plotly.graph_objects as go

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    fig = go.Figure()
    colors = model_colors(df["model"])
    for model, g in df.groupby("model", sort=False):
        fig.add_trace(go.Scatter(
            x=g["length"], y=g["accuracy"], mode="lines+markers", name=model, line=dict(color=colors[model]),
            error_y=dict(type="data", symmetric=False, array=g["ci_high"] - g["accuracy"],
                         arrayminus=g["accuracy"] - g["ci_low"])))
    fig.update_layout(template=TEMPLATE, title="Needle-in-a-haystack retrieval (greedy exact match)", xaxis_type="log",
                      xaxis_title="context length (model tokens)", yaxis_title="accuracy",
                      yaxis_range=[-0.02, 1.02], height=440)
    return fig
