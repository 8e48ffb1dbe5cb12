"""AP embedding spectra: cumulative explained variance, low-frequency power, and the leading components."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    comps = df.drop_duplicates(["model", "component"])
    models = list(dict.fromkeys(df["model"]))
    fig = make_subplots(rows=2, cols=2, specs=[[{}, {}], [{"colspan": 2}, None]], vertical_spacing=0.14,
                        subplot_titles=("cumulative explained variance", "share of DCT-II power in the first 4 bins",
                                        "first two principal components along the positions (scaled to unit peak)"))
    colors = model_colors(models)
    for model in models:
        g = comps[comps["model"] == model]
        color = colors[model]
        fig.add_trace(go.Scatter(x=g["component"], y=g["cumulative"], mode="lines+markers",
                                 name=model, line_color=color, legendgroup=model), row=1, col=1)
        fig.add_trace(go.Bar(x=[f"PC{c}" for c in g["component"]], y=g["low_freq_power"],
                             name=model, marker_color=color, legendgroup=model, showlegend=False), row=1, col=2)
        for c, dash in ((1, "solid"), (2, "dot")):
            t = df[(df["model"] == model) & (df["component"] == c)]
            if len(t):
                fig.add_trace(go.Scatter(x=t["position"], y=t["score"] / t["score"].abs().max(), mode="lines",
                                         line=dict(color=color, dash=dash),
                                         name=f"{model} PC{c}", legendgroup=model, showlegend=False), row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_xaxes(title_text="component", row=1, col=1)
    fig.update_xaxes(title_text="position", row=2, col=1)
    fig.update_layout(template=TEMPLATE, barmode="group", height=820,
                      title="Absolute-position embeddings: PCA and DCT-II")
    return fig
