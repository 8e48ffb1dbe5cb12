"""Per-byte-category increments: a range chart (min..max with the mean) and the seed's table."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    groups = list(df.groupby(["model", "source"], sort=False))
    fig = make_subplots(rows=2, cols=1, row_heights=[0.55, 0.45], vertical_spacing=0.08,
                        specs=[[{"type": "xy"}], [{"type": "table"}]])
    categories = list(dict.fromkeys(df["category"]))
    colors = model_colors(m for (m, _), _ in groups)
    for (model, source), g in groups:
        g = g.set_index("category").loc[categories]
        fig.add_trace(go.Scatter(
            x=g["mean"], y=categories, mode="markers", name=f"{model} ({source})",
            marker=dict(size=10, color=colors[model]),
            error_x=dict(type="data", symmetric=False, array=g["max"] - g["mean"], arrayminus=g["mean"] - g["min"]),
            hovertemplate="%{y}: mean %{x:.3f}<extra>" + f"{model} {source}" + "</extra>"), row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="learned increment δ (from the byte embedding alone)", row=1, col=1)
    header = ["category", "bytes"] + [f"{m} ({s})" for (m, s), _ in groups]
    cells = [categories, list(df.drop_duplicates("category")["members"])]
    for _, g in groups:
        g = g.set_index("category").loc[categories]
        cells.append([f"{lo:.2f}–{hi:.2f} (mean {mu:.2f})" if n > 1 else f"{mu:.2f}"
                      for lo, hi, mu, n in zip(g["min"], g["max"], g["mean"], g["n_ids"])])
    fig.add_trace(go.Table(header=dict(values=header, align="left"),
                           cells=dict(values=cells, align="left")), row=2, col=1)
    fig.update_layout(template=TEMPLATE, title="Learned increment δ by byte category", height=820)
    return fig
