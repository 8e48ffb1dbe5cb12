"""What a reader sees of a figure: the values plotly draws outside its axes, laid out by plotly itself, and the
texts of an exported SVG that collide, are cut off by a clip or leave the page."""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

CHECKED_AXES = ("linear", "log")


def _axis(layout, trace_ref: str, letter: str):
    suffix = trace_ref[1:] if trace_ref and len(trace_ref) > 1 else ""
    return layout[f"{letter}axis{suffix}"]


def _values(v) -> np.ndarray:
    if v is None:
        return np.array([], dtype=float)
    if isinstance(v, dict) and "bdata" in v:  # plotly's typed arrays
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).astype(float).ravel()
    arr = np.asarray(v, dtype=object).ravel()
    out = []
    for x in arr:
        if isinstance(x, (list, tuple, np.ndarray)):
            out.extend(_values(x).tolist())
        elif isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
            out.append(float(x))
    return np.array(out, dtype=float)


def _ends(trace, letter: str) -> np.ndarray:
    """The values a trace draws on one axis: its data, error bar ends and, for bars, the bar's base."""
    values = _values(trace[letter])
    err = trace[f"error_{letter}"] if f"error_{letter}" in trace else None
    if err is not None and err.visible and err.array is not None and len(values):
        plus = _values(err.array)
        minus = _values(err.arrayminus) if err.arrayminus is not None else plus
        if len(plus) == len(values) and len(minus) == len(values):
            values = np.concatenate([values, values + plus, values - minus])
    return values


def outside_axes(fig) -> list[str]:
    """Every plotted value of a visible trace that lies outside its drawn axis range (log axes in log10),
    as readable strings; colour scales of heatmaps too. Needs kaleido's browser (plotly lays the figure out:
    ``figures.save.laid_out``)."""
    from figures.save import laid_out

    full = laid_out(fig)
    problems = []
    for i, trace in enumerate(full.data):
        if trace.visible is not True or trace.type in ("table", "indicator", "pie", "sankey"):
            continue
        name = f"trace {i} ({trace.type} {trace.name!r})"
        if trace.type == "heatmap":
            z = _values(trace.z)
            z = z[np.isfinite(z)]
            if len(z) and trace.zmin is not None and (z.min() < trace.zmin - 1e-9 or z.max() > trace.zmax + 1e-9):
                problems.append(f"{name}: z from {z.min():.4g} to {z.max():.4g} outside colour range "
                                f"[{trace.zmin:.4g}, {trace.zmax:.4g}]")
            continue
        for letter in "xy":
            if letter not in trace or trace[letter] is None:
                continue
            axis = _axis(full.layout, trace[f"{letter}axis"], letter)
            if axis.type not in CHECKED_AXES or axis.range is None:
                continue
            values = _ends(trace, letter)
            values = values[np.isfinite(values)]
            if not len(values):
                continue
            if axis.type == "log":
                if (values <= 0).any():
                    problems.append(f"{name}: {int((values <= 0).sum())} values <= 0 on log {letter}-axis")
                values = np.log10(values[values > 0])
            lo, hi = sorted(float(r) for r in axis.range)
            slack = 1e-9 * max(1.0, hi - lo)
            bad = values[(values < lo - slack) | (values > hi + slack)]
            if len(bad):
                shown = [10 ** b if axis.type == "log" else b for b in bad[:4]]
                problems.append(f"{name}: {len(bad)} of {len(values)} {letter} values outside the drawn "
                                f"{axis.type} range [{_show(lo, axis.type)}, {_show(hi, axis.type)}], e.g. "
                                + ", ".join(f"{s:.4g}" for s in shown))
    return problems


def _show(r: float, kind: str) -> str:
    return f"{10 ** r:.4g}" if kind == "log" else f"{r:.4g}"


__all__ = ["crowded_data_texts", "outside_axes", "text_boxes", "text_overlaps"]


# ---- texts of an exported SVG --------------------------------------------------------------------------------

# Advance widths (1/1000 em) of Arial, the paper font (Liberation Sans has the same metrics), characters 32..126.
_ARIAL = [278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, *[556] * 10, 278, 278, 584,
          584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722,
          667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556, 556, 278, 556, 556,
          222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584]
_ARIAL_BOLD = [278, 333, 474, 556, 556, 889, 722, 238, 333, 333, 389, 584, 278, 333, 278, 278, *[556] * 10, 333, 333,
               584, 584, 584, 611, 975, 722, 722, 722, 722, 667, 611, 778, 722, 278, 556, 722, 611, 833, 722, 778, 667,
               778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 333, 278, 333, 584, 556, 333, 556, 611, 556, 611, 556,
               333, 611, 611, 278, 278, 556, 278, 889, 611, 611, 611, 611, 389, 556, 333, 611, 556, 778, 556, 556, 500,
               389, 280, 389, 584]
_WIDE = {"…": 1000, "→": 1000, "←": 1000, "\u200b": 0, "\u00a0": 278}
ASCENT, DESCENT = 0.75, 0.21  # ink above and below the baseline, in em: capitals and ascenders, descenders
_SVG = "{http://www.w3.org/2000/svg}"


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Width in px of ``text`` set in Arial at ``size`` px: exact for ASCII, 0.56 em for other letters, 1 em for CJK."""
    table = _ARIAL_BOLD if bold else _ARIAL
    units = 0
    for ch in text:
        o = ord(ch)
        units += table[o - 32] if 32 <= o < 127 else _WIDE.get(ch, 1000 if o >= 0x2E80 else 560)
    return units * size / 1000


@dataclass
class TextBox:
    """One line of a visible ``<text>``: its ink box as a polygon in page px, the element it belongs to, and the
    part of it its clip paths let through (1.0 when none)."""

    text: str
    element: int
    corners: list[tuple[float, float]]
    shown: float
    trace: str | None = None  # the scatter trace a text placed by its data (a "textpoint") belongs to

    @property
    def area(self) -> float:
        return abs(_area(self.corners))


def _matrix(transform: str | None) -> np.ndarray:
    m = np.eye(3)
    for kind, args in re.findall(r"(\w+)\s*\(([^)]*)\)", transform or ""):
        v = [float(a) for a in re.split(r"[\s,]+", args.strip()) if a]
        if kind == "translate":
            t = np.array([[1, 0, v[0]], [0, 1, v[1] if len(v) > 1 else 0], [0, 0, 1]])
        elif kind == "scale":
            t = np.diag([v[0], v[1] if len(v) > 1 else v[0], 1])
        elif kind == "rotate":
            a = math.radians(v[0])
            cx, cy = (v[1], v[2]) if len(v) == 3 else (0, 0)
            r = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
            t = np.array([[1, 0, cx], [0, 1, cy], [0, 0, 1]]) @ r @ np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]])
        elif kind == "matrix":
            t = np.array([[v[0], v[2], v[4]], [v[1], v[3], v[5]], [0, 0, 1]])
        else:
            raise ValueError(f"SVG transform {kind}() not understood")
        m = m @ t
    return m


def _style(el) -> dict[str, str]:
    out = {k: v for k, v in el.attrib.items() if k in ("text-anchor", "font-size", "font-weight", "opacity", "display",
                                                        "visibility", "fill-opacity")}
    for item in (el.get("style") or "").split(";"):
        if ":" in item:
            k, v = item.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def _length(value: str | None, size: float) -> float:
    if not value:
        return 0.0
    value = value.strip()
    if value.endswith("em"):
        return float(value[:-2]) * size
    return float(value.removesuffix("px"))


def _size(value: str | None, inherited: float) -> float:
    if not value:
        return inherited
    return inherited * float(value[:-1]) / 100 if value.endswith("%") else _length(value, inherited)


def _hidden(style: dict[str, str]) -> bool:
    return (style.get("display") == "none" or style.get("visibility") == "hidden"
            or float(style.get("opacity", 1)) == 0 or float(style.get("fill-opacity", 1)) == 0)


def _area(poly) -> float:
    return 0.5 * sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1]))


def _clip(subject, clip):
    """The part of convex polygon ``subject`` inside convex polygon ``clip`` (Sutherland-Hodgman)."""
    if _area(clip) < 0:
        clip = clip[::-1]
    out = list(subject)
    for (ax, ay), (bx, by) in zip(clip, clip[1:] + clip[:1]):
        if not out:
            break
        side = [(bx - ax) * (py - ay) - (by - ay) * (px - ax) for px, py in out]
        kept = []
        for i, p in enumerate(out):
            j = (i + 1) % len(out)
            if side[i] >= 0:
                kept.append(p)
            if (side[i] >= 0) != (side[j] >= 0):
                t = side[i] / (side[i] - side[j])
                q = out[j]
                kept.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
        out = kept
    return out


def _rect(m: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    pts = m @ np.array([[x0, x1, x1, x0], [y0, y0, y1, y1], [1, 1, 1, 1]], dtype=float)
    return [(float(pts[0, i]), float(pts[1, i])) for i in range(4)]


def _runs(el, size: float, bold: bool):
    """``(text, font size, bold)`` of the characters of ``el`` and its nested ``<tspan>``s, in order."""
    if el.text:
        yield el.text, size, bold
    for child in el:
        if child.tag == f"{_SVG}tspan":
            st = _style(child)
            yield from _runs(child, _size(st.get("font-size"), size),
                             st.get("font-weight", "bold" if bold else "") in ("bold", "700"))
        if child.tail:
            yield child.tail, size, bold


def _lines(text_el, size: float, bold: bool):
    """``(x, y, runs)`` per line: plotly writes a multi-line text as ``<tspan class="line">``s with their own x, y,
    dy."""
    x, y = float(text_el.get("x", 0)), float(text_el.get("y", 0))
    x += _length(text_el.get("dx"), size)
    y += _length(text_el.get("dy"), size)
    lines = [c for c in text_el if c.tag == f"{_SVG}tspan" and "line" in (c.get("class") or "").split()]
    if not lines:
        return [(x, y, list(_runs(text_el, size, bold)))]
    out = []
    for line in lines:
        lx = float(line.get("x", x)) + _length(line.get("dx"), size)
        ly = float(line.get("y", y)) + _length(line.get("dy"), size)
        st = _style(line)
        out.append((lx, ly, list(_runs(line, _size(st.get("font-size"), size),
                                       st.get("font-weight") in ("bold", "700") or bold))))
    return out


def text_boxes(svg_path) -> tuple[list[TextBox], tuple[float, float]]:
    """The ink box of every line of every visible ``<text>`` of an SVG that plotly (kaleido) wrote, placed by the
    transforms of the text and its ancestors and measured in Arial, and the page's ``(width, height)``."""
    root = ET.parse(svg_path).getroot()
    view = root.get("viewBox")
    page = tuple(float(v) for v in view.split()[2:]) if view else (float(root.get("width")), float(root.get("height")))
    clips = {}
    for cp in root.iter(f"{_SVG}clipPath"):
        rect = cp.find(f"{_SVG}rect")
        if rect is not None:
            x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
            clips[cp.get("id")] = (_matrix(rect.get("transform")), x, y, x + float(rect.get("width", 0)),
                                   y + float(rect.get("height", 0)))
    boxes: list[TextBox] = []

    def walk(el, m, style, regions, trace=None, point=False):
        if el.tag in (f"{_SVG}defs", f"{_SVG}clipPath"):
            return
        classes = (el.get("class") or "").split()
        if "trace" in classes:
            trace = next((c for c in classes if c.startswith("trace") and c != "trace"), trace)
        point = point or "textpoint" in classes
        own = _style(el)
        if _hidden(own):
            return
        m = m @ _matrix(el.get("transform"))
        style = {**style, **{k: v for k, v in own.items() if k in ("text-anchor", "font-weight")},
                 "font-size": _size(own.get("font-size"), style["font-size"])}
        ref = re.match(r"url\(#([^)]+)\)", el.get("clip-path") or "")
        if ref and ref.group(1) in clips:
            cm, x0, y0, x1, y1 = clips[ref.group(1)]
            regions = regions + [_rect(m @ cm, x0, y0, x1, y1)]
        if el.tag == f"{_SVG}text":
            element = len({b.element for b in boxes})
            size, bold = style["font-size"], style.get("font-weight") in ("bold", "700")
            for x, y, runs in _lines(el, size, bold):
                text = "".join(t for t, _, _ in runs)
                if not text.strip("\u200b \n\t"):
                    continue
                width = sum(text_width(t, s, b) for t, s, b in runs)
                top = max(s for _, s, _ in runs)
                x0 = x - {"middle": width / 2, "end": width}.get(style.get("text-anchor", "start"), 0)
                corners = _rect(m, x0, y - ASCENT * top, x0 + width, y + DESCENT * top)
                inside = corners
                for region in regions:
                    inside = _clip(inside, region)
                area = abs(_area(corners))
                boxes.append(TextBox(text, element, corners, abs(_area(inside)) / area if area and inside else 0.0,
                                     trace if point else None))
            return
        for child in el:
            walk(child, m, style, regions, trace, point)

    walk(root, np.eye(3), {"font-size": 16.0}, [])
    return boxes, page


def text_overlaps(svg_path, *, overlap: float = 0.05, clipped: float = 0.02, slack: float = 0.5) -> list[str]:
    """What hides a text of a figure exported as SVG, as readable strings: two texts whose ink boxes share more than
    ``overlap`` of the smaller box (lines of one text are not compared with each other), a text whose clip path
    (a table's cell, the legend's scroll box, the plot area) hides more than ``clipped`` of it, and a text that
    reaches more than ``slack`` px past an edge of the page. Texts that one trace places by their data (characters at
their learned positions) are not compared with each other: where the data crowds them they overlap, and
``crowded_data_texts`` checks their typical spacing instead. Boxes are Arial's advance widths by the cap-height plus
    descender band, so touching texts are not reported but overlapping letters are."""
    boxes, (width, height) = text_boxes(svg_path)
    problems = []
    for b in boxes:
        xs, ys = [x for x, _ in b.corners], [y for _, y in b.corners]
        past = {"left": -min(xs), "right": max(xs) - width, "top": -min(ys), "bottom": max(ys) - height}
        edges = [f"{side} by {d:.0f} px" for side, d in past.items() if d > slack]
        if b.shown < 1 - clipped:
            problems.append(f"clipped: {b.text!r} ({1 - b.shown:.0%} hidden)")
        elif edges:
            problems.append(f"off the page: {b.text!r} ({', '.join(edges)})")
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if a.element == b.element or a.trace is not None and a.trace == b.trace:
                # lines of one text; texts one trace places by their data (``crowded_data_texts`` judges those)
                continue
            if max(x for x, _ in a.corners) < min(x for x, _ in b.corners) \
                    or max(x for x, _ in b.corners) < min(x for x, _ in a.corners) \
                    or max(y for _, y in a.corners) < min(y for _, y in b.corners) \
                    or max(y for _, y in b.corners) < min(y for _, y in a.corners):
                continue
            common = _clip(a.corners, b.corners)
            share = abs(_area(common)) / min(a.area, b.area) if common and min(a.area, b.area) else 0.0
            if share > overlap:
                problems.append(f"overlap: {a.text!r} and {b.text!r} ({share:.0%} of the smaller)")
    return problems


def crowded_data_texts(svg_path, *, share: float = 1 / 3) -> list[str]:
    """Texts placed by their data (a scatter in mode "text") that crowd each other at their typical spacing: per
    trace and row, neighbours at least the row's median gap apart whose boxes overlap by more than ``share`` of the
    narrower one. Closer neighbours may overlap: that is the data (characters a model packs together)."""
    boxes, _ = text_boxes(svg_path)
    rows: dict[tuple, list] = {}
    for b in boxes:
        if b.trace is not None:
            xs, ys = [x for x, _ in b.corners], [y for _, y in b.corners]
            rows.setdefault((b.trace, round(max(ys), 1)), []).append((min(xs), max(xs), b.text))
    problems = []
    for (trace, y), row in rows.items():
        row.sort(key=lambda r: r[0] + r[1])
        centres = [(lo + hi) / 2 for lo, hi, _ in row]
        gaps = np.diff(centres)
        if not len(gaps):
            continue
        typical = float(np.median(gaps))
        for (a0, a1, ta), (b0, b1, tb), gap in zip(row, row[1:], gaps):
            common = min(a1, b1) - max(a0, b0)
            if gap >= typical and common > share * min(a1 - a0, b1 - b0):
                problems.append(f"{trace} row at y={y}: {ta!r} and {tb!r} {gap / typical:.1f}x the median gap apart "
                                f"overlap by {common / min(a1 - a0, b1 - b0):.0%}")
    return problems
