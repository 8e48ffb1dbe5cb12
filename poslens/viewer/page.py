"""The viewer's page: one HTML file holding its data (JSON) and its script (``viewer.js``, written for poslens: no
library, no network), so it opens from disk; the live server hands out the same page with ``live`` set.

What the file holds per model: the grid (``{stat: [layer][head]}``, the model's own statistics and the results
folder's CSV columns), the curves per block of query rows, the block-pooled patterns of every head (float32, base64)
and the token strings; the token level only for the rows of ``precomputed`` blocks (``ROWS_PER_BLOCK`` rows each, every
head of every layer; the live server computes any block's on click).
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from poslens.viewer.data import BEFORE, ROWS_PER_BLOCK, STATS, TOP_KEYS, HeadData

SCRIPT = Path(__file__).with_name("viewer.js")
PRECOMPUTED_BLOCKS = 8  # blocks whose rows a file holds, evenly spaced, the first and last included

STYLE = """
body{font:13px/1.4 system-ui,sans-serif;margin:12px;color:#222}
header{display:flex;gap:16px;align-items:center;flex-wrap:wrap}
h1{font-size:17px;margin:0} h2{font-size:14px;margin:6px 0} h3{font-size:12px;margin:4px 0;color:#555}
#grids{display:flex;gap:24px;flex-wrap:wrap;margin-top:8px} canvas.grid{cursor:pointer}
.row{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start} .row>div{flex:0 0 auto;max-width:480px}
#pooled{cursor:crosshair;border:1px solid #ccc}
.note,#legend,#mode,#curve-note,#pooled-note{color:#555;font-size:12px;max-width:640px}
.qrow{margin:4px 0;font-family:ui-monospace,monospace;white-space:pre-wrap;line-height:1.9}
.qlabel{display:inline-block;min-width:70px;color:#555} .gap{color:#999}
.tok{padding:1px 0;border-radius:2px;cursor:default} .tok.query{outline:2px solid #1f77b4}
#tip{position:absolute;background:#222;color:#fff;padding:3px 6px;border-radius:3px;font-size:12px;
pointer-events:none;white-space:pre;z-index:9}
"""

BODY = """
<header><h1>poslens head viewer</h1>
<label>statistic <select id="stat"></select></label><span id="legend"></span><span id="mode"></span></header>
<p class="note" id="about"></p>
<section id="grids"></section>
<section id="head" hidden><h2 id="head-title"></h2><div class="row">
<div><h3>along the context (mean per block of query rows)</h3><canvas id="curve" width="460" height="240"></canvas>
<p id="curve-note"></p></div>
<div><h3>block-pooled pattern (query blocks down, key blocks across)</h3>
<canvas id="pooled" width="384" height="384"></canvas><p id="pooled-note"></p></div></div></section>
<section id="tokens-panel" hidden><h2 id="tokens-title"></h2><div id="tokens"></div></section>
<div id="tip" hidden></div>
"""


@dataclass
class ModelView:
    """One model's part of the page."""

    name: str
    n_layers: int
    n_heads: int
    tokens: list[str]
    heads: HeadData
    rows: dict = field(default_factory=dict)  # {(layer, head, row): (keys, weights)}
    precomputed: list[int] = field(default_factory=list)
    csv_grid: dict = field(default_factory=dict)  # {column: [layer, head]}
    csv_curves: dict | None = None
    csv_label: str = ""


def precomputed_blocks(n_blocks: int, count: int = PRECOMPUTED_BLOCKS) -> list[int]:
    return sorted({int(round(x)) for x in np.linspace(0, n_blocks - 1, min(count, n_blocks))})


def _nested(a) -> list:
    """Floats for JSON: NaN as null, 6 significant digits (the exact values stay in the analysis' CSV)."""
    a = np.asarray(a, dtype=np.float64)
    flat = [None if not np.isfinite(v) else float(f"{v:.6g}") for v in a.ravel()]
    out = np.array(flat, dtype=object).reshape(a.shape)
    return out.tolist()


def _exact(a) -> list:
    """Floats for JSON as they are (the grid copies a CSV's numbers exactly), NaN as null."""
    a = np.asarray(a, dtype=np.float64)
    return np.array([None if not np.isfinite(v) else float(v) for v in a.ravel()], dtype=object).reshape(
        a.shape).tolist()


def rows_json(rows: dict, block: int) -> dict:
    """``{"layer|head|block": [[row, keys, weights], ...]}`` from ``{(layer, head, row): (keys, weights)}``."""
    out: dict[str, list] = {}
    for (l, h, q), (keys, ws) in sorted(rows.items()):
        out.setdefault(f"{l}|{h}|{q // block}", []).append([q, keys, [float(f"{w:.6g}") for w in ws]])
    return out


def stats_menu(views: list[ModelView]) -> list[dict]:
    menu = [{"key": k, "label": label, "about": about} for k, (label, about) in STATS.items()]
    seen = []
    for v in views:
        for col in v.csv_grid:
            if col not in seen:
                seen.append(col)
                menu.append({"key": f"csv:{col}", "label": f"{v.csv_label}: {col} (CSV)",
                             "about": f"the {v.csv_label} CSV's {col}, as written"})
    return menu


def payload(views: list[ModelView], *, live: bool = False, title: str = "") -> dict:
    models = []
    for v in views:
        grid = {k: _exact(a) for k, a in v.heads.grid.items()}
        grid |= {f"csv:{c}": _exact(a) for c, a in v.csv_grid.items()}
        models.append({
            "name": v.name, "n_layers": v.n_layers, "n_heads": v.n_heads, "length": v.heads.n,
            "block": v.heads.block, "n_blocks": v.heads.n_blocks, "grid": grid,
            "curves": {k: _nested(a) for k, a in v.heads.curves.items()},
            "pooled": base64.b64encode(np.ascontiguousarray(v.heads.pooled, dtype="<f4").tobytes()).decode("ascii"),
            "tokens": v.tokens, "rows": rows_json(v.rows, v.heads.block), "precomputed": v.precomputed,
            "csv_curves": None if v.csv_curves is None else {
                k: (a if k == "x" else _nested(a)) for k, a in v.csv_curves.items()},
        })
    cell = 16 if max(v.n_heads for v in views) <= 24 else 10
    return {"title": title, "live": live, "stats": stats_menu(views), "models": models, "cell": cell,
            "limits": {"rows_per_block": ROWS_PER_BLOCK, "top": TOP_KEYS, "before": BEFORE}}


# every page opens so: how ``writable`` tells a page poslens wrote from a user's file
HEAD = ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        "<title>poslens head viewer")


def render(data: dict) -> str:
    """The page: the data as JSON (``</`` escaped) and the script inline."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    about = html.escape(data.get("title") or "")
    return (HEAD + f"{': ' + about if about else ''}</title><style>{STYLE}</style></head><body>"
            + BODY.replace('<p class="note" id="about"></p>', f'<p class="note" id="about">{about}</p>')
            + f'<script id="poslens-data" type="application/json">{body}</script>'
            + f"<script>{SCRIPT.read_text(encoding='utf-8')}</script></body></html>\n")


def writable(path, force: bool = False) -> Path:
    """``path`` if the page may be written there: a new file, a page ``poslens view`` wrote (its opening is
    ``HEAD``), or anything with ``force``; otherwise a ``ViewerError`` naming the file, before any work starts."""
    from poslens.viewer.errors import ViewerError

    path = Path(path)
    if path.is_dir():
        raise ViewerError(f"--out {path}: is a folder; give the page's file name (e.g. {path / 'view.html'})")
    if force or not path.exists():
        return path
    with open(path, "rb") as f:
        opening = f.read(len(HEAD.encode()))
    if opening != HEAD.encode():
        raise ViewerError(f"--out {path}: this file was not written by poslens view; it is kept (give --force to "
                          "overwrite it, or another --out)")
    return path


def write(path, data: dict, force: bool = False) -> Path:
    """The page, atomically (``interp.atomic``), where ``writable`` allows."""
    from interp.atomic import write_text

    path = writable(path, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, render(data))
