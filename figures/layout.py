"""Paper layout: room for every text of a figure at the width it is printed, and a height from its content.

Plotly spaces subplots by fractions of the figure and never wraps a title, so a figure drawn for a 700 px screen
and printed 3.3 in wide puts tick labels on the next panel's title, titles past the page and table cells under
their neighbours. ``fit(fig, width, height)`` estimates the texts each gap holds (Arial widths, plotly's line
height), wraps titles to their panel, sizes tables and ternaries, sizes texts placed by their data (characters at
their positions) to their spacing, and sets every domain, the margins and the legend in pixels; without ``height``
the figure is as tall as its content needs and at most a page (``PAGE_HEIGHT``) where its panels can shrink to it,
and a ``height`` too small for its texts and panels raises ``TooSmall``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import plotly.io as pio

from figures.style import PAPER, PAPER_TEXT_PX, PAPER_TICK_PX

LINE = 1.3  # plotly's line height, em
CELL_PAD = 8  # plotly.js pads every table cell by 8 px on each side
GAP = 6  # px between the texts of neighbouring panels
MIN_PANEL = 70  # px: the least height of a panel of axes
PAGE_HEIGHT = 9 * 96  # px: a printed page's text height (9 in); a figure without a height is at most this tall
TEXT_ADVANCE = 0.6  # em: the least advance of a typical glyph, for texts placed by their data (mode "text")
DATA_TEXT_PX = 40 / 3  # 10 pt: the largest such a text is printed
TICK_ROOM = 7  # px from an axis line to its tick labels (ticklen 3 and plotly's pad)
STANDOFF = 4
TERNARY_BELOW = 34  # px under a ternary's base: its tick labels and the b / c titles' first line
TERNARY_CORNER = 17  # px from a ternary's corner to the centre of the title plotly puts there
LEGEND_ROW, LEGEND_PAD = 21, 12
LEFT_MARGIN = 4  # px: y labels sit inside the plot area, left of their panels, so that tables get the full width
NO_LEGEND = ("table", "heatmap", "contour", "histogram2d", "histogram2dcontour", "surface")
_BR = re.compile(r"<br\s*/?>", re.I)


class TooSmall(ValueError):
    """A height that cannot hold a figure's texts and panels; ``need`` is the least height that can (px)."""

    def __init__(self, need: float):
        super().__init__(f"the figure needs at least {need:.0f} px")
        self.need = need


def text_width(text: str, size: float) -> float:
    """Width (px) of one line of ``text`` (tags dropped) in Arial at ``size`` px, estimated per class of letter and
    on the wide side."""
    units = 0.0
    for ch in re.sub(r"<[^>]+>", "", text):
        if ch in "ijl.,:;'!|":
            units += 0.25
        elif ch in " \u00a0ftrI()[]-/":
            units += 0.34
        elif ch in "mwMW%@":
            units += 0.95
        elif ord(ch) >= 0x2E80:
            units += 1.0
        elif ch.isupper():
            units += 0.76
        else:
            units += 0.57
    return units * size


def lines(text) -> list[str]:
    return _BR.split(str(text)) if text else []


def wrap(text: str, width: float, size: float) -> str:
    """``text`` with ``<br>`` between words where a line would be wider than ``width`` px (a word alone may be)."""
    out = []
    for line in lines(text):
        current = ""
        for word in line.split(" "):
            trial = f"{current} {word}" if current else word
            if current and text_width(trial, size) > width:
                out.append(current)
                current = word
            else:
                current = trial
        out.append(current)
    return "<br>".join(out)


def _height(text, size: float) -> float:
    n = len(lines(text))
    return n * LINE * size if n else 0.0


@dataclass
class Cell:
    kind: str  # "xy", "ternary" or "table"
    x: tuple[float, float]
    ref: object  # (xaxis key, yaxis key), the ternary's layout key, or the table trace
    inset: float = 0.0  # px kept free on each side of a ternary for the titles at its corners


@dataclass
class Band:
    """Panels that share a vertical extent (a row of subplots)."""

    y: tuple[float, float]
    cells: list[Cell] = field(default_factory=list)
    above: float = 0.0
    below: float = 0.0
    fixed: float | None = None
    px: float = 0.0
    least: float = MIN_PANEL  # px: the least height its panels show their content in


def _cells(fig) -> list[Cell]:
    cells, seen = [], set()
    for t in fig.data:
        if t.type == "table":
            cells.append(Cell("table", tuple(t.domain.x or (0, 1)), t))
        elif t.type == "scatterternary":
            key = "ternary" + (t.subplot or "ternary")[7:]
            if key not in seen:
                seen.add(key)
                cells.append(Cell("ternary", tuple(fig.layout[key].domain.x or (0, 1)), key))
        elif "xaxis" in t and "yaxis" in t:
            keys = (f"xaxis{(t.xaxis or 'x')[1:]}", f"yaxis{(t.yaxis or 'y')[1:]}")
            if keys not in seen:
                seen.add(keys)
                cells.append(Cell("xy", tuple(fig.layout[keys[0]].domain or (0, 1)), keys))
    return cells


def _y(fig, cell: Cell) -> tuple[float, float]:
    if cell.kind == "table":
        return tuple(cell.ref.domain.y or (0, 1))
    if cell.kind == "ternary":
        return tuple(fig.layout[cell.ref].domain.y or (0, 1))
    return tuple(fig.layout[cell.ref[1]].domain or (0, 1))


def _bands(fig) -> list[Band]:
    bands: dict[tuple, Band] = {}
    for cell in _cells(fig):
        y = _y(fig, cell)
        bands.setdefault((round(y[0], 6), round(y[1], 6)), Band(y)).cells.append(cell)
    return sorted(bands.values(), key=lambda b: -b.y[1])


def _traces_on(fig, xkey: str, ykey: str):
    x, y = "x" + xkey[5:], "y" + ykey[5:]
    return [t for t in fig.data if "xaxis" in t and (t.xaxis or "x") == x and (t.yaxis or "y") == y]


def _fit_data_texts(fig, cell: Cell, width: float) -> float | None:
    """Texts placed by their data (a scatter in mode "text", such as characters at their positions) sized so that
    neighbours at the median gap of a row hold a typical glyph at ``width`` px; returns the least height (px) of
    the panel's rows of texts, or None when it has none."""
    import numpy as np

    traces = [t for t in _traces_on(fig, *cell.ref)
              if t.type == "scatter" and t.mode == "text" and t.x is not None and t.y is not None]
    if not traces:
        return None
    xs = [np.asarray(t.x, dtype=float) for t in traces]
    span = max(x.max() for x in xs) - min(x.min() for x in xs)
    gaps, rows = [], set()
    for t, x in zip(traces, xs):
        y = np.asarray(t.y)
        for row in np.unique(y):
            rows.add(row)
            gaps.extend(np.diff(np.sort(x[y == row])).tolist())
    size = min(DATA_TEXT_PX, max(trace.textfont.size or PAPER_TEXT_PX for trace in traces))
    glyphs = [str(g) for t in traces if t.text is not None
              for g in np.atleast_1d(np.asarray(t.text, dtype=object)) if g]
    advance = (max(TEXT_ADVANCE, float(np.mean([text_width(g, 1.0) / max(1, len(g)) for g in glyphs]))) if glyphs
               else TEXT_ADVANCE)
    gaps = [g for g in gaps if g > 0]
    if gaps and span > 0:
        size = min(size, float(np.median(gaps)) * width / (1.05 * span) / advance)
    size = max(size, 4.0)
    for t in traces:
        t.textfont.size = size
    return len(rows) * LINE * size + 8


def _share(room: float, bands: list[Band], weights: list[float]) -> None:
    """Give ``bands`` heights adding up to ``room`` in proportion to ``weights``, none below its ``least``."""
    free = list(range(len(bands)))
    while free:
        left = room - sum(bands[i].least for i in range(len(bands)) if i not in free)
        total = sum(weights[i] for i in free) or 1.0
        short = [i for i in free if left * weights[i] / total < bands[i].least]
        if not short:
            for i in free:
                bands[i].px = left * weights[i] / total
            return
        for i in short:
            bands[i].px = bands[i].least
            free.remove(i)


def _category_lines(values) -> int:
    if values is None:
        return 1
    try:
        return max((len(lines(v)) for v in values if isinstance(v, str)), default=1)
    except TypeError:
        return 1


def _tick_labels(axis, traces, letter: str) -> list[str]:
    """The tick labels an axis draws, where they are text (categories or ``ticktext``), else a typical number."""
    if axis.ticktext:
        return [str(t) for t in axis.ticktext]
    labels = [v for t in traces for v in (t[letter] if t[letter] is not None else []) if isinstance(v, str)]
    if labels:
        return labels
    return ["100%"] if axis.tickformat and "%" in axis.tickformat else ["-0.55"]


def _legend_items(fig) -> list[str]:
    """Names in the legend, by plotly.js's rule: without ``showlegend`` in the layout, a legend is drawn when some
    trace shows in it and two or more traces could (or one asks to)."""
    traces = [t for t in fig.data if t.type not in NO_LEGEND and t.visible is not False]
    items = [t.name or "" for t in traces if t.showlegend is not False]
    explicit = any(t.showlegend is True for t in traces)
    if fig.layout.showlegend is False or not items or not (fig.layout.showlegend or len(traces) >= 2 or explicit):
        return []
    return items


def _legend_height(names: list[str], width: float) -> float:
    rows, x = 1, 0.0
    for name in names:
        w = 40 + text_width(name, PAPER_TICK_PX) + 5
        if x and x + w > width:
            rows, x = rows + 1, 0.0
        x += w
    return rows * LEGEND_ROW + LEGEND_PAD if names else 0.0


def _subplot_titles(fig, band: Band):
    """``(annotation, cell)`` of the subplot titles over a band (make_subplots puts them at its top)."""
    out = []
    for a in fig.layout.annotations:
        if a.yref == "paper" and a.xref == "paper" and a.yanchor == "bottom" and a.y is not None \
                and abs(a.y - band.y[1]) < 1e-6:
            cell = next((c for c in band.cells if c.x[0] - 1e-6 <= a.x <= c.x[1] + 1e-6), None)
            if cell is not None:
                out.append((a, cell))
    return out


def _fit_table(trace, width: float) -> float:
    """Column widths that give every word its room (the table turned a quarter, its first column as header, when
    its columns cannot all fit), and the height (px) of all its rows as plotly wraps them."""
    head = [str(h) for h in (trace.header.values or [])]
    body = [[str(v) for v in col] for col in (trace.cells.values or [])]

    def need(head, body):
        lo, hi = [], []
        for h, col in zip(head, body):
            texts = [h] + col
            words = [w for t in texts for line in lines(t) for w in line.split(" ")]
            lo.append(max(text_width(w, PAPER_TICK_PX) for w in words) + 2 * CELL_PAD + 2)
            hi.append(max(text_width(line, PAPER_TICK_PX) for t in texts for line in lines(t)) + 2 * CELL_PAD + 2)
        return lo, hi

    lo, hi = need(head, body)
    if sum(lo) > width and len(body) > 1 and body[0]:
        turned_head = [head[0]] + body[0]
        turned = [head[1:]] + [[col[i] for col in body[1:]] for i in range(len(body[0]))]
        turned_lo, turned_hi = need(turned_head, turned)
        if sum(turned_lo) < sum(lo):
            head, body, lo, hi = turned_head, turned, turned_lo, turned_hi
            trace.header.values, trace.cells.values = head, body
    if sum(hi) <= width:
        widths = [h * width / sum(hi) for h in hi]
    else:
        spare = max(0.0, width - sum(lo))
        extra = [h - l for h, l in zip(hi, lo)]
        widths = [l + spare * e / (sum(extra) or 1) for l, e in zip(lo, extra)]
    trace.columnwidth = widths
    scale = width / sum(widths)

    def row_height(texts, least):
        n = max(len(lines(wrap(t, w * scale - 2 * CELL_PAD - 2, PAPER_TICK_PX))) for t, w in zip(texts, widths))
        return least if n == 1 else max(least, n * LINE * PAPER_TICK_PX + 14)

    default = pio.templates[PAPER].data.table[0]
    total = row_height(head, trace.header.height or default.header.height)
    for i in range(max((len(c) for c in body), default=0)):
        total += row_height([col[i] if i < len(col) else "" for col in body],
                            trace.cells.height or default.cells.height)
    return total + 4


def fit(fig, width: float, height: float | None = None, base_height: float | None = None) -> None:
    """Lay out a paper figure ``width`` px wide: ``height`` px tall, or as tall as its content when None
    (``base_height``, the figure's own height scaled to ``width``, sets how tall its panels of axes are).

    The steps: the room the y labels take on the left (``_y_label_room``), each band's texts above and below and the
    least or fixed height of its panels (``_measure``), the margins, gaps and band heights (``_heights``); run twice
    when the y titles, wrapped to the heights the first run gave (``_rewrap_y_titles``), change; then the domains
    (``_place``) and the legend."""
    margin = pio.templates[PAPER].layout.margin
    bands = _bands(fig)
    if not bands:
        fig.update_layout(width=width, height=height or base_height)
        return
    titles_of = [_subplot_titles(fig, band) for band in bands]
    legend = _legend_items(fig)
    bottom_legend = bool(legend) and fig.layout.legend.y is not None and fig.layout.legend.y <= 0.1
    colorbar = any(getattr(getattr(t, "marker", None), "showscale", None) or getattr(t, "showscale", None)
                   for t in fig.data)
    base = (base_height or fig.layout.height or 0.6 * width) - margin.t - margin.b
    left_edge = min((c.x[0] for b in bands for c in b.cells if c.kind == "xy"), default=0.0)
    left, right = LEFT_MARGIN, margin.r + (70 if colorbar else 0)
    plot_w = width - left - right
    for rerun in range(2):  # the second pass wraps y titles to the heights the first one gave the panels
        shift = min(_y_label_room(fig, bands, left_edge) / plot_w, 0.5)  # panels start right of their y labels

        def px(cell):
            return (cell.x[1] - cell.x[0]) * plot_w * (1 - shift if cell.kind == "xy" else 1)

        for band, titles in zip(bands, titles_of):
            _measure(fig, band, titles, px, height, first=not rerun)
        legends = (0.0, _legend_height(legend, width - left - 4)) if bottom_legend else \
            (_legend_height(legend, width - left - 4), 0.0)
        margin_t, margin_b, gaps, total = _heights(bands, legends, height, base)
        plot_h = total - margin_t - margin_b
        if not _rewrap_y_titles(fig, bands, left_edge):
            break
    _place(fig, bands, titles_of, gaps, shift, plot_w, plot_h)
    if legend:
        if bottom_legend:
            fig.update_layout(legend=dict(y=-(bands[-1].below + GAP) / plot_h, yanchor="top"))
        else:
            fig.update_layout(legend=dict(y=1 + (bands[0].above + 2) / plot_h, yanchor="bottom"))
    fig.update_layout(width=width, height=total, margin=dict(l=left, r=right, t=margin_t, b=margin_b))


def _y_label_room(fig, bands: list[Band], left_edge: float) -> float:
    """The px the widest tick labels and title of the leftmost panels' y axes take."""
    room = 0.0
    for band in bands:
        for cell in band.cells:
            if cell.kind == "xy" and cell.x[0] == left_edge:
                ya = fig.layout[cell.ref[1]]
                ticks = _tick_labels(ya, _traces_on(fig, *cell.ref), "y") if ya.showticklabels is not False else []
                w = max((text_width(line, PAPER_TICK_PX) for t in ticks for line in lines(t)), default=0) + TICK_ROOM
                title = ya.title.text
                w += (_height(title, PAPER_TEXT_PX) + STANDOFF) if title else 0
                room = max(room, w + 2)
    return room


def _measure(fig, band: Band, titles, px, height: float | None, first: bool) -> None:
    """``band``'s texts above (subplot titles) and below (x ticks and titles), the least height of its panels (texts
    placed by their data) and the fixed height of a table or ternary; x titles wrapped on the ``first`` run."""
    for a, cell in titles:
        a.text = wrap(a.text, px(cell), PAPER_TEXT_PX)
    band.above = max((_height(a.text, PAPER_TEXT_PX) + 2 for a, _ in titles), default=0.0)
    band.below, band.fixed, band.least = 0.0, None, MIN_PANEL
    xy = [c for c in band.cells if c.kind == "xy"]
    texts = [h for c in xy if (h := _fit_data_texts(fig, c, px(c))) is not None]
    if texts:
        band.least = max(texts)
    if first:
        _titles_once(fig, xy, px)
    for cell in xy:
        band.below = max(band.below, _x_below(fig, cell))
    for cell in band.cells:
        if cell.kind == "table":
            band.fixed = max(band.fixed or 0.0, _fit_table(cell.ref, px(cell)))
        elif cell.kind == "ternary":
            _measure_ternary(fig, band, cell, px(cell), height)


def _x_below(fig, cell: Cell) -> float:
    """What a panel's x tick labels and title take below it."""
    xa = fig.layout[cell.ref[0]]
    below = 0.0
    if xa.showticklabels is not False:
        n = max(_category_lines(t.x) for t in _traces_on(fig, *cell.ref)) if not xa.ticktext else \
            max(len(lines(t)) for t in xa.ticktext)
        below += TICK_ROOM + n * LINE * PAPER_TICK_PX
    if xa.title.text:
        below += STANDOFF + _height(xa.title.text, PAPER_TEXT_PX)
    return below


def _measure_ternary(fig, band: Band, cell: Cell, width: float, height: float | None) -> None:
    """A ternary's corner titles above and below it, its inset from its cell and, without a height, its own height."""
    t = fig.layout[cell.ref]
    corners = max(text_width(line, PAPER_TEXT_PX) for ax in (t.baxis, t.caxis) for line in lines(ax.title.text) or [""])
    inset = TERNARY_CORNER + corners / 2 + 2
    side = width - 2 * inset
    band.above = max(band.above, _height(t.aaxis.title.text, PAPER_TEXT_PX) + 10)
    corner_lines = max(len(lines(ax.title.text)) for ax in (t.baxis, t.caxis))
    band.below = max(band.below, TERNARY_BELOW + max(0, corner_lines - 1) * LINE * PAPER_TEXT_PX)
    if height is None:
        band.fixed = max(band.fixed or 0.0, side * math.sqrt(3) / 2)
    cell.inset = inset
    if side / 4 < text_width("0.75", PAPER_TICK_PX) + 8:  # ticks a quarter apart would touch
        for ax in (t.aaxis, t.baxis, t.caxis):
            ax.tickvals = [0.5]


def _heights(bands: list[Band], legends: tuple[float, float], height: float | None, base: float):
    """``(margin_t, margin_b, gaps, total)``, each band's ``px`` set: ``height`` shared among the bands that can
    flex (``TooSmall`` where it cannot hold them), or, without one, each band's share of ``base`` (at least what its
    content needs; at most a page where the bands can shrink to it)."""
    top_legend, foot_legend = legends
    margin_t = bands[0].above + top_legend + (4 if top_legend or bands[0].above else 8)
    margin_b = max(bands[-1].below + 4 + foot_legend + (GAP if foot_legend else 0), 8)
    gaps = [upper.below + lower.above + GAP for upper, lower in zip(bands, bands[1:])]
    fixed = sum(band.fixed for band in bands if band.fixed is not None)
    flex = [band for band in bands if band.fixed is None]
    flex_share = sum(band.y[1] - band.y[0] for band in flex) or 1
    flex_total = sum(b.y[1] - b.y[0] for b in bands) or 1
    frame = margin_t + margin_b + sum(gaps) + fixed
    if height is not None:
        need = frame + sum(band.least for band in flex)
        if height < need - 0.5:
            raise TooSmall(need)
        _share(height - frame, flex, [(band.y[1] - band.y[0]) / flex_share for band in flex])
        total = height
    else:
        for band in flex:
            band.px = max(band.least, base * (band.y[1] - band.y[0]) / flex_total)
        if flex and frame + sum(band.px for band in flex) > PAGE_HEIGHT >= frame + sum(band.least for band in flex):
            _share(PAGE_HEIGHT - frame, flex, [band.px for band in flex])
        total = frame + sum(band.px for band in flex)
    for band in bands:
        if band.fixed is not None:
            band.px = band.fixed
    return margin_t, margin_b, gaps, total


def _rewrap_y_titles(fig, bands: list[Band], left_edge: float) -> bool:
    """The leftmost panels' y titles wrapped to their band's height; True if one changed."""
    changed = False
    for band in bands:
        for cell in band.cells:
            if cell.kind == "xy" and cell.x[0] == left_edge:
                ya = fig.layout[cell.ref[1]]
                if ya.title.text:
                    wrapped = wrap(ya.title.text.replace("<br>", " "), band.px, PAPER_TEXT_PX)
                    if wrapped != ya.title.text:
                        ya.title.text, changed = wrapped, True
    return changed


def _place(fig, bands: list[Band], titles_of, gaps: list[float], shift: float, plot_w: float, plot_h: float) -> None:
    """Every cell's domain, and its subplot titles, from the bands' heights, top to bottom."""

    def moved(x):
        return shift + x * (1 - shift)

    top = 0.0
    for i, (band, titles) in enumerate(zip(bands, titles_of)):
        lo, hi = max(0.0, 1 - (top + band.px) / plot_h), min(1.0, max(0.0, 1 - top / plot_h))
        for a, cell in titles:
            a.y = hi
            if cell.kind == "xy":
                a.x = moved(a.x)
        for cell in band.cells:
            if cell.kind == "xy":
                fig.layout[cell.ref[0]].domain = [moved(cell.x[0]), moved(cell.x[1])]
                fig.layout[cell.ref[1]].domain = [lo, hi]
            elif cell.kind == "table":
                cell.ref.domain.y = [lo, hi]
            else:
                inset = cell.inset / plot_w
                fig.layout[cell.ref].domain = dict(x=[cell.x[0] + inset, cell.x[1] - inset], y=[lo, hi])
        band.y = (lo, hi)
        top += band.px + (gaps[i] if i < len(gaps) else 0)


def _titles_once(fig, cells: list[Cell], px) -> None:
    """x titles of a row's panels wrapped to their panel; one title shared by an odd number of panels and too wide
    for one is kept on the middle panel only, wrapped to the room around it."""
    titles = [fig.layout[c.ref[0]].title.text for c in cells]
    if len(cells) % 2 and len(cells) > 1 and titles[0] and all(t == titles[0] for t in titles):
        widths = [px(c) for c in cells]
        if text_width(titles[0], PAPER_TEXT_PX) > min(widths):
            for c in cells:
                fig.layout[c.ref[0]].title.text = None
            middle = sorted(cells, key=lambda c: c.x[0])[len(cells) // 2]
            centre = (middle.x[0] + middle.x[1]) / 2
            reach = min(centre - min(c.x[0] for c in cells), max(c.x[1] for c in cells) - centre)
            room = 2 * reach / (middle.x[1] - middle.x[0]) * px(middle)  # centred on its panel, inside the row
            fig.layout[middle.ref[0]].title.text = wrap(titles[0], room, PAPER_TEXT_PX)
            return
    for c in cells:
        xa = fig.layout[c.ref[0]]
        if xa.title.text:
            xa.title.text = wrap(xa.title.text, px(c), PAPER_TEXT_PX)
