"""Per-head influence of AP, semantic and RP logits (ternary), coloured by taxonomy group."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import OKABE_ITO, TEMPLATE

# analyses.kl_ablation.GROUPS (tested equal)
GROUPS = ("AP-oriented", "semantic-oriented", "RP-supported", "RP-oriented")
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
    """One ternary per model, the model's name in its AP corner title (no subplot title to sit on an axis title),
    corner ticks left out (two labels share each corner), and the heads per group in the legend below, one count
    per model in the ternaries' order."""
    models = list(dict.fromkeys(df["model"]))
    counts = group_counts(df)
    fig = make_subplots(rows=1, cols=len(models), specs=[[{"type": "ternary"}] * len(models)], horizontal_spacing=0.12)
    shown = set()
    for i, model in enumerate(models, start=1):
        g = df[df["model"] == model]
        for group, gg in g.groupby("group"):
            n = ", ".join(str(int(counts.loc[m, group])) if group in counts else "0" for m in models)
            fig.add_trace(go.Scatterternary(
                a=gg["influence_ap"], b=gg["influence_sem"], c=gg["influence_rp"], mode="markers",
                name=f"{group} ({n} heads)", marker=dict(size=9, color=GROUP_COLORS.get(group, "#999"),
                                                         line=dict(width=0.5, color="white")),
                legendgroup=group, showlegend=group not in shown,
                text=[f"L{l}H{h}" for l, h in zip(gg["layer"], gg["head"])],
                hovertemplate="%{text}: AP %{a:.2f} / sem %{b:.2f} / RP %{c:.2f}<extra>" + group + "</extra>"),
                          row=1, col=i)
            shown.add(group)
    inner = dict(tickvals=[0.25, 0.5, 0.75])
    for i, model in enumerate(models, start=1):
        fig.update_layout({"ternary" if i == 1 else f"ternary{i}": dict(
            aaxis=dict(title_text=f"<b>{model}</b><br>AP", **inner), baxis=dict(title_text="sem", **inner),
            caxis=dict(title_text="RP", **inner), sum=1, domain_y=[0.42, 0.88])})
    fig.update_layout(template=TEMPLATE, title=title, height=700, width=max(700, 420 * len(models)),
                      legend=dict(orientation="h", x=0, xanchor="left", y=0, yanchor="bottom"))
    return fig


def figure(df) -> go.Figure:
    return ternaries(df, "Influence of each logit component per head (KL ablation, normalised per head)")
