"""Share of sink heads per layer against depth (the layer's mean ``sink_share``: under Gu et al.'s estimator the share
of (head, sequence) pairs with alpha_1 > epsilon), one panel per input x start-token condition, a line per model and
length (longer contexts darker); given the unit-level values (``sink-rate.units.csv``: each sequence's sink indicator
per head), each point's 95% bootstrap interval over the sequences of the layer's per-sequence rate
(``stats.intervals``, 2,000 resamples) as an error bar."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import TEMPLATE, model_colors
from stats.intervals import bootstrap

CONDITION = ["model", "input", "start_token", "length", "layer"]

PANEL_PX, GAP_PX = 320, 90  # a row of panels and the gap under it (the axis ticks and the next row's title)


def _title(df, inp: str, start: bool) -> str:
    if inp == "separator-first":
        sep = df.loc[df["input"] == inp, "separator_text"].iloc[0] if "separator_text" in df else "the separator"
        return f"text, {sep} first"
    if inp == "start-second":
        return "text, start token second"
    return f"{inp}, {'with' if start else 'without'} start token"


def figure(df, units=None) -> go.Figure:
    conditions = list(dict.fromkeys(zip(df["input"], df["start_token"])))
    titles = [_title(df, i, s) for i, s in conditions]
    cols = min(2, len(conditions))
    rows = -(-len(conditions) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_yaxes=True,
                        vertical_spacing=min(0.18, GAP_PX / (PANEL_PX * rows)))
    colors = model_colors(list(dict.fromkeys(df["model"])))
    lengths = sorted(df["length"].unique())
    per_layer = df.groupby(CONDITION, sort=False).agg(rate=("sink_share", "mean"), depth=("depth", "first"))
    per_layer["lo"], per_layer["hi"] = per_layer["rate"], per_layer["rate"]
    if units is not None and df["estimator"].eq("gu").all():  # the rate is the mean of these indicators
        sink = units[units["measure"] == "sink"]
        per_sequence = sink.groupby(CONDITION + ["unit"], sort=False)["value"].mean()
        for key, rates in per_sequence.groupby(level=CONDITION, sort=False):
            if len(rates) > 1 and key in per_layer.index:
                iv = bootstrap(rates.to_numpy(), n_boot=2000)
                per_layer.loc[key, ["lo", "hi"]] = iv.lo, iv.hi
    per_layer = per_layer.reset_index()
    in_legend = set()
    for j, (inp, start) in enumerate(conditions):
        r, c = j // cols + 1, j % cols + 1
        for model, g in per_layer[(per_layer["input"] == inp)
                                  & (per_layer["start_token"] == start)].groupby("model", sort=False):
            for k, n in enumerate(lengths):
                gg = g[g["length"] == n]
                if gg.empty:
                    continue
                first = f"{model}{n}" not in in_legend  # a line's legend entry at its first panel, whichever
                in_legend.add(f"{model}{n}")
                fig.add_trace(go.Scatter(
                    x=gg["depth"], y=gg["rate"], mode="lines+markers", name=f"{model}, {n} tokens",
                    legendgroup=f"{model}{n}", showlegend=first,
                    line=dict(color=colors[model], width=1 + 1.5 * k / max(1, len(lengths) - 1),
                              dash=("dot", "dash", "solid")[min(2, k + 3 - len(lengths))] if len(lengths) <= 3
                              else "solid"),
                    marker=dict(size=4), customdata=gg[["layer"]].values,
                    error_y=dict(type="data", symmetric=False, array=gg["hi"] - gg["rate"],
                                 arrayminus=gg["rate"] - gg["lo"], thickness=0.8, width=0),
                    hovertemplate="layer %{customdata[0]}: %{y:.0%} sink heads<extra>"
                                  + f"{model}, {n} tokens</extra>"),
                    row=r, col=c)
        fig.update_xaxes(range=[-0.05, 1.05],
                         title_text="depth = layer / (n_layers\u00a0-\u00a01)" if r == rows else None, row=r, col=c)
    fig.update_yaxes(range=[-0.05, 1.05], tickformat=".0%")
    fig.update_yaxes(title_text="sink heads in the layer" if df["estimator"].iloc[0] == "poslens"
                     else "sink heads in the layer (per sequence)", col=1)
    eps = df["epsilon"].iloc[0]
    how = ("Gu et al.'s alpha_1 (all query rows) > {eps:g}, per sequence" if df["estimator"].iloc[0] == "gu"
           else "mean first-token attention over rows 1..T-1 and sequences > {eps:g} (poslens' estimator)")
    fig.update_layout(template=TEMPLATE, height=PANEL_PX * rows + 160, title=f"Attention sinks: {how.format(eps=eps)}")
    return fig
