"""Held-out loss per model and language, with bootstrap intervals."""

import plotly.graph_objects as go

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    fig = go.Figure()
    colors = model_colors(df["model"])
    for model, g in df.groupby("model", sort=False):
        fig.add_trace(go.Bar(
            x=g["language"], y=g["loss"], name=model, marker_color=colors[model],
            error_y=dict(type="data", symmetric=False, array=g["ci_high"] - g["loss"],
                         arrayminus=g["loss"] - g["ci_low"]),
            hovertemplate="%{x}: %{y:.4f} nats/byte<extra>" + model + "</extra>"))
    steps = {m: g["trained_steps"].iloc[0] for m, g in df.groupby("model")}
    budget = ", ".join(f"{m}: {int(s)} steps" for m, s in steps.items() if s == s and s is not None)
    fig.update_layout(template=TEMPLATE, barmode="group", yaxis_title="held-out loss (nats per byte)",
                      title="Loss neutrality: same data, same budget" + (f"<br><sup>{budget}</sup>" if budget else ""),
                      height=440)
    return fig
