"""Probe R^2 by layer for token, segment and intra-segment position, per model and subspace.

The R^2 axis runs from -0.2 (or lower: a shuffled control or a failed probe can score well below 0) to 1, widened
to hold every mean and its error bar."""

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors

TITLES = {"token": "token-level position", "segment": "segment index", "intra": "intra-segment progress"}


def figure(df) -> go.Figure:
    targets = [t for t in TITLES if t in set(df["target"])]
    fig = make_subplots(rows=1, cols=len(targets), subplot_titles=[TITLES[t] for t in targets], shared_yaxes=True)
    series = list(dict.fromkeys(zip(df["model"], df["subspace"])))
    dashes = {"full": "solid", "ap": "dash", "semantic": "dot"}
    colors = model_colors(df["model"])
    for j, target in enumerate(targets, start=1):
        for model, space in series:
            g = df[(df["model"] == model) & (df["subspace"] == space) & (df["target"] == target)]
            for control, gg in g.groupby("control"):
                shuffled = control == "shuffled"
                fig.add_trace(go.Scatter(
                    x=gg["layer"], y=gg["r2_mean"], mode="lines+markers",
                    name=f"{model} [{space}]" + (" shuffled" if shuffled else ""),
                    legendgroup=f"{model}{space}{control}", showlegend=j == 1, opacity=0.35 if shuffled else 1.0,
                    line=dict(color=colors[model], dash="longdashdot" if shuffled else dashes.get(space, "solid")),
                    error_y=dict(type="data", array=gg["r2_std"], visible=True)), row=1, col=j)
        fig.update_xaxes(title_text="layer", row=1, col=j)
    fig.update_yaxes(title_text="held-out R^2 (mean ± std over seeds)", range=_r2_range(df), row=1, col=1)
    fig.update_layout(template=TEMPLATE, height=480, title="Linear probes for position (ridge, held-out documents)")
    return fig


def _r2_range(df) -> list[float]:
    """[-0.2, 1.02], widened by 3% of the span past the lowest and highest error-bar end."""
    std = df["r2_std"].fillna(0)
    ends = pd.concat([df["r2_mean"] - std, df["r2_mean"] + std]).dropna()
    lo, hi = (float(ends.min()), float(ends.max())) if len(ends) else (0.0, 1.0)
    pad = 0.03 * (max(hi, 1.0) - min(lo, -0.2))
    return [min(-0.2, lo - pad), max(1.02, hi + pad)]
