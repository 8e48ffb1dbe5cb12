"""Assigned position against token index, per chosen head, with jumps marked and plateaus shaded."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import COLORS, TEMPLATE


def figure(df) -> go.Figure:
    first = None
    if "document" in df and len(df.groupby(["document", "window"])) > 1:  # several contexts: draw the first
        first = df[["document", "window"]].iloc[0]
        df = df[(df["document"] == first["document"]) & (df["window"] == first["window"])]
    panels = list(df.groupby(["model", "layer"], sort=False))
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=0.3 / max(1, len(panels)),
                        subplot_titles=[f"{m}, layer {l} ({g['mode'].iloc[0]})" for (m, l), g in panels])
    palette = COLORS
    for row, ((model, layer), g) in enumerate(panels, start=1):
        for j, (head, gh) in enumerate(g.groupby("head")):
            s = gh.iloc[0]
            fig.add_trace(go.Scatter(
                x=gh["token_index"], y=gh["position"], mode="lines", line=dict(color=palette[j % 7], width=1.2),
                name=f"head {head}", legendgroup=f"h{head}", showlegend=row == 1, customdata=gh["token"],
                hovertemplate=f"head {head}: " + "%{x} %{customdata!r} z=%{y:.3f}<extra>" +
                f"{int(s.n_jumps)} jumps, longest plateau {int(s.longest_plateau)}</extra>"), row=row, col=1)
            jumps = gh[gh["is_jump"]]
            fig.add_trace(go.Scatter(x=jumps["token_index"], y=jumps["position"], mode="markers", showlegend=False,
                                     marker=dict(color=palette[j % 7], size=6, symbol="x"),
                                     hoverinfo="skip"), row=row, col=1)
        fig.update_yaxes(title_text="z", row=row, col=1)
    fig.update_xaxes(title_text="token index", row=len(panels), col=1)
    fig.update_layout(template=TEMPLATE, height=260 * len(panels) + 120,
                      title="Assigned position vs token index (x: jumps larger than k x the median step)"
                      + (f", document {first['document']} window {first['window']}" if first is not None else ""))
    return fig
