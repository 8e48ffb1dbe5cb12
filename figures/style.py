"""Shared look: one colour per model in every figure, the screen and paper templates, layer ordering.

Colours are Okabe-Ito (distinguishable under the common colour-vision deficiencies). A bundled model always
gets the colour below; another name gets one picked from a hash of the name, moved on to the next free colour
when two models of one figure would share it. ``poslens-paper`` is the template for print: a sans-serif face at
8 pt (text) and 7 pt (ticks) once the figure is printed at its exported width (plotly sizes are CSS pixels,
1 px = 0.75 pt in the PDF), thin axes, small margins, no title unless one is asked for.
"""

from __future__ import annotations

import zlib

import plotly.graph_objects as go
import plotly.io as pio

OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
             "sky": "#56B4E9", "purple": "#CC79A7", "black": "#000000", "yellow": "#F0E442"}
PALETTE = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "sky", "purple", "black", "yellow")]
COLORS = PALETTE  # traces that are not models (heads, orders, groups) cycle through the same colours

MODEL_COLORS = {  # bundled models: distinct inside every figure of `poslens reproduce`
    "increments-per-layer": OKABE_ITO["blue"], "increments-shared": OKABE_ITO["sky"],
    "rope-bytes": OKABE_ITO["vermillion"], "repo-small": OKABE_ITO["green"], "rope-small": OKABE_ITO["vermillion"],
    "nope-small": OKABE_ITO["purple"], "smollm2": OKABE_ITO["black"], "dstg-small": OKABE_ITO["orange"],
    "ap-encoder-small": OKABE_ITO["sky"], "rp-encoder-small": OKABE_ITO["purple"],
    "rope-encoder-small": OKABE_ITO["vermillion"], "minilm": OKABE_ITO["black"],
}

TEMPLATE = "plotly_white"  # the interactive report's look
PAPER = "poslens-paper"
PAPER_FONT = "Arial, 'Liberation Sans', Helvetica, 'DejaVu Sans', sans-serif"
PAPER_TEXT_PX = 32 / 3  # 8 pt in the PDF
PAPER_TICK_PX = 28 / 3  # 7 pt


def model_colors(models) -> dict[str, str]:
    """``{model: colour}`` for the models of one figure: fixed for bundled names, hashed (then the next free one)
    otherwise."""
    models = list(dict.fromkeys(models))
    out = {m: MODEL_COLORS[m] for m in models if m in MODEL_COLORS}
    used = set(out.values())
    for m in models:
        if m in out:
            continue
        start = zlib.crc32(str(m).encode()) % (len(PALETTE) - 1)  # yellow only when everything else is taken
        order = [PALETTE[(start + k) % (len(PALETTE) - 1)] for k in range(len(PALETTE) - 1)] + [PALETTE[-1]]
        out[m] = next((c for c in order if c not in used), order[0])
        used.add(out[m])
    return out


def log_range(values, pad: float = 0.08) -> list[float] | None:
    """A log axis' range (log10 units) that holds every positive value with a margin. Plotly's own autorange on a
    log axis follows a violin's density or a bar's base, not the data, and can leave most points outside."""
    import numpy as np

    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return None
    lo, hi = np.log10(v.min()), np.log10(v.max())
    margin = max(pad * (hi - lo), 0.05)
    return [float(lo - margin), float(hi + margin)]


def layer_order(labels) -> list[str]:
    def key(label):
        return (-1, 0) if label == "shared" else (0, int(label[1:])) if label[1:].isdigit() else (1, label)

    return sorted(set(labels), key=key)


def _paper_template() -> go.layout.Template:
    axis = dict(showline=True, linecolor="#222", linewidth=0.75, ticks="outside", ticklen=3, tickwidth=0.75,
                tickcolor="#222", showgrid=True, gridcolor="#e6e6e6", gridwidth=0.5, zeroline=False,
                title=dict(font=dict(size=PAPER_TEXT_PX), standoff=4), tickfont=dict(size=PAPER_TICK_PX),
                automargin=True)
    template = go.layout.Template(pio.templates["simple_white"])
    template.layout.update(
        font=dict(family=PAPER_FONT, size=PAPER_TEXT_PX, color="#111"), colorway=PALETTE, title=dict(text=None),
        margin=dict(l=40, r=8, t=16, b=32, pad=0), xaxis=axis, yaxis=axis,
        legend=dict(font=dict(size=PAPER_TICK_PX), tracegroupgap=2, itemwidth=30, bgcolor="rgba(255,255,255,0)"),
        annotationdefaults=dict(font=dict(size=PAPER_TEXT_PX)), hoverlabel=dict(font=dict(family=PAPER_FONT)),
        ternary={k: dict(tickfont=dict(size=PAPER_TICK_PX), title=dict(font=dict(size=PAPER_TEXT_PX)))
                 for k in ("aaxis", "baxis", "caxis")},
    )
    colorbar = dict(title=dict(font=dict(size=PAPER_TEXT_PX)), tickfont=dict(size=PAPER_TICK_PX))
    template.data.scatter = [go.Scatter(marker=dict(colorbar=colorbar))]
    template.data.heatmap = [go.Heatmap(colorbar=colorbar)]
    # plotly.js pads a cell by 8 px above and below: 24 px is a line of 7 pt text and its padding
    template.data.table = [go.Table(header=dict(font=dict(size=PAPER_TICK_PX), height=24),
                                    cells=dict(font=dict(size=PAPER_TICK_PX), height=24))]
    return template


pio.templates[PAPER] = _paper_template()
TEMPLATES = {"default": TEMPLATE, "paper": PAPER}
