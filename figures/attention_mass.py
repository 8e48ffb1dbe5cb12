"""Attention mass on needle / query / rest (the seed's Table 4) and how it spreads over layers."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors

PARTS = ("needle", "query", "rest")


def figure(df) -> go.Figure:
    agg = df[(df["layer"].astype(str) == "all") & df["part"].isin(PARTS)]
    keys = list(dict.fromkeys(zip(agg["model"], agg["mode"])))
    per_layer_rows = df[df["layer"].astype(str) != "all"]
    n_layers = per_layer_rows.assign(layer=per_layer_rows["layer"].astype(int)).groupby("model")["layer"].max() + 1
    normalised = n_layers.nunique() > 1  # models of different depth share a normalised-depth axis
    fig = make_subplots(rows=3, cols=1, row_heights=[0.36, 0.3, 0.34], vertical_spacing=0.09,
                        specs=[[{"type": "xy"}], [{"type": "xy"}], [{"type": "table"}]],
                        subplot_titles=("mean attention per token of each part (x 0.01), "
                                        "averaged over heads and layers",
                                        "share of attention on the needle, per layer (mean over heads; normalised "
                                        "depth when models differ in depth)", ""))
    colors = model_colors(m for m, _ in keys)
    modes = list(dict.fromkeys(mode for _, mode in keys))
    for model, mode in keys:
        shape = ["", "/", ".", "x"][modes.index(mode) % 4]
        g = agg[(agg["model"] == model) & (agg["mode"] == mode)].set_index("part").loc[list(PARTS)]
        fig.add_trace(go.Bar(x=list(PARTS), y=100 * g["mean_per_token"], name=f"{model} ({mode})",
                             marker_color=colors[model], marker_pattern_shape=shape, legendgroup=f"{model}{mode}",
                             hovertemplate="%{x}: %{y:.3f} x 0.01<extra>" + f"{model} {mode}</extra>"),
                      row=1, col=1)
        per_layer = df[(df["model"] == model) & (df["mode"] == mode) & (df["part"] == "needle")
                       & (df["layer"].astype(str) != "all")]
        per_layer = per_layer.assign(layer=per_layer["layer"].astype(int)).groupby("layer")["total_share"].mean()
        x = per_layer.index / max(1, n_layers[model] - 1) if normalised else per_layer.index
        fig.add_trace(go.Scatter(x=x, y=per_layer.values, customdata=per_layer.index,
                                 hovertemplate="layer %{customdata}: %{y:.3f}<extra>" + f"{model} ({mode})</extra>",
                                 mode="lines+markers", marker_color=colors[model],
                                 line=dict(color=colors[model],
                                           dash=["solid", "dot", "dash", "dashdot"][modes.index(mode) % 4]),
                                 legendgroup=f"{model}{mode}", showlegend=False,
                                 name=f"{model} ({mode})"), row=2, col=1)
    fig.update_xaxes(title_text="depth = layer / (n_layers\u00a0-\u00a01)" if normalised else "layer", row=2, col=1)
    header = ["model", "answer", "accuracy", "needle", "query", "rest", "needle share", "query share", "rest share"]
    cells = [[] for _ in header]
    for model, mode in keys:
        g = agg[(agg["model"] == model) & (agg["mode"] == mode)].set_index("part")
        values = [model, mode, f"{g['accuracy'].iloc[0]:.2f} (n={int(g['n_docs'].iloc[0])})"]
        values += [f"{100 * g.loc[p, 'mean_per_token']:.3f}" for p in PARTS]
        values += [f"{g.loc[p, 'total_share']:.3f}" for p in PARTS]
        for c, v in zip(cells, values):
            c.append(v)
    fig.add_trace(go.Table(header=dict(values=header, align="left"),
                           cells=dict(values=cells, align="left")), row=3, col=1)
    fig.update_layout(template=TEMPLATE, barmode="group", height=1000,
                      title="Attention mass on NIAH parts (mean per token x 0.01, as in Table 4)")
    return fig
