"""The viewer's page: one HTML file holding its data (JSON) and its script (``viewer.js``, written for poslens: no
library, no network), so it opens from disk; the live server hands out the same page with ``live`` set.

What the file holds per model: the grid (``{stat: [layer][head]}``, the model's own statistics and the results
folder's CSV columns), the curves per block of query rows, the block-pooled patterns of every head (float32, base64)
and the token strings; the token level for the rows ``plan_rows`` fits in the page's size budget (``PAGE_MB``, raised
with ``--page-mb``): every row of every block where they fit (short texts), else ``ROWS_PER_BLOCK`` (then 2, then 1)
rows of every block, else ``ROWS_PER_BLOCK`` rows of as many blocks as fit, evenly spaced; every head of every layer.
The live server computes any block's on click.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from poslens.viewer.data import BEFORE, ROWS_PER_BLOCK, STATS, TOP_KEYS, HeadData, about, block_rows, constant_at

UNITS = {"entropy": "nats", "distance": "tokens"}  # the rest: a mass, 0 to 1
SCRIPT = Path(__file__).with_name("viewer.js")
PAGE_MB = 20.0  # the saved page's default size budget (MB): the token rows fill what the rest leaves

STYLE = """
body{font:13px/1.4 system-ui,sans-serif;margin:0 12px 12px;color:#222}
nav{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid #ddd;padding:6px 0;display:flex;
gap:10px;align-items:center;flex-wrap:wrap}
nav button{font:inherit;padding:2px 10px} #trail a{color:#1f5fa8;cursor:pointer;text-decoration:underline}
#trail .sep{color:#999;margin:0 6px} #trail b{font-weight:600}
section{scroll-margin-top:44px;margin-top:8px} #head,#tokens-panel{min-height:calc(100vh - 60px)}
header{display:flex;gap:16px;align-items:baseline;flex-wrap:wrap}
h1{font-size:17px;margin:6px 0} h2{font-size:14px;margin:6px 0} h3{font-size:12px;margin:4px 0;color:#555}
.controls{display:flex;gap:14px;align-items:center;flex-wrap:wrap;margin:4px 0}
#stat-about,.note,#mode,#curve-note,#pooled-note,#tokens-note{color:#555;font-size:12px;max-width:760px}
#stat-about{max-width:620px} .hint{color:#1f5fa8;font-size:12px;margin:4px 0}
.bar{display:inline-flex;white-space:nowrap;gap:6px;align-items:center;font-size:12px;color:#333}
.bar canvas{border:1px solid #ccc}
#grids{display:flex;gap:24px;flex-wrap:wrap} canvas.grid,#pooled{cursor:pointer}
canvas:focus-visible,.qrow:focus,.tok:focus{outline:2px solid #1f5fa8;outline-offset:1px}
.row{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start} .row>div{flex:0 0 auto;max-width:470px}
.qrow{margin:2px 0;padding:1px 2px;font-family:ui-monospace,monospace;white-space:pre-wrap;line-height:1.8}
.qrow.focus{background:#eef4fb;box-shadow:inset 3px 0 #1f5fa8}
.qlabel{display:inline-block;min-width:70px;color:#555;cursor:pointer} .gap{color:#aaa}
.tok{padding:1px 0;border-radius:2px;cursor:pointer} .tok.query{outline:2px solid #1f77b4}
#tip{position:absolute;background:#222;color:#fff;padding:3px 6px;border-radius:3px;font-size:12px;
pointer-events:none;white-space:pre;z-index:9}
"""

BODY = """
<nav aria-label="where you are"><button id="back" type="button" title="back a level (Escape)">&larr; Back</button>
<span id="trail"></span><span class="note">Esc: back a level</span></nav>
<header><h1>poslens head viewer</h1><p class="note" id="about"></p><span id="mode"></span></header>
<section id="grid-level">
<div class="controls"><label>statistic <select id="stat"></select></label><span id="stat-about"></span></div>
<div class="controls"><span class="bar" id="grid-bar"></span></div>
<p class="hint" id="grid-hint">Click a cell to open that head (or Tab to a grid, move with the arrow keys, Enter).</p>
<div id="grids"></div></section>
<section id="head" hidden><h2 id="head-title"></h2><div class="row">
<div><h3>along the context (mean per block of query rows)</h3><canvas id="curve" width="460" height="240"></canvas>
<p id="curve-note"></p></div>
<div><h3>block-pooled pattern (query blocks down, key blocks across)</h3>
<div class="controls"><span class="bar" id="pooled-bar"></span></div>
<canvas id="pooled" width="450" height="412" tabindex="0" aria-label="block-pooled pattern: up and down pick a row of
blocks, Enter opens its tokens"></canvas><p id="pooled-note"></p></div></div></section>
<section id="tokens-panel" hidden><h2 id="tokens-title"></h2>
<div class="controls"><label>token colour <select id="colouring"><option value="row">relative to each row's largest
shown weight</option><option value="abs">absolute weight, one scale for the block</option></select></label>
<span class="bar" id="tokens-bar"></span></div><p id="tokens-note"></p><div id="tokens"></div></section>
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


def spaced_blocks(n_blocks: int, count: int) -> list[int]:
    """``count`` blocks evenly spaced, the first and last included."""
    return sorted({int(round(x)) for x in np.linspace(0, n_blocks - 1, min(count, n_blocks))}) if count > 0 else []


def row_bytes(n: int) -> int:
    """An upper estimate of one head's row in the page: at most ``TOP_KEYS + BEFORE`` keys, each a position and a
    weight of 6 significant digits with their separators, the row's brackets and its block's ``"layer|head|block"``
    key (a block of one row)."""
    return (TOP_KEYS + BEFORE) * (len(str(n)) + 13) + 2 * len(str(n)) + 32


def plan_rows(n: int, block: int, heads: int, budget: float) -> dict[int, list[int]]:
    """``{block: its query rows}`` the page holds for a model of ``heads`` heads (layers x heads) within ``budget``
    bytes: every row of every block where they fit; else ``ROWS_PER_BLOCK``, 2 or 1 rows of every block; else
    ``ROWS_PER_BLOCK`` rows of as many blocks as fit, evenly spaced."""
    nb = math.ceil(n / block)
    per = row_bytes(n) * heads
    for r in (block, ROWS_PER_BLOCK, 2, 1):
        plan = {b: block_rows(n, block, b, r) for b in range(nb)}
        if sum(map(len, plan.values())) * per <= budget:
            return plan
    return {b: block_rows(n, block, b) for b in spaced_blocks(nb, int(budget // (per * ROWS_PER_BLOCK)))}


def full_bytes(n: int, block: int, heads: int) -> int:
    """The estimate of ``ROWS_PER_BLOCK`` rows of every block: what a budget needs for every block to answer."""
    return math.ceil(n / block) * min(ROWS_PER_BLOCK, block) * row_bytes(n) * heads


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
    """The grid's menu: each statistic with its definition, ``constant`` saying why where it is the same for every
    head of every model at this length (shown marked, not offered), then the results folder's CSV columns."""
    menu = []
    for k, (label, _, _) in STATS.items():
        why = [constant_at(k, v.heads.n) for v in views]
        menu.append({"key": k, "label": label, "about": about(k), "unit": UNITS.get(k, "0 to 1"),
                     "constant": why[0] if all(why) and len(set(why)) == 1 else None})
    seen = []
    for v in views:
        for col in v.csv_grid:
            if col not in seen:
                seen.append(col)
                menu.append({"key": f"csv:{col}", "label": f"{v.csv_label}: {col} (CSV)",
                             "about": f"The {v.csv_label} CSV's column {col}, as written.", "constant": None,
                             "unit": "as in the CSV"})
    return menu


def payload(views: list[ModelView], *, live: bool = False, title: str = "", budget: dict | None = None) -> dict:
    """What the page holds; ``budget``: ``{"page_mb", "needs_mb"}`` (the saved page's budget and the one every block's
    rows need)."""
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
            "limits": {"rows_per_block": ROWS_PER_BLOCK, "top": TOP_KEYS, "before": BEFORE},
            "budget": budget or {}}


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
