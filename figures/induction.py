"""Induction score against previous-token score, one dot per head, one panel per model (depth as colour)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE


def figure(df) -> go.Figure:
    models = list(dict.fromkeys(df["model"]))
    fig = make_subplots(rows=1, cols=len(models), subplot_titles=models, shared_yaxes=True,
                        horizontal_spacing=0.06)
    for i, model in enumerate(models, 1):
        g = df[df["model"] == model]
        fig.add_trace(go.Scatter(
            x=g["previous_token_score"], y=g["induction_score"], mode="markers", name=model, showlegend=False,
            marker=dict(color=g["depth"], colorscale="Viridis", cmin=0, cmax=1, size=7, opacity=0.8,
                        showscale=i == len(models), colorbar=dict(title="depth", len=0.8)),
            customdata=g[["layer", "head"]].values,
            hovertemplate="L%{customdata[0]}H%{customdata[1]}: induction %{y:.3f}, previous token "
                          "%{x:.3f}<extra></extra>"),
            row=1, col=i)
        fig.update_xaxes(title_text="previous-token score", range=[-0.03, 1.03], row=1, col=i)
    fig.update_yaxes(title_text="induction score", range=[-0.03, 1.03], row=1, col=1)
    fig.update_layout(template=TEMPLATE, height=420, width=max(520, 380 * len(models)),
                      title="Induction and previous-token heads on repeated random tokens")
    return fig
