"""Per-head influence of AP, semantic and RP logits (ternary), coloured by taxonomy group."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import OKABE_ITO, TEMPLATE

GROUPS = ("AP-oriented", "semantic-oriented", "RP-supported", "RP-oriented")  # analyses.kl_ablation.GROUPS (tested equal)
GROUP_COLORS = {"AP-oriented": OKABE_ITO["vermillion"], "semantic-oriented": OKABE_ITO["blue"],
                "RP-supported": OKABE_ITO["green"], "RP-oriented": OKABE_ITO["orange"], "none": "#999"}


def group_counts(df):
    """Heads per model and group (the table under the ternaries), from the CSV alone: no torch import."""
    counts = df.groupby(["model", "group"]).size().unstack(fill_value=0)
    for g in GROUPS:
        if g not in counts:
            counts[g] = 0
    return counts[list(GROUPS)]


def ternaries(df, title: str) -> go.Figure:
    models = list(dict.fromkeys(df["model"]))
    counts = group_counts(df)
    fig = make_subplots(rows=2, cols=len(models), specs=[[{"type": "ternary"}] * len(models), [{"type": "table", "colspan": len(models)}] + [None] * (len(models) - 1)],
                        row_heights=[0.72, 0.28], subplot_titles=models)
    for i, model in enumerate(models, start=1):
        g = df[df["model"] == model]
        for group, gg in g.groupby("group"):
            fig.add_trace(go.Scatterternary(
                a=gg["influence_ap"], b=gg["influence_sem"], c=gg["influence_rp"], mode="markers", name=group,
                marker=dict(size=9, color=GROUP_COLORS.get(group, "#999"), line=dict(width=0.5, color="white")),
                legendgroup=group, showlegend=i == 1 or group not in set(df[df["model"] == models[0]]["group"]),
                text=[f"L{l}H{h}" for l, h in zip(gg["layer"], gg["head"])],
                hovertemplate="%{text}: AP %{a:.2f} / sem %{b:.2f} / RP %{c:.2f}<extra>" + group + "</extra>"), row=1, col=i)
    layout = {}
    for i in range(1, len(models) + 1):
        key = "ternary" if i == 1 else f"ternary{i}"
        layout[key] = dict(aaxis_title="AP", baxis_title="sem", caxis_title="RP", sum=1)
    fig.update_layout(**layout)
    fig.add_trace(go.Table(header=dict(values=["model"] + list(GROUPS)), cells=dict(values=[list(counts.index)] + [list(counts[g]) for g in GROUPS])),
                  row=2, col=1)
    fig.update_layout(template=TEMPLATE, title=title, height=640, width=max(700, 420 * len(models)))
    return fig


def figure(df) -> go.Figure:
    return ternaries(df, "Influence of each logit component per head (KL ablation, normalised per head)")
