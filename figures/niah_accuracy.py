"""NIAH retrieval accuracy against context length, with Wilson intervals."""

import plotly.graph_objects as go

from figures.style import COLORS, TEMPLATE


def figure(df) -> go.Figure:
    fig = go.Figure()
    for i, (model, g) in enumerate(df.groupby("model", sort=False)):
        fig.add_trace(go.Scatter(
            x=g["context_tokens"], y=g["accuracy"], mode="lines+markers", name=model, line=dict(color=COLORS[i % 10]),
            error_y=dict(type="data", symmetric=False, array=g["ci_high"] - g["accuracy"], arrayminus=g["accuracy"] - g["ci_low"])))
    fig.update_layout(template=TEMPLATE, title="Needle-in-a-haystack retrieval (greedy exact match)", xaxis_type="log",
                      xaxis_title="context length (model tokens)", yaxis_title="accuracy", yaxis_range=[-0.02, 1.02], height=440)
    return fig
