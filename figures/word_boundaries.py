"""Word-boundary ROC-AUC per layer with bootstrap intervals, against jieba and gold segmentation."""

import plotly.graph_objects as go

from figures.style import TEMPLATE, layer_order, model_colors


def figure(df) -> go.Figure:
    fig = go.Figure()
    layers = layer_order(df.loc[df["layer"] != "jieba", "layer"])
    colors = model_colors(df["model"])
    for (model, ref), g in (df[df["layer"] != "jieba"].groupby(["model", "reference"], sort=False)):
        g = g.set_index("layer").loc[[x for x in layers if x in set(g["layer"])]]
        fig.add_trace(go.Scatter(
            x=list(g.index), y=g["auc"], mode="lines+markers", name=f"{model} vs {ref}",
            line=dict(color=colors[model], dash="solid" if ref == "gold" else "dot"),
            error_y=dict(type="data", symmetric=False, array=g["ci_high"] - g["auc"],
                         arrayminus=g["auc"] - g["ci_low"]),
            hovertemplate="%{x}: AUC %{y:.3f}<extra>" + f"{model} vs {ref}" + "</extra>"))
    fig.add_hline(y=0.5, line=dict(color="grey", dash="dash"), annotation_text="chance")
    agree = df[df["layer"] == "jieba"]
    note = ""
    if len(agree):
        a = agree.iloc[0]
        note = f"<br><sup>jieba vs gold on the same {int(a.n_gaps):,} gaps: AUC {a.auc:.3f}, F1 {a.f1:.3f}; " \
               f"boundary rate gold {a.positive_rate:.2f}</sup>"
    fig.update_layout(template=TEMPLATE, title="Chinese word-boundary ROC-AUC of the learned increments" + note,
                      xaxis_title="increments from layer", yaxis_title="ROC-AUC (95% document bootstrap)",
                      yaxis=dict(range=[0, 1]), height=480)
    return fig
