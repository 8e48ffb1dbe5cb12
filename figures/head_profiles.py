"""Head profiles of several models on one normalised-depth axis (layer / (n_layers - 1)), one panel per measure.

The position range's log axis labels values written out at decades (and 2 and 5 times them over less than three
decades), digits between them as unlabelled grid lines: plotly's own labels there are single digits a few px apart
(8, 9, 10) that run into each other on a panel of a 7 in page."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.position_ranges import log_ticks, written_out
from figures.style import COLORS, TEMPLATE, log_range

PANELS = (("previous_token_mass", "previous-token mass"), ("first_token_mass", "first-token (sink) mass"),
          ("local_mass", "local mass"), ("needle_mass", "needle mass (answer rows)"),
          ("retrieval_score", "retrieval score"), ("position_range", "position range (log)"))


def figure(df) -> go.Figure:
    panels = [(c, t) for c, t in PANELS if c in df and df[c].notna().any()]
    cols = 2
    n_rows = -(-len(panels) // cols)
    fig = make_subplots(rows=n_rows, cols=cols, subplot_titles=[t for _, t in panels],
                        vertical_spacing=0.12 / max(1, n_rows - 1) + 0.06)
    for i, (model, g) in enumerate(df.groupby("model", sort=False)):
        color = COLORS[i % len(COLORS)]
        for j, (col, _title) in enumerate(panels):
            r, c = j // cols + 1, j % cols + 1
            gg = g[g[col].notna()]
            if gg.empty:
                continue
            fig.add_trace(go.Scatter(
                x=gg["depth"], y=gg[col], mode="markers", marker=dict(color=color, size=6, opacity=0.6),
                name=f"{model} ({int(g['n_layers'].iloc[0])} layers)", legendgroup=model, showlegend=j == 0,
                customdata=gg[["layer", "head", "group"]].values,
                hovertemplate="layer %{customdata[0]} head %{customdata[1]} (%{customdata[2]}): %{y:.3f}<extra>"
                              + model + "</extra>"),
                row=r, col=c)
            mean = gg.groupby("depth")[col].mean()
            fig.add_trace(go.Scatter(x=mean.index, y=mean.values, mode="lines", line=dict(color=color, width=1.5),
                                     legendgroup=model, showlegend=False, hoverinfo="skip"), row=r, col=c)
            if col == "position_range" and (span := log_range(df[col])) is not None:
                labelled, grid = log_ticks(*span)
                fig.update_yaxes(type="log", range=span, tickmode="array", tickvals=labelled,
                                 ticktext=[written_out(v) for v in labelled],
                                 minor=dict(tickmode="array", tickvals=grid, showgrid=True, ticks=""), row=r, col=c)
    for j in range(len(panels)):
        fig.update_xaxes(range=[-0.05, 1.05],
                         title_text="depth = layer / (n_layers\u00a0-\u00a01)" if j >= len(panels) - cols else None,
                         row=j // cols + 1, col=j % cols + 1)
    fig.update_layout(template=TEMPLATE, height=300 * n_rows + 140,
                      title="Head profiles across models (dots: heads; lines: mean over a layer's heads)")
    return fig
