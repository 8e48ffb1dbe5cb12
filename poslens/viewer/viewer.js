// poslens head viewer: the head grid, one head's curves and block-pooled pattern, the tokens of a block's rows.
// Written for poslens (no library, no network): the data sits in <script id="poslens-data">; in live mode a
// block's rows come from the local server's api/rows. Where the page stands (statistic, head, block, query row,
// token colouring) lives in the URL fragment, so a view reloads, links, and goes back with the browser.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("poslens-data").textContent);
  D.budget = D.budget || {};  // a page written before the budget: its numbers unknown
  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const offered = D.stats.filter((s) => !s.constant);
  const state = { stat: (offered[0] || D.stats[0]).key, model: null, layer: null, head: null, block: null,
    q: null, colouring: "row" };
  const tip = $("tip");

  function decode(b64) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }
  D.models.forEach((m) => { m.pooledArray = decode(m.pooled); m.cursor = [0, 0]; });

  // ---- colours, numbers, tips, colour bars ----
  const STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
    [92, 200, 99], [170, 220, 50], [253, 231, 37]];  // viridis, 9 stops
  function colour(t) {
    if (!isFinite(t)) return "rgb(200,200,200)";
    t = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return `rgb(${Math.round(a[0] + f * (b[0] - a[0]))},${Math.round(a[1] + f * (b[1] - a[1]))},${Math.round(a[2] + f * (b[2] - a[2]))})`;
  }
  const red = (t) => `rgba(228,0,43,${Math.min(1, Math.max(0, t)).toFixed(3)})`;
  const fmt = (v) => (v === null || v === undefined || !isFinite(v)) ? "n/a" :
    (Math.abs(v) >= 100 ? v.toFixed(1) : Math.abs(v) >= 0.001 || v === 0 ? v.toFixed(4) : v.toExponential(2));

  function showTip(x, y, text) {
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = (x + 12) + "px";
    tip.style.top = (y + 12) + "px";
  }
  function hideTip() { tip.hidden = true; }

  // A colour bar: its scale drawn from lo to hi (data-lo, data-hi hold the numbers), with labels and the unit.
  function colourBar(box, paint, lo, hi, loText, hiText, unit) {
    box.textContent = "";
    const c = document.createElement("canvas");
    c.width = 160; c.height = 12;
    const ctx = c.getContext("2d");
    for (let x = 0; x < c.width; x++) { ctx.fillStyle = paint(x / (c.width - 1)); ctx.fillRect(x, 0, 1, c.height); }
    box.append(el("span", "bar-lo", loText), c, el("span", "bar-hi", hiText), el("span", "bar-unit", unit));
    box.dataset.lo = lo; box.dataset.hi = hi;
  }

  // ---- where the page stands: the URL fragment ----
  const KEYS = { s: "stat", m: "model", l: "layer", h: "head", b: "block", q: "q", c: "colouring" };
  function encode(st) {
    return Object.entries(KEYS).filter(([, k]) => st[k] !== null && st[k] !== undefined)
      .map(([short, k]) => `${short}=${encodeURIComponent(st[k])}`).join("&");
  }
  function whole(v, n) { const i = Number(v); return Number.isInteger(i) && i >= 0 && i < n ? i : null; }
  function parse(hash) {
    const got = Object.fromEntries(new URLSearchParams(hash.replace(/^#/, "")));
    const st = { stat: D.stats.some((s) => s.key === got.s) ? got.s : state.stat, model: null, layer: null,
      head: null, block: null, q: null, colouring: got.c === "abs" ? "abs" : "row" };
    const m = D.models[whole(got.m, D.models.length)];
    if (!m) return st;
    Object.assign(st, { model: D.models.indexOf(m), layer: whole(got.l, m.n_layers), head: whole(got.h, m.n_heads) });
    if (st.layer === null || st.head === null) return Object.assign(st, { model: null, layer: null, head: null });
    st.block = whole(got.b, m.n_blocks);
    if (st.block !== null) st.q = whole(got.q, m.length);
    return st;
  }
  function go(change) {  // applied at once, so steps taken faster than hashchange fires all count
    const next = Object.assign({}, state, change), hash = "#" + encode(next);
    apply(parse(hash), true);
    if (hash !== location.hash) location.hash = hash;  // a history entry: the browser's back returns here
  }
  function quietly(change) {  // a setting, not a step: the fragment follows without a history entry
    Object.assign(state, change);
    history.replaceState(null, "", "#" + encode(state));
  }
  function back() {
    if (state.q !== null) go({ q: null });
    else if (state.block !== null) go({ block: null });
    else if (state.model !== null) go({ model: null, layer: null, head: null });
  }

  // ---- level 1: the grid ----
  const select = $("stat");
  D.stats.forEach((s) => {
    const o = document.createElement("option");
    o.value = s.key; o.disabled = !!s.constant;
    o.textContent = s.constant ? `${s.label}: ${s.constant.split(":")[0]}` : s.label;
    select.appendChild(o);
  });
  select.addEventListener("change", () => { quietly({ stat: select.value }); drawGrids(); });
  function statOf(key) { return D.stats.find((s) => s.key === key) || { key, label: key, about: "", unit: "" }; }

  function gridValue(m, stat, l, h) {
    const g = m.grid[stat];
    if (!g || !g[l]) return NaN;
    const v = g[l][h];
    return v === null ? NaN : v;
  }
  function scale(stat) {
    let lo = Infinity, hi = -Infinity;
    D.models.forEach((m) => {
      for (let l = 0; l < m.n_layers; l++) for (let h = 0; h < m.n_heads; h++) {
        const v = gridValue(m, stat, l, h);
        if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
    });
    if (!isFinite(lo)) return [0, 1];
    return [lo, hi];
  }
  const CELL = D.cell, LEFT = 34, TOP = 18;
  function cellRect(m, l, h) { return [LEFT + h * CELL, TOP + l * CELL, CELL, CELL]; }
  function cellText(m, l, h) {
    return `${m.name} layer ${l} head ${h}: ${statOf(state.stat).label} ${fmt(gridValue(m, state.stat, l, h))}`;
  }

  function gridCanvas(m, i) {
    const c = document.createElement("canvas");
    c.className = "grid"; c.dataset.model = i; c.tabIndex = 0;
    c.setAttribute("aria-label", `${m.name} head grid: arrow keys move, Enter opens the head`);
    c.width = LEFT + m.n_heads * CELL + 4; c.height = TOP + m.n_layers * CELL + 4;
    c.addEventListener("mousemove", (ev) => {
      const [l, h] = cellAt(m, c, ev);
      if (l === null) return hideTip();
      showTip(ev.pageX, ev.pageY, cellText(m, l, h));
    });
    c.addEventListener("mouseleave", hideTip);
    c.addEventListener("click", (ev) => {
      const [l, h] = cellAt(m, c, ev);
      if (l !== null) go({ model: i, layer: l, head: h, block: null, q: null });
    });
    c.addEventListener("keydown", (ev) => gridKey(ev, m, i));
    c.addEventListener("focus", () => { drawGrids(); cursorTip(m); });
    c.addEventListener("blur", () => { hideTip(); drawGrids(); });
    return c;
  }
  const MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  function gridKey(ev, m, i) {
    if (MOVES[ev.key]) {
      const [dl, dh] = MOVES[ev.key];
      m.cursor = [Math.min(m.n_layers - 1, Math.max(0, m.cursor[0] + dl)),
        Math.min(m.n_heads - 1, Math.max(0, m.cursor[1] + dh))];
      drawGrids(); cursorTip(m);
    } else if (ev.key === "Enter" || ev.key === " ") {
      go({ model: i, layer: m.cursor[0], head: m.cursor[1], block: null, q: null });
    } else return;
    ev.preventDefault();
  }
  function cursorTip(m) {
    const r = m.canvas.getBoundingClientRect(), [x, y] = cellRect(m, m.cursor[0], m.cursor[1]);
    showTip(r.left + window.scrollX + x + CELL, r.top + window.scrollY + y + CELL, cellText(m, ...m.cursor));
  }
  function cellAt(m, c, ev) {
    const r = c.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const h = Math.floor((x - LEFT) / CELL), l = Math.floor((y - TOP) / CELL);
    if (h < 0 || l < 0 || h >= m.n_heads || l >= m.n_layers) return [null, null];
    return [l, h];
  }

  const grids = $("grids");
  D.models.forEach((m, i) => {
    const box = document.createElement("div");
    const title = document.createElement("h2");
    title.textContent = `${m.name}: ${m.length.toLocaleString()} tokens, ${m.n_layers} layers x ${m.n_heads} heads`;
    m.canvas = gridCanvas(m, i);
    box.append(title, m.canvas); grids.appendChild(box);
  });

  function drawGrid(m, i, lo, hi) {
    const ctx = m.canvas.getContext("2d");
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, m.canvas.width, m.canvas.height);
    ctx.fillStyle = "#333"; ctx.font = "10px sans-serif"; ctx.textAlign = "right";
    for (let l = 0; l < m.n_layers; l += Math.max(1, Math.ceil(12 / CELL))) {
      ctx.fillText("L" + l, LEFT - 3, TOP + l * CELL + CELL - 3);
    }
    ctx.textAlign = "center";
    for (let h = 0; h < m.n_heads; h++) ctx.fillText("" + h, LEFT + h * CELL + CELL / 2, TOP - 5);
    for (let l = 0; l < m.n_layers; l++) for (let h = 0; h < m.n_heads; h++) {
      const [x, y, w, hh] = cellRect(m, l, h);
      ctx.fillStyle = colour(hi > lo ? (gridValue(m, state.stat, l, h) - lo) / (hi - lo) : 0);
      ctx.fillRect(x, y, w - 1, hh - 1);
    }
    if (state.model === i) {
      const [x, y, w, hh] = cellRect(m, state.layer, state.head);
      ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 2; ctx.strokeRect(x - 1, y - 1, w + 1, hh + 1);
    }
    if (m.canvas.matches(":focus-visible")) {
      const [x, y, w, hh] = cellRect(m, m.cursor[0], m.cursor[1]);
      ctx.strokeStyle = "#fff"; ctx.setLineDash([3, 2]); ctx.lineWidth = 2; ctx.strokeRect(x, y, w - 1, hh - 1);
      ctx.setLineDash([]);
    }
  }
  function drawGrids() {
    const [lo, hi] = scale(state.stat), s = statOf(state.stat);
    D.models.forEach((m, i) => drawGrid(m, i, lo, hi));
    select.value = state.stat;
    $("stat-about").textContent = s.about + (s.constant ? ` Here ${s.constant}.` : "");
    const unit = s.unit && !s.label.includes(s.unit) ? ` (${s.unit})` : "";
    colourBar($("grid-bar"), colour, lo, hi, fmt(lo), fmt(hi), `${s.label}${unit}; one scale for every model`);
  }

  // ---- level 2: one head ----
  const CURVES = [["first", "#1f77b4"], ["previous", "#ff7f0e"], ["window", "#2ca02c"], ["far", "#d62728"]];
  function showHead() {
    const m = D.models[state.model], l = state.layer, h = state.head;
    m.cursor = [l, h];
    $("head-title").textContent = `${m.name} layer ${l} head ${h}`;
    drawCurves(m, l, h);
    if (pooledCursor === null || pooledCursor >= m.n_blocks) pooledCursor = 0;
    drawPooled(m, l, h);
  }

  function drawCurves(m, l, h) {
    const c = $("curve"), ctx = c.getContext("2d"), W = c.width, H = c.height, L = 40, B = 24, T = 8, R = 8;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = "#999"; ctx.strokeRect(L, T, W - L - R, H - T - B);
    ctx.fillStyle = "#333"; ctx.font = "10px sans-serif"; ctx.textAlign = "right";
    ctx.fillText("1", L - 3, T + 8); ctx.fillText("0", L - 3, H - B);
    ctx.textAlign = "center"; ctx.fillText("query position", (W + L) / 2, H - 2);
    const X = (pos) => L + (W - L - R) * pos / m.length, Y = (v) => H - B - (H - B - T) * v;
    niceTicks(m.length).forEach((t) => {
      ctx.fillText(t.toLocaleString(), X(t), H - B + 11);
      ctx.fillRect(X(t), H - B, 1, 3);
    });
    CURVES.forEach(([key, col], j) => {
      const at = (v, b) => [X(Math.min(m.length, (b + 0.5) * m.block)), v === null ? null : Y(v)];
      drawLine(ctx, m.curves[key][l][h].map(at), col);
      ctx.fillStyle = col; ctx.textAlign = "left"; ctx.fillText(key, L + 6 + 60 * j, T + 12);
    });
    if (m.csv_curves) {  // along-context's own buckets, dashed
      ctx.setLineDash([4, 3]);
      [["first_mass", "#1f77b4"], ["previous_mass", "#ff7f0e"]].forEach(([key, col]) =>
        drawLine(ctx, m.csv_curves.x.map((pos, b) => [X(pos), Y(m.csv_curves[key][l][h][b])]), col));
      ctx.setLineDash([]);
      ctx.fillStyle = "#333"; ctx.fillText("dashed: along-context CSV", L + 6, T + 26);
    }
    curveNote(m, l, h);
  }
  function drawLine(ctx, points, col) {  // a point without a value (null) is a gap
    ctx.strokeStyle = col; ctx.lineWidth = 1.5; ctx.beginPath();
    let drawing = false;
    points.forEach(([x, y]) => {
      if (y === null) { drawing = false; return; }
      drawing ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
      drawing = true;
    });
    ctx.stroke();
  }
  function curveNote(m, l, h) {
    const e = m.curves.entropy[l][h], d = m.curves.distance[l][h], nb = m.n_blocks;
    const b0 = e.findIndex((v) => v !== null);  // the first block with a row (a block of row 0 alone has none)
    $("curve-note").textContent = `Mass (0 to 1) per block of ${m.block} query rows (row 0 left out). Entropy ` +
      `${fmt(e[b0])} -> ${fmt(e[nb - 1])} nats, mean distance ${fmt(d[b0])} -> ${fmt(d[nb - 1])} tokens from the ` +
      "first block with a row to the last.";
  }

  const PL = 46, PT = 22, PS = 384;  // the pooled pattern's plot: left and top margins (position ticks), side
  let pooledCursor = null;
  function pooledAt(m, l, h, b, c) {
    const nb = m.n_blocks;
    return m.pooledArray[((l * m.n_heads + h) * nb + b) * nb + c];
  }
  function blockSize(m, b) { return Math.min(m.length, (b + 1) * m.block) - b * m.block; }
  function rowSpan(m, b) { return `rows ${b * m.block}-${b * m.block + blockSize(m, b) - 1}`; }
  function held(m) { return D.live ? null : new Set(m.precomputed || []); }
  function niceTicks(n) {
    const raw = n / 5, p = Math.pow(10, Math.floor(Math.log10(Math.max(1, raw))));
    const step = [1, 2, 5, 10].map((x) => x * p).find((s) => s >= raw);
    const out = [];
    for (let t = 0; t <= n; t += step) out.push(t);
    return out;
  }
  function drawPooledAxes(ctx, m, px) {
    ctx.fillStyle = "#333"; ctx.font = "10px sans-serif"; ctx.strokeStyle = "#333"; ctx.lineWidth = 1;
    niceTicks(m.length).forEach((t) => {
      const at = Math.min(PS, t / m.block * px);
      ctx.textAlign = "center"; ctx.fillText(t.toLocaleString(), PL + at, PT - 8);
      ctx.textAlign = "right"; ctx.fillText(t.toLocaleString(), PL - 6, PT + at + 3);
      ctx.beginPath(); ctx.moveTo(PL + at, PT - 5); ctx.lineTo(PL + at, PT);
      ctx.moveTo(PL - 4, PT + at); ctx.lineTo(PL, PT + at); ctx.stroke();
    });
  }
  function drawPooled(m, l, h) {
    const c = $("pooled"), ctx = c.getContext("2d"), nb = m.n_blocks, px = PS / nb, rows = held(m);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
    ctx.strokeStyle = "#ccc"; ctx.strokeRect(PL - 0.5, PT - 0.5, PS + 1, PS + 1);
    for (let b = 0; b < nb; b++) for (let k = 0; k < nb; k++) {  // a block of zeros (causal, a window) stays white
      const mass = pooledAt(m, l, h, b, k) * blockSize(m, k);  // a row's mass on key block k
      if (!(mass > 0)) continue;
      ctx.fillStyle = colour((Math.log10(mass) + 4) / 4);
      ctx.fillRect(PL + k * px, PT + b * px, Math.ceil(px), Math.ceil(px));
    }
    drawPooledAxes(ctx, m, px);
    if (rows && rows.size < nb) {  // which rows of blocks this file holds: a strip beside the pattern
      for (let b = 0; b < nb; b++) {
        ctx.fillStyle = rows.has(b) ? "#1a9850" : "#e6e6e6";
        ctx.fillRect(PL + PS + 4, PT + b * px + 1, 10, Math.max(2, px - 2));
      }
    }
    pooledMarks(ctx, m, px);
    pooledNote(m, rows);
  }
  function pooledMarks(ctx, m, px) {
    if (state.block !== null) {
      ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 2; ctx.strokeRect(PL + 1, PT + state.block * px, PS - 2, px);
    }
    if ($("pooled").matches(":focus-visible") && pooledCursor !== null) {
      ctx.strokeStyle = "#1f5fa8"; ctx.setLineDash([4, 3]); ctx.lineWidth = 2;
      ctx.strokeRect(PL + 1, PT + pooledCursor * px, PS - 2, px); ctx.setLineDash([]);
    }
  }
  function pooledNote(m, rows) {
    const nb = m.n_blocks;
    let where = D.live ? " (computed now)." : ".";
    if (rows && rows.size < nb) {
      where = `; this file holds the rows of ${rows.size} of ${nb} blocks: green in the strip on the right ` +
        `(grey: none; a page budget of ${D.budget.needs_mb} MB holds every block's).`;
    }
    $("pooled-note").textContent = `${nb} x ${nb} blocks of ${m.block} tokens, positions on both axes; white: no ` +
      `attention. Click a row of blocks (or Tab here, up / down, Enter) for its tokens${where}`;
    colourBar($("pooled-bar"), colour, 1e-4, 1, "1e-4", "1", "a query row's mass on the key block (log scale)");
  }
  function blockAt(ev) {
    const m = D.models[state.model], r = $("pooled").getBoundingClientRect(), px = PS / m.n_blocks;
    const k = Math.floor((ev.clientX - r.left - PL) / px), b = Math.floor((ev.clientY - r.top - PT) / px);
    return (b < 0 || k < 0 || b >= m.n_blocks || k >= m.n_blocks) ? [null, null] : [b, k];
  }
  function blockText(m, b, k) {
    const v = pooledAt(m, state.layer, state.head, b, k), rows = held(m);
    const inFile = rows === null ? "" : `\nthis file holds ${rows.has(b) ? "" : "no "}rows of this block`;
    return `query rows ${b * m.block}-${b * m.block + blockSize(m, b) - 1}, keys ${k * m.block}-` +
      `${k * m.block + blockSize(m, k) - 1}: mean entry ${fmt(v)}, a row's mass ${fmt(v * blockSize(m, k))}` + inFile;
  }
  $("pooled").addEventListener("mousemove", (ev) => {
    if (state.model === null) return;
    const [b, k] = blockAt(ev);
    if (b === null) return hideTip();
    showTip(ev.pageX, ev.pageY, blockText(D.models[state.model], b, k));
  });
  $("pooled").addEventListener("mouseleave", hideTip);
  $("pooled").addEventListener("click", (ev) => {
    const [b] = blockAt(ev);
    if (b !== null) go({ block: b, q: null });
  });
  $("pooled").addEventListener("keydown", (ev) => {
    if (state.model === null) return;
    const m = D.models[state.model];
    if (ev.key === "ArrowUp" || ev.key === "ArrowDown") {
      pooledCursor = Math.min(m.n_blocks - 1, Math.max(0, pooledCursor + (ev.key === "ArrowUp" ? -1 : 1)));
      drawPooled(m, state.layer, state.head);
      const r = $("pooled").getBoundingClientRect(), px = PS / m.n_blocks;
      showTip(r.left + window.scrollX + PL + PS, r.top + window.scrollY + PT + pooledCursor * px,
        blockText(m, pooledCursor, pooledCursor));
    } else if (ev.key === "Enter" || ev.key === " ") go({ block: pooledCursor, q: null });
    else return;
    ev.preventDefault();
  });
  function redrawPooled() { if (state.model !== null) drawPooled(D.models[state.model], state.layer, state.head); }
  $("pooled").addEventListener("focus", redrawPooled);
  $("pooled").addEventListener("blur", () => { hideTip(); redrawPooled(); });

  // ---- level 3: the tokens ----
  async function rowsOf(m, i, l, h, b) {
    const key = `${l}|${h}|${b}`;
    if (m.rows[key]) return m.rows[key];
    if (!D.live) return null;
    const got = await fetch(`api/rows?model=${i}&layer=${l}&head=${h}&block=${b}`);
    if (!got.ok) throw new Error(await got.text());
    const body = await got.json();
    Object.assign(m.rows, body.rows);
    return m.rows[key];
  }
  function notHeld(m, b) {
    const rows = [...(m.precomputed || [])];
    const shown = rows.slice(0, 12).join(", ") + (rows.length > 12 ? ", ..." : "");
    return `This file holds no rows of block ${b}: its page budget (${D.budget.page_mb} MB) holds the rows of ` +
      `${rows.length} of ${m.n_blocks} blocks (${shown || "none"}; green beside the pooled pattern). A page with every ` +
      `block's rows: \`poslens view ... --page-mb ${D.budget.needs_mb}\` (Python: page_mb=${D.budget.needs_mb}); ` +
      "`poslens view --serve` computes any block's on click.";
  }
  let shown = 0;  // the latest block asked for: an answer arriving after another click is dropped
  async function showBlock(scroll) {
    const i = state.model, m = D.models[i], l = state.layer, h = state.head, b = state.block, ask = ++shown;
    const out = $("tokens"), keyboard = out.contains(document.activeElement);  // it stays, on the query's row
    $("tokens-title").textContent = `${m.name} layer ${l} head ${h}: query rows of block ${b} (${rowSpan(m, b)})`;
    out.textContent = D.live ? "computing..." : "";
    $("tokens-note").textContent = "";
    $("tokens-bar").textContent = "";
    const t0 = performance.now();
    let rows;
    try { rows = await rowsOf(m, i, l, h, b); } catch (err) { out.textContent = "error: " + err.message; return; }
    if (ask !== shown) return;
    if (!rows) { out.textContent = notHeld(m, b); return; }
    drawRows(m, rows, keyboard);
    window.viewer.lastDrill = performance.now() - t0;
    if (scroll) scrollToLevel();
  }
  function drawRows(m, rows, keyboard) {
    const out = $("tokens"), top = Math.max(...rows.flatMap(([, , ws]) => ws));
    out.textContent = "";
    const all = rows.length === blockSize(m, state.block);
    const count = all ? "Every query row" : rows.length === 1 ? "1 query row" : `${rows.length} query rows`;
    $("tokens-note").textContent = `${count} of this block${all || D.live ? "" : " (those this file holds)"}, each ` +
      `its ${D.limits.top} most attended keys and the ${D.limits.before} keys ending at the query (outlined), over ` +
      "the text; exact hook_pattern rows. Click a token to read its own row (it becomes the query); up / down move " +
      "between rows, left / right along one, Enter picks.";
    const bar = $("tokens-bar");
    if (state.colouring === "abs") colourBar(bar, red, 0, top, "0", fmt(top), "attention weight, one scale for the block");
    else colourBar(bar, red, 0, 1, "0", "row's max", "weight / the row's largest shown weight");
    rows.forEach((row) => out.appendChild(rowLine(m, row, state.colouring === "abs" ? top : null)));
    markQuery(m, rows, keyboard);
  }
  function rowLine(m, [q, keys, ws], top) {
    const line = document.createElement("div");
    line.className = "qrow"; line.tabIndex = 0; line.dataset.q = q;
    const label = document.createElement("span");
    label.className = "qlabel"; label.textContent = `q ${q}`;
    label.addEventListener("click", () => go({ q }));
    line.appendChild(label);
    const scaleTo = top === null ? Math.max(...ws) : top;
    keys.forEach((k, j) => {
      if (j && k > keys[j - 1] + 1) line.appendChild(gap(m, keys[j - 1] + 1, k));
      line.appendChild(token(m, q, k, ws[j], scaleTo));
    });
    return line;
  }
  const SHORT_GAP = 3;  // keys left out between two shown: a few as their (dimmed) text, more as a count
  function gap(m, from, to) {
    const s = document.createElement("span");
    s.className = "gap";
    s.textContent = to - from <= SHORT_GAP ? m.tokens.slice(from, to).join("").replace(/\n/g, "\u21b5")
      : ` ...${to - from}... `;
    return s;
  }
  function token(m, q, k, w, scaleTo) {
    const s = document.createElement("span"), text = m.tokens[k];
    s.className = "tok" + (k === q ? " query" : ""); s.tabIndex = -1;
    s.textContent = text.replace(/\n/g, "\u21b5");
    s.dataset.k = k; s.dataset.w = w;
    s.style.background = red(w / scaleTo);
    const about = `weight ${w.toFixed(4)} | key ${k} ${JSON.stringify(text)} | query ${q}`;
    s.addEventListener("mouseenter", (ev) => showTip(ev.pageX, ev.pageY, about));
    s.addEventListener("mouseleave", hideTip);
    s.addEventListener("click", () => focusToken(m, k));
    return s;
  }
  function focusToken(m, k) { go({ block: Math.floor(k / m.block), q: k }); }
  function markQuery(m, rows, keyboard) {
    const line = state.q === null ? null : document.querySelector(`#tokens .qrow[data-q="${state.q}"]`);
    if (line) line.classList.add("focus");
    if (keyboard) (line || document.querySelector("#tokens .qrow")).focus({ preventScroll: true });
    else if (state.q !== null) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = `Row ${state.q} is not among this block's rows in this file (rows ` +
        `${rows.map((r) => r[0]).join(", ")}).`;
      $("tokens").prepend(p);
    }
  }
  $("tokens").addEventListener("keydown", (ev) => {
    const t = ev.target, line = t.closest(".qrow");
    if (!line) return;
    const step = { ArrowUp: "previousElementSibling", ArrowDown: "nextElementSibling" }[ev.key];
    if (step) {
      let next = line[step];
      while (next && !next.classList.contains("qrow")) next = next[step];
      if (next) next.focus();
    } else if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      const toks = [...line.querySelectorAll(".tok")], at = toks.indexOf(t);
      const to = at < 0 ? 0 : Math.min(toks.length - 1, Math.max(0, at + (ev.key === "ArrowRight" ? 1 : -1)));
      toks[to].focus();
      const r = toks[to].getBoundingClientRect();
      const { w, k } = toks[to].dataset;
      showTip(r.left + window.scrollX, r.bottom + window.scrollY, `weight ${Number(w).toFixed(4)} | key ${k}`);
    } else if (ev.key === "Enter" || ev.key === " ") {
      if (t.classList.contains("tok")) focusToken(D.models[state.model], Number(t.dataset.k));
      else go({ q: Number(line.dataset.q) });
    } else return;
    ev.preventDefault();
  });
  $("colouring").addEventListener("change", () => {
    quietly({ colouring: $("colouring").value });
    if (state.block !== null) showBlock(false);
  });

  // ---- the breadcrumb, the levels shown, scrolling ----
  function crumb(text, change) {
    const a = document.createElement("a");
    a.textContent = text; a.tabIndex = 0;
    a.addEventListener("click", () => go(change));
    a.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(change); });
    return a;
  }
  function drawTrail() {
    const trail = $("trail"), m = D.models[state.model];
    const parts = [["head grid", { model: null, layer: null, head: null, block: null, q: null }]];
    if (m) parts.push([`${m.name} layer ${state.layer} head ${state.head}`, { block: null, q: null }]);
    if (m && state.block !== null) parts.push([`block ${state.block} (${rowSpan(m, state.block)})`, { q: null }]);
    if (m && state.q !== null) parts.push([`query ${state.q}`, {}]);
    trail.textContent = "";
    parts.forEach(([text, change], j) => {
      if (j) trail.appendChild(el("span", "sep", ">"));
      trail.appendChild(j === parts.length - 1 ? el("b", "", text) : crumb(text, change));
    });
    $("back").disabled = parts.length === 1;
  }
  function scrollToLevel() {
    const line = state.q === null ? null : document.querySelector(`#tokens .qrow[data-q="${state.q}"]`);
    if (line) line.scrollIntoView({ block: "center" });
    else if (state.block !== null) $("tokens-panel").scrollIntoView({ block: "start" });
    else if (state.model !== null) $("head").scrollIntoView({ block: "start" });
    else window.scrollTo(0, 0);
  }
  function apply(next, scroll) {
    Object.assign(state, next);
    if (state.model !== null) D.models[state.model].cursor = [state.layer, state.head];
    hideTip();
    $("colouring").value = state.colouring;
    drawGrids();
    $("head").hidden = state.model === null;
    $("tokens-panel").hidden = state.block === null;
    if (state.model !== null) showHead();
    drawTrail();
    if (state.block !== null) showBlock(scroll);
    if (scroll) scrollToLevel();
  }

  $("back").addEventListener("click", back);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !ev.defaultPrevented) { back(); ev.preventDefault(); }
  });
  window.addEventListener("hashchange", () => {  // the browser's back / forward, or a link; a step of go() is applied
    if (location.hash !== "#" + encode(state)) apply(parse(location.hash), true);
  });
  const total = D.models.reduce((n, m) => n + m.n_blocks, 0);
  const inFile = D.models.reduce((n, m) => n + (m.precomputed || []).length, 0);
  const fewest = Math.min(...D.models.flatMap((m) => (m.precomputed || []).map((b) =>
    (m.rows[`0|0|${b}`] || []).length)));
  $("mode").textContent = D.live ? "live: any block's rows are computed on click" :
    inFile === total ? "file: every block's rows are in this file" +
      (fewest < Math.min(...D.models.map((m) => m.block)) - 1 ? ` (at least ${fewest} query rows of each; ` +
        "--serve computes all)" : "") :
      `file: the rows of ${inFile} of ${total} blocks are in this file (a page budget of ${D.budget.needs_mb} MB ` +
      "holds every block's; --serve computes any)";
  window.viewer = {
    state, data: D, go, back,
    cellCentre(i, l, h) {  // viewport coordinates (page.mouse.click's)
      const m = D.models[i], r = m.canvas.getBoundingClientRect(), [x, y, w, hh] = cellRect(m, l, h);
      return [r.left + x + w / 2, r.top + y + hh / 2];
    },
    blockCentre(b, k) {
      const m = D.models[state.model], r = $("pooled").getBoundingClientRect(), px = PS / m.n_blocks;
      return [r.left + PL + (k + 0.5) * px, r.top + PT + (b + 0.5) * px];
    },
  };
  apply(parse(location.hash), location.hash.length > 1);
  window.viewer.ready = performance.now();
})();
