"""Increment at the internal space of two-word entities, real vs reversed order, per layer."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import OKABE_ITO, TEMPLATE, layer_order


def _p(p: float) -> str:
    return "p=1" if p >= 0.999 else f"p={p:.1e}" if p < 1e-3 else f"p={p:.3f}"


def figure(df) -> go.Figure:
    panels = list(df.groupby(["model", "set"], sort=False))
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[f"{m}: {s} names" for (m, s), _ in panels],
                        vertical_spacing=0.12 / max(1, len(panels) - 1) if len(panels) > 1 else 0.1)
    for row, ((model, name), g) in enumerate(panels, start=1):
        g = g.set_index("layer").loc[layer_order(g["layer"])]
        labels = [f"{layer}<br>{_p(p)}<br>{f:.0%} real<rev"
                  for layer, p, f in zip(g.index, g["p_value"], g["frac_real_smaller"])]
        for col, color, label in (("mean_real", OKABE_ITO["blue"], "real order"),
                                  ("mean_reversed", OKABE_ITO["vermillion"], "reversed")):
            fig.add_trace(go.Bar(x=labels, y=g[col], name=label, marker_color=color, showlegend=row == 1,
                                 hovertemplate="%{y:.3f}<extra>" + label + "</extra>"), row=row, col=1)
    fig.update_layout(template=TEMPLATE, barmode="group", height=300 * len(panels) + 80,
                      title="Increment at the space inside two-word names (mean over entities and carriers)")
    fig.update_yaxes(title_text="δ at the space")
    return fig
