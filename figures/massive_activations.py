"""Massive activations per layer: the median over sequences of the top-1 |residual| / the layer's median magnitude
(log scale; Sun et al.'s 10^3-10^5), one panel per start-token condition, a line per model over each sequence's own
ratio (faint points); hover gives the share of sequences whose top-1 sits at the first token and the most frequent
dimension."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    top = df[df["rank"] == 1]
    starts = sorted(set(top["start_token"]), reverse=True)
    fig = make_subplots(rows=1, cols=len(starts), shared_yaxes=True,
                        subplot_titles=[f"{'with' if s else 'without'} start token" for s in starts])
    colors = model_colors(list(dict.fromkeys(top["model"])))
    for c, start in enumerate(starts, 1):
        g = top[top["start_token"] == start]
        per = g.groupby(["model", "layer"], sort=False).agg(
            ratio=("ratio", "median"), lo=("ratio", lambda x: x.quantile(0.1)), hi=("ratio", lambda x: x.quantile(0.9)),
            first=("first_token", "mean"), dim=("dim", lambda d: int(d.mode().iloc[0]))).reset_index()
        for model, m in per.groupby("model", sort=False):
            each = g[g["model"] == model]
            fig.add_trace(go.Scatter(
                x=each["layer"], y=each["ratio"], mode="markers", legendgroup=model, showlegend=False,
                marker=dict(color=colors[model], size=3, opacity=0.25), hoverinfo="skip"), row=1, col=c)
            fig.add_trace(go.Scatter(
                x=m["layer"], y=m["ratio"], mode="lines+markers", name=model, legendgroup=model, showlegend=c == 1,
                line=dict(color=colors[model]), marker=dict(size=5),
                error_y=dict(type="data", symmetric=False, array=m["hi"] - m["ratio"], arrayminus=m["ratio"] - m["lo"],
                             thickness=1, width=2),
                customdata=m[["first", "dim"]].values,
                hovertemplate="layer %{x}: top-1 / median %{y:.0f}x; at the first token in %{customdata[0]:.0%} of "
                              "sequences; dim %{customdata[1]}<extra>" + model + "</extra>"), row=1, col=c)
        fig.update_xaxes(title_text="layer", row=1, col=c)
    fig.update_yaxes(type="log", title_text="top-1 |activation| / median", col=1)  # bars: 10th-90th pct. of sequences
    fig.update_layout(template=TEMPLATE, height=480,
                      title="Massive activations in the residual stream (Sun et al., COLM 2024)")
    return fig
