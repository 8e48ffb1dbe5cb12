"""Retrieval heads: every head's retrieval score by rank (a line per model, the threshold dashed; Wu et al.'s score or
poslens', as the table's ``score`` says), and NIAH accuracy with the top-k heads masked (their queries or their outputs,
as ``masking`` says) against k random heads of the same layers (mean over draws, each draw a dot); a row of the two
panels per prompt length run."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors


def figure(df) -> go.Figure:
    models = list(dict.fromkeys(df["model"]))
    colors = model_colors(models)
    score, masking_kind = df["score"].iloc[0], df["masking"].iloc[0]
    masked = {"query": "queries zeroed from the last prompt token on (the authors')",
              "query-all": "queries zeroed everywhere", "output": "outputs zeroed"}[masking_kind]
    lengths = sorted(set(df["length"].astype(int)))
    titles = [t for n in lengths for t in (f"every head's retrieval score, by rank ({n:,} tokens)",
                                           f"NIAH accuracy, k heads masked ({n:,} tokens)")]
    fig = make_subplots(rows=len(lengths), cols=2, horizontal_spacing=0.12,
                        vertical_spacing=min(0.12, 0.5 / len(lengths)), subplot_titles=titles)
    for row, n in enumerate(lengths, 1):
        at = df[df["length"] == n]
        _scores(fig, at[at["part"] == "heads"], colors, row, first=row == 1)
        _masking(fig, at[at["part"] == "masking"], colors, row, first=row == 1)
        fig.add_hline(y=float(df["threshold"].iloc[0]), line=dict(dash="dash", width=1, color="#888"), row=row, col=1)
        fig.update_xaxes(title_text="share of heads, best first", tickformat=".0%", range=[0, 1.02], row=row, col=1)
        fig.update_yaxes(title_text=f"retrieval score ({'Wu et al.' if score == 'wu' else 'poslens, teacher-forced'})",
                         range=[-0.03, 1.03], row=row, col=1)
        fig.update_xaxes(title_text="heads masked (k)", rangemode="tozero", row=row, col=2)
        fig.update_yaxes(title_text="NIAH accuracy", range=[-0.03, 1.03], tickformat=".0%", row=row, col=2)
    label = "Wu et al.'s score" if score == "wu" else "poslens' teacher-forced score"
    fig.update_layout(template=TEMPLATE, height=120 + 340 * len(lengths), width=1000,
                      title="Retrieval heads (Wu et al. 2024): few heads copy the needle, and masking them breaks "
                            f"retrieval<br><sup>{label}; masked heads' {masked}</sup>")
    return fig


def _scores(fig: go.Figure, heads, colors: dict, row: int, first: bool) -> None:
    for model, g in heads.groupby("model", sort=False):
        g = g.sort_values("rank")
        fig.add_trace(go.Scatter(x=(g["rank"] + 1) / len(g), y=g["retrieval_score"].fillna(0),
                                 mode="lines+markers", name=model, showlegend=first,
                                 legendgroup=model, line=dict(color=colors[model]), marker=dict(size=3),
                                 customdata=g[["layer", "head", "rank"]].astype(float).values,
                                 hovertemplate="L%{customdata[0]}H%{customdata[1]} (rank %{customdata[2]}): "
                                               "%{y:.2f}<extra>" + model + "</extra>"), row=row, col=1)


def _masking(fig: go.Figure, masking, colors: dict, row: int, first: bool) -> None:
    for model, g in masking.groupby("model", sort=False):
        none = float(g.loc[g["condition"] == "none", "niah_accuracy"].iloc[0])
        for condition, dash in (("top", "solid"), ("random", "dot")):
            c = g[g["condition"] == condition]
            mean = c.groupby("k", as_index=False).agg(acc=("niah_accuracy", "mean"))
            fig.add_trace(go.Scatter(
                x=[0] + mean["k"].tolist(), y=[none] + mean["acc"].tolist(), mode="lines+markers",
                name=f"{model}, {'top retrieval heads' if condition == 'top' else 'random heads, same layers'}",
                legendgroup=model, showlegend=first, line=dict(color=colors[model], dash=dash),
                hovertemplate="k=%{x}: %{y:.0%}<extra>" + f"{model} {condition}</extra>"), row=row, col=2)
            if condition == "random" and c["draw"].nunique() > 1:
                fig.add_trace(go.Scatter(x=c["k"], y=c["niah_accuracy"], mode="markers",
                                         showlegend=False, legendgroup=model,
                                         marker=dict(color=colors[model], size=5, symbol="circle-open"),
                                         hovertemplate="k=%{x}, one draw: %{y:.0%}<extra>" + model + "</extra>"),
                              row=row, col=2)
