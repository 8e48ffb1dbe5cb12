"""Rotary bands: each band's mean query and key norm against its wavelength (Barbero et al.'s measure; a line per model
and kind of layer, queries solid and keys dashed), the share of the attention logit each band carries (poslens' measure;
dotted for the previous-token heads), and the loss change and the NIAH accuracy with bands removed or unrotated (the
loss change at the longer length too, ``part=long_effects``, as open markers)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, log_range, model_colors

POSITIONAL = 0.5


def figure(df) -> go.Figure:
    bands, eff = df[df["part"] == "bands"], df[df["part"] == "effects"]
    models = list(dict.fromkeys(df["model"]))
    colors = model_colors(models)
    fig = make_subplots(rows=3, cols=2, specs=[[{"colspan": 2}, None], [{"colspan": 2}, None], [{}, {}]],
                        horizontal_spacing=0.08, vertical_spacing=0.11, row_heights=[0.36, 0.36, 0.28],
                        subplot_titles=("mean 2-norm of the band's queries and keys (Barbero et al.)",
                                        "share of the attention logit, by band (poslens' measure)",
                                        "loss change (nats per token)", "NIAH accuracy"))
    kinds = list(dict.fromkeys(bands["attention"]))
    for (model, kind), g in bands.groupby(["model", "attention"], sort=False):
        label = model if len(kinds) == 1 else f"{model}, {kind} layers"
        width = 2 if kind == "full" else 1
        mean = g.groupby("band").agg(wavelength=("wavelength", "mean"), q=("q_norm", "mean"), k=("k_norm", "mean"),
                                     n=("head", "size")).reset_index()
        for col, dash, what in (("q", "solid", "queries"), ("k", "dash", "keys")):
            fig.add_trace(go.Scatter(
                x=mean["wavelength"], y=mean[col], mode="lines", name=f"{label}: {what}", legendgroup=model,
                line=dict(color=colors[model], width=width, dash=dash),
                customdata=mean[["band", "n"]].astype(float).values,
                hovertemplate="band %{customdata[0]} (wavelength %{x:.3g} tokens): mean norm %{y:.3g}, over "
                              "%{customdata[1]} heads x layers<extra>" + f"{label}, {what}</extra>"), row=1, col=1)
        for who, heads, w in (("all heads", g, 2),
                              ("previous-token heads", g[g["previous_token_mass"] >= POSITIONAL], 1)):
            if heads.empty:
                continue
            share = heads.groupby("band").agg(wavelength=("wavelength", "mean"), share=("poslens_logit_share", "mean"),
                                              n=("head", "size")).reset_index()
            fig.add_trace(go.Scatter(
                x=share["wavelength"], y=share["share"], mode="lines",
                name=f"{label}: logit share ({who})", legendgroup=model,
                line=dict(color=colors[model], width=w,
                          dash=("solid" if kind == "full" else "dash") if who == "all heads" else "dot"),
                customdata=share[["band", "n"]].astype(float).values,
                hovertemplate="band %{customdata[0]} (wavelength %{x:.3g} tokens): %{y:.2%} of the logit, mean of "
                              "%{customdata[1]} heads x layers<extra>" + f"{label}, {who}</extra>"), row=2, col=1)
    for row in (1, 2):
        fig.update_xaxes(type="log", range=log_range(bands["wavelength"]), row=row, col=1,
                         title_text="wavelength (tokens per turn)" if row == 2 else None)
    fig.update_yaxes(title_text="mean band norm", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="share of the logit", tickformat=".1%", rangemode="tozero", row=2, col=1)
    order = list(dict.fromkeys(eff["condition"]))
    _effects(fig, df, models, colors, order)
    for col in (1, 2):
        fig.update_yaxes(tickvals=list(range(len(order))), ticktext=order, range=[len(order) - 0.5, -0.5],
                         showticklabels=col == 1, row=3, col=col)
    fig.add_vline(x=0, line=dict(width=1, color="#888"), row=3, col=1)
    fig.update_xaxes(range=[-0.05, 1.05], tickformat=".0%", row=3, col=2)
    fraction = eff["fraction"].max()
    fig.update_layout(template=TEMPLATE, height=1000, width=900,
                      title=f"Rotary bands: what each carries, and the highest / lowest {fraction:.0%} removed or "
                            "unrotated")
    return fig


def _effects(fig: go.Figure, df, models: list, colors: dict, order: list) -> None:
    """The third row: a marker per model and length for each condition (filled: the contexts of ``length``; open: those
    of ``long_length``, loss only), offset so that none hides another."""
    parts = [p for p in ("effects", "long_effects") if (df["part"] == p).any()]
    units = [(m, p) for m in models for p in parts if ((df["model"] == m) & (df["part"] == p)).any()]
    for k, (model, part) in enumerate(units):
        g = df[(df["model"] == model) & (df["part"] == part)]
        base = float(g.loc[g["condition"] == "none", "loss"].iloc[0])
        y = [order.index(c) + (k - (len(units) - 1) / 2) * 0.44 / max(1, len(units) - 1) for c in g["condition"]]
        long = part == "long_effects"
        label = f"{model} at {int(g['length'].max()):,} tokens"
        symbol = models.index(model) % 8 + (100 if long else 0)  # plotly's open variant of the same symbol
        columns = [(1, g["loss"] - base, "%{customdata}: %{x:+.3f} nats")]
        if not long:
            columns.append((2, g["niah_accuracy"], "%{customdata}: %{x:.0%}"))
        for col, x, text in columns:
            fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name=label, legendgroup=model,
                                     showlegend=col == 1 and len(parts) > 1,
                                     marker=dict(color=colors[model], size=8, symbol=symbol,
                                                 line=dict(width=2 if long else 0, color=colors[model])),
                                     customdata=g["condition"], hovertemplate=text + "<extra>" + label + "</extra>"),
                          row=3, col=col)
