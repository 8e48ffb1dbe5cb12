"""Window attention: next-token loss along the document for each condition (a panel per model, full attention black),
and each layer's attention mass on keys past the window with full attention (mean over heads, a line per model).
Streaming (``part=stream``): the loss along the stream for each condition (a panel per model), the trained length and
the cache size marked, and each condition's mean loss over the spans of the stream compared (past the trained length,
the re-computed tokens)."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.style import OKABE_ITO, TEMPLATE, model_colors

# conditions in their own colours and dashes (the models' colours belong to the panel below): full / dense attention
# grey, the plain window purple, then blues for more sinks; re-computation green markers
STYLES = [("#666666", "solid"), (OKABE_ITO["purple"], "solid"), (OKABE_ITO["sky"], "dash"), (OKABE_ITO["blue"], "dot"),
          (OKABE_ITO["yellow"], "dashdot")]
RECOMPUTE_COLOR = OKABE_ITO["green"]
RECOMPUTE_START_COLOR = OKABE_ITO["vermillion"]
SAMPLED = "re-computation"  # the conditions that start so (with or without the start token) run on sampled tokens


def _sampled(condition: str) -> bool:
    return condition.startswith(SAMPLED)


def figure(df) -> go.Figure:
    if "part" in df and (df["part"] == "stream").any():
        return streaming_figure(df[df["part"] == "stream"])
    loss, reach = df[df["part"] == "loss"], df[df["part"] == "reach"]
    models = list(dict.fromkeys(df["model"]))
    colors = model_colors(models)
    n = len(models)
    fig = make_subplots(rows=2, cols=n, specs=[[{}] * n, [{"colspan": n}] + [None] * (n - 1)], vertical_spacing=0.2,
                        subplot_titles=[f"{m}: loss along the document" for m in models]
                        + ["attention on keys past the window, with full attention"])
    conditions = list(dict.fromkeys(loss["condition"]))
    shade = {c: STYLES[min(i, len(STYLES) - 1)] for i, c in enumerate(conditions)}
    for j, model in enumerate(models, 1):
        g = loss[(loss["model"] == model) & (loss["bucket"] != "past the window")]
        window = int(df.loc[df["model"] == model, "window"].iloc[0])
        for condition, c in g.groupby("condition", sort=False):
            fig.add_trace(go.Scatter(x=c["position"], y=c["loss"], mode="lines+markers",
                                     name=condition, legendgroup=condition, showlegend=j == 1,
                                     line=dict(color=shade[condition][0], dash=shade[condition][1]),
                                     marker=dict(size=5),
                                     customdata=c[["bucket", "n_tokens"]].values,
                                     hovertemplate="positions %{customdata[0]}: %{y:.3f} nats "
                                                   "(%{customdata[1]} tokens)<extra>" + condition + "</extra>"),
                          row=1, col=j)
        fig.add_vline(x=window, line=dict(dash="dash", width=1, color="#888"), row=1, col=j)
        fig.update_xaxes(title_text="position in the document", row=1, col=j)
    fig.update_yaxes(title_text="next-token loss (nats)", row=1, col=1)
    per_layer = reach.groupby(["model", "layer"], sort=False).agg(depth=("depth", "first"),
                                                                  beyond=("mass_beyond_window", "mean"),
                                                                  attention=("attention", "first")).reset_index()
    for model, g in per_layer.groupby("model", sort=False):
        fig.add_trace(go.Scatter(x=g["depth"], y=g["beyond"], mode="lines+markers", name=f"{model}: past the window",
                                 line=dict(color=colors[model]),
                                 marker=dict(size=6, symbol=["circle-open" if a != "full" else "circle"
                                                             for a in g["attention"]]),
                                 customdata=g[["layer", "attention"]].values,
                                 hovertemplate="layer %{customdata[0]} (%{customdata[1]}): %{y:.1%}<extra>" + model
                                               + "</extra>"),
                      row=2, col=1)
    fig.update_xaxes(title_text="depth = layer / (n_layers\u00a0-\u00a01)", range=[-0.03, 1.03], row=2, col=1)
    fig.update_yaxes(title_text="mass past the window", tickformat=".0%", rangemode="tozero", row=2, col=1)
    fig.update_layout(template=TEMPLATE, height=760, width=max(700, 420 * n),
                      title="Window attention with and without attention sinks (StreamingLLM)")
    return fig


CONTROL = ", no start token"


def streaming_figure(df) -> go.Figure:
    models = list(dict.fromkeys(df["model"]))
    n = len(models)
    spans = [b for b in ("past the trained length", "all", "re-computed tokens") if (df["bucket"] == b).any()]
    fig = make_subplots(rows=2, cols=n, vertical_spacing=0.22, horizontal_spacing=0.08,
                        subplot_titles=[f"{m}: loss along the stream" for m in models]
                        + [f"{m}: mean loss over spans of the stream" for m in models])
    shade = _stream_shades(df)
    curves = _stream_curves(df)
    shown = set()
    for j, model in enumerate(models, 1):
        _stream_losses(fig, df, curves[curves["model"] == model], model, shade, shown, j)
        _span_bars(fig, df, model, spans, shade, shown, j)
    fig.update_yaxes(title_text="next-token loss (nats)", row=1, col=1)
    fig.update_yaxes(title_text="mean loss (nats)", row=2, col=1)
    fig.update_layout(template=TEMPLATE, height=760, width=max(700, 520 * n), barmode="group",
                      title="Streaming through a rolling KV cache (StreamingLLM)")
    return fig


def _stream_shades(df) -> dict:
    """Each condition's (colour, dash): a control condition (the stream without its start token) takes its
    condition's colour with long dashes; re-computation green, with the start token first vermillion."""
    base = list(dict.fromkeys(c.removesuffix(CONTROL) for c in df["condition"] if not _sampled(c)))
    shade = {c: STYLES[min(i, len(STYLES) - 1)] for i, c in enumerate(base)}
    shade |= {c + CONTROL: (shade[c][0], "longdash") for c in base}
    sampled = [c for c in dict.fromkeys(df["condition"]) if _sampled(c)]
    shade |= {c: (RECOMPUTE_COLOR if c == SAMPLED else RECOMPUTE_START_COLOR, "solid") for c in sampled}
    return shade


def _stream_curves(df):
    """The rows drawn along the stream: re-computation's buckets (with or without the start token) hold a few sampled
    tokens each, so its points are drawn only for a model whose buckets all hold 20 or more (its bars compare it on
    the same tokens)."""
    curves = df[df["position"].notna()]
    sampled = curves["condition"].map(_sampled)
    few = curves[sampled & (curves["n_tokens"] < 20)]["model"].unique()
    return curves[~(sampled & curves["model"].isin(few))]


def _stream_losses(fig: go.Figure, df, g, model: str, shade: dict, shown: set, j: int) -> None:
    """Panel ``j`` of the first row: each condition's loss along ``model``'s stream (re-computation as markers, a
    control with open markers), the trained length and the cache size marked; the conditions drawn join ``shown``."""
    first = df[df["model"] == model].iloc[0]
    for condition, c in g.groupby("condition", sort=False):
        shown.add(condition)
        sparse, control = _sampled(condition), condition.endswith(CONTROL)
        fig.add_trace(go.Scatter(x=c["position"], y=c["loss"],
                                 mode="markers" if sparse else "lines+markers", name=condition,
                                 legendgroup=condition, showlegend=j == 1,
                                 line=dict(color=shade[condition][0], dash=shade[condition][1]),
                                 marker=dict(size=8 if sparse else 5, color=shade[condition][0],
                                             symbol="diamond" if sparse else "circle-open" if control
                                             else "circle"),
                                 customdata=c[["bucket", "n_tokens"]].values,
                                 hovertemplate="positions %{customdata[0]}: %{y:.3f} nats "
                                               "(%{customdata[1]} tokens)<extra>" + condition + "</extra>"),
                      row=1, col=j)
    trained, stream = int(first["trained_length"]), int(first["stream_tokens"])
    if trained < stream:
        fig.add_vline(x=trained, line=dict(dash="dash", width=1, color="#444"), row=1, col=j,
                      annotation_text=f"trained length {trained}", annotation_position="top left")
    cache = df.loc[df["model"] == model, "cache_size"].dropna()
    if len(cache) and int(cache.iloc[0]) < stream:
        fig.add_vline(x=int(cache.iloc[0]), line=dict(dash="dot", width=1, color="#999"), row=1, col=j,
                      annotation_text=f"cache {int(cache.iloc[0])} full", annotation_position="bottom right")
    fig.update_xaxes(title_text="position in the stream", row=1, col=j)


def _span_bars(fig: go.Figure, df, model: str, spans: list[str], shade: dict, shown: set, j: int) -> None:
    """Panel ``j`` of the second row: each condition's mean loss over the spans of ``model``'s stream (a control's
    bars hatched); re-computation is sampled, so its bar stands only beside the same tokens' (the re-computed
    tokens)."""
    bars = df[(df["model"] == model) & df["bucket"].isin(spans)
              & (~df["condition"].map(_sampled) | (df["bucket"] == "re-computed tokens"))]
    for condition, c in bars.groupby("condition", sort=False):
        fig.add_trace(go.Bar(x=c["bucket"], y=c["loss"], name=condition, legendgroup=condition,
                             showlegend=condition not in shown and j == 1,
                             marker=dict(color=shade[condition][0],
                                         pattern_shape="/" if condition.endswith(CONTROL) else ""),
                             customdata=c[["n_tokens"]].values,
                             hovertemplate="%{x}: %{y:.3f} nats (%{customdata[0]} tokens)<extra>" + condition
                                           + "</extra>"),
                      row=2, col=j)
    fig.update_xaxes(categoryorder="array", categoryarray=spans, row=2, col=j)
