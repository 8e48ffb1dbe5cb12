"""Window attention: next-token loss along the document for each condition (a panel per model, full attention black),
and each layer's attention mass on keys past the window with full attention (mean over heads, a line per model)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import OKABE_ITO, TEMPLATE, model_colors


def figure(df) -> go.Figure:
    loss, reach = df[df["part"] == "loss"], df[df["part"] == "reach"]
    models = list(dict.fromkeys(df["model"]))
    colors = model_colors(models)
    n = len(models)
    fig = make_subplots(rows=2, cols=n, specs=[[{}] * n, [{"colspan": n}] + [None] * (n - 1)], vertical_spacing=0.2,
                        subplot_titles=[f"{m}: loss along the document" for m in models]
                        + ["attention on keys past the window, with full attention"])
    conditions = list(dict.fromkeys(loss["condition"]))
    # conditions in their own colours and dashes (the models' colours belong to the panel below): full attention grey,
    # the plain window purple, then blues for more sinks
    styles = [("#666666", "solid"), (OKABE_ITO["purple"], "solid"), (OKABE_ITO["sky"], "dash"), (OKABE_ITO["blue"], "dot"),
              (OKABE_ITO["yellow"], "dashdot")]
    shade = {c: styles[min(i, len(styles) - 1)] for i, c in enumerate(conditions)}
    for j, model in enumerate(models, 1):
        g = loss[(loss["model"] == model) & (loss["bucket"] != "past the window")]
        window = int(df.loc[df["model"] == model, "window"].iloc[0])
        for condition, c in g.groupby("condition", sort=False):
            fig.add_trace(go.Scatter(x=c["position"], y=c["loss"], mode="lines+markers", name=condition, legendgroup=condition,
                                     showlegend=j == 1, line=dict(color=shade[condition][0], dash=shade[condition][1]), marker=dict(size=5),
                                     customdata=c[["bucket", "n_tokens"]].values,
                                     hovertemplate="positions %{customdata[0]}: %{y:.3f} nats (%{customdata[1]} tokens)<extra>"
                                                   + condition + "</extra>"), row=1, col=j)
        fig.add_vline(x=window, line=dict(dash="dash", width=1, color="#888"), row=1, col=j)
        fig.update_xaxes(title_text="position in the document", row=1, col=j)
    fig.update_yaxes(title_text="next-token loss (nats)", row=1, col=1)
    per_layer = reach.groupby(["model", "layer"], sort=False).agg(depth=("depth", "first"), beyond=("mass_beyond_window", "mean"),
                                                                  attention=("attention", "first")).reset_index()
    for model, g in per_layer.groupby("model", sort=False):
        fig.add_trace(go.Scatter(x=g["depth"], y=g["beyond"], mode="lines+markers", name=f"{model}: past the window",
                                 line=dict(color=colors[model]), marker=dict(size=6, symbol=["circle-open" if a != "full" else "circle"
                                                                                            for a in g["attention"]]),
                                 customdata=g[["layer", "attention"]].values,
                                 hovertemplate="layer %{customdata[0]} (%{customdata[1]}): %{y:.1%}<extra>" + model + "</extra>"),
                      row=2, col=1)
    fig.update_xaxes(title_text="depth = layer / (n_layers\u00a0-\u00a01)", range=[-0.03, 1.03], row=2, col=1)
    fig.update_yaxes(title_text="mass past the window", tickformat=".0%", rangemode="tozero", row=2, col=1)
    fig.update_layout(template=TEMPLATE, height=760, width=max(700, 420 * n),
                      title="Window attention with and without attention sinks (StreamingLLM)")
    return fig
