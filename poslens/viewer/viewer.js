// poslens head viewer: the head grid, one head's curves and block-pooled pattern, the tokens of a block's rows.
// Written for poslens (no library, no network): the data sits in <script id="poslens-data">; in live mode a
// block's rows come from the local server's api/rows.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("poslens-data").textContent);
  const $ = (id) => document.getElementById(id);
  const state = { stat: D.stats[0].key, model: null, layer: null, head: null, block: null };
  const tip = $("tip");

  function decode(b64) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }
  D.models.forEach((m) => { m.pooledArray = decode(m.pooled); });

  // viridis, 9 stops
  const STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
    [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  function colour(t) {
    if (!isFinite(t)) return "rgb(200,200,200)";
    t = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return `rgb(${Math.round(a[0] + f * (b[0] - a[0]))},${Math.round(a[1] + f * (b[1] - a[1]))},${Math.round(a[2] + f * (b[2] - a[2]))})`;
  }
  const fmt = (v) => (v === null || v === undefined || !isFinite(v)) ? "n/a" :
    (Math.abs(v) >= 100 ? v.toFixed(1) : Math.abs(v) >= 0.001 || v === 0 ? v.toFixed(4) : v.toExponential(2));

  function showTip(ev, text) {
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = (ev.pageX + 12) + "px";
    tip.style.top = (ev.pageY + 12) + "px";
  }
  function hideTip() { tip.hidden = true; }

  // ---- the grid ----
  const select = $("stat");
  D.stats.forEach((s) => {
    const o = document.createElement("option");
    o.value = s.key; o.textContent = s.label; o.title = s.about || "";
    select.appendChild(o);
  });
  select.addEventListener("change", () => { state.stat = select.value; drawGrids(); });

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
    return hi > lo ? [lo, hi] : [lo, lo + 1e-9];
  }
  const CELL = D.cell, LEFT = 34, TOP = 18;
  function cellRect(m, l, h) { return [LEFT + h * CELL, TOP + l * CELL, CELL, CELL]; }

  const grids = $("grids");
  D.models.forEach((m, i) => {
    const box = document.createElement("div");
    box.className = "model";
    const title = document.createElement("h2");
    title.textContent = `${m.name}: ${m.length.toLocaleString()} tokens, ${m.n_layers} layers x ${m.n_heads} heads`;
    const c = document.createElement("canvas");
    c.className = "grid"; c.dataset.model = i;
    c.width = LEFT + m.n_heads * CELL + 4; c.height = TOP + m.n_layers * CELL + 4;
    c.addEventListener("mousemove", (ev) => {
      const [l, h] = cellAt(m, c, ev);
      if (l === null) return hideTip();
      showTip(ev, `${m.name} layer ${l} head ${h}: ${label(state.stat)} ${fmt(gridValue(m, state.stat, l, h))}`);
    });
    c.addEventListener("mouseleave", hideTip);
    c.addEventListener("click", (ev) => {
      const [l, h] = cellAt(m, c, ev);
      if (l !== null) pickHead(i, l, h);
    });
    box.appendChild(title); box.appendChild(c); grids.appendChild(box);
    m.canvas = c;
  });
  function cellAt(m, c, ev) {
    const r = c.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const h = Math.floor((x - LEFT) / CELL), l = Math.floor((y - TOP) / CELL);
    if (h < 0 || l < 0 || h >= m.n_heads || l >= m.n_layers) return [null, null];
    return [l, h];
  }
  function label(key) { return (D.stats.find((s) => s.key === key) || { label: key }).label; }

  function drawGrids() {
    const [lo, hi] = scale(state.stat);
    D.models.forEach((m, i) => {
      const ctx = m.canvas.getContext("2d");
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, m.canvas.width, m.canvas.height);
      ctx.fillStyle = "#333"; ctx.font = "10px sans-serif"; ctx.textAlign = "right";
      for (let l = 0; l < m.n_layers; l += Math.max(1, Math.ceil(12 / CELL))) ctx.fillText("L" + l, LEFT - 3, TOP + l * CELL + CELL - 3);
      ctx.textAlign = "center";
      for (let h = 0; h < m.n_heads; h++) ctx.fillText("" + h, LEFT + h * CELL + CELL / 2, TOP - 5);
      for (let l = 0; l < m.n_layers; l++) for (let h = 0; h < m.n_heads; h++) {
        const [x, y, w, hh] = cellRect(m, l, h);
        ctx.fillStyle = colour((gridValue(m, state.stat, l, h) - lo) / (hi - lo));
        ctx.fillRect(x, y, w - 1, hh - 1);
      }
      if (state.model === i) {
        const [x, y, w, hh] = cellRect(m, state.layer, state.head);
        ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 2; ctx.strokeRect(x - 1, y - 1, w + 1, hh + 1);
      }
    });
    $("legend").textContent = `${label(state.stat)}: ${fmt(lo)} (dark) to ${fmt(hi)} (yellow), one scale for every model`;
  }

  // ---- one head ----
  const CURVES = [["first", "#1f77b4"], ["previous", "#ff7f0e"], ["window", "#2ca02c"], ["far", "#d62728"]];
  function pickHead(i, l, h) {
    Object.assign(state, { model: i, layer: l, head: h, block: null });
    drawGrids();
    const m = D.models[i];
    $("head").hidden = false;
    $("tokens-panel").hidden = true;
    $("head-title").textContent = `${m.name} layer ${l} head ${h}`;
    drawCurves(m, l, h);
    drawPooled(m, l, h);
  }

  function drawCurves(m, l, h) {
    const c = $("curve"), ctx = c.getContext("2d"), W = c.width, H = c.height, L = 40, B = 24, T = 8, R = 8;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = "#999"; ctx.strokeRect(L, T, W - L - R, H - T - B);
    ctx.fillStyle = "#333"; ctx.font = "10px sans-serif"; ctx.textAlign = "right";
    ctx.fillText("1", L - 3, T + 8); ctx.fillText("0", L - 3, H - B);
    ctx.textAlign = "center"; ctx.fillText("query position", (W + L) / 2, H - 4);
    ctx.fillText("0", L, H - B + 12); ctx.fillText(m.length.toLocaleString(), W - R - 10, H - B + 12);
    const X = (pos) => L + (W - L - R) * pos / m.length, Y = (v) => H - B - (H - B - T) * v;
    const nb = m.n_blocks;
    CURVES.forEach(([key, col], j) => {
      const ys = m.curves[key][l][h];
      ctx.strokeStyle = col; ctx.lineWidth = 1.5; ctx.beginPath();
      let drawing = false;  // a block without rows (null) is a gap
      for (let b = 0; b < nb; b++) {
        if (ys[b] === null) { drawing = false; continue; }
        const x = X(Math.min(m.length, (b + 0.5) * m.block)), y = Y(ys[b]);
        drawing ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
        drawing = true;
      }
      ctx.stroke();
      ctx.fillStyle = col; ctx.textAlign = "left"; ctx.fillText(key, L + 6 + 60 * j, T + 12);
    });
    if (m.csv_curves) {  // along-context's own buckets, dashed
      ctx.setLineDash([4, 3]);
      [["first_mass", "#1f77b4"], ["previous_mass", "#ff7f0e"]].forEach(([key, col]) => {
        const ys = m.csv_curves[key][l][h];
        ctx.strokeStyle = col; ctx.beginPath();
        m.csv_curves.x.forEach((pos, b) => { const x = X(pos), y = Y(ys[b]); b ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
        ctx.stroke();
      });
      ctx.setLineDash([]);
      ctx.fillStyle = "#333"; ctx.fillText("dashed: along-context CSV", L + 6, T + 26);
    }
    const e = m.curves.entropy[l][h], d = m.curves.distance[l][h];
    const b0 = e.findIndex((v) => v !== null);  // the first block with a row (a block of row 0 alone has none)
    $("curve-note").textContent = `per block of ${m.block} query rows (row 0 left out). Entropy ${fmt(e[b0])} -> ` +
      `${fmt(e[nb - 1])} nats, mean distance ${fmt(d[b0])} -> ${fmt(d[nb - 1])} tokens from the first block with a ` +
      `row to the last.`;
  }

  function pooledAt(m, l, h, b, c) {
    const nb = m.n_blocks;
    return m.pooledArray[((l * m.n_heads + h) * nb + b) * nb + c];
  }
  function blockSize(m, b) { return Math.min(m.length, (b + 1) * m.block) - b * m.block; }
  function drawPooled(m, l, h) {
    const c = $("pooled"), ctx = c.getContext("2d"), nb = m.n_blocks, px = c.width / nb;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
    for (let b = 0; b < nb; b++) for (let k = 0; k < nb; k++) {  // a block of zeros (causal, a window) stays white
      const mass = pooledAt(m, l, h, b, k) * blockSize(m, k);  // a row's mass on key block k
      if (!(mass > 0)) continue;
      ctx.fillStyle = colour((Math.log10(mass) + 4) / 4);
      ctx.fillRect(k * px, b * px, Math.ceil(px), Math.ceil(px));
    }
    if (!D.live) {
      ctx.fillStyle = "#e4002b";
      (m.precomputed || []).forEach((b) => ctx.fillRect(c.width - 4, b * px, 4, Math.max(2, px)));
    }
    if (state.block !== null) {
      ctx.strokeStyle = "#e4002b"; ctx.lineWidth = 2; ctx.strokeRect(1, state.block * px, c.width - 2, px);
    }
    $("pooled-note").textContent = `${nb} x ${nb} blocks of ${m.block} tokens; colour: log10 of a row's mass on the ` +
      `key block, -4 (dark) to 0 (yellow), white: none. Click a row of blocks for its tokens` +
      (D.live ? " (computed now)." : "; red ticks: blocks whose rows this file holds.");
  }
  function blockAt(ev) {
    const m = D.models[state.model], c = $("pooled"), r = c.getBoundingClientRect();
    const px = r.width / m.n_blocks;
    const k = Math.floor((ev.clientX - r.left) / px), b = Math.floor((ev.clientY - r.top) / px);
    return (b < 0 || k < 0 || b >= m.n_blocks || k >= m.n_blocks) ? [null, null] : [b, k];
  }
  $("pooled").addEventListener("mousemove", (ev) => {
    if (state.model === null) return;
    const [b, k] = blockAt(ev);
    if (b === null) return hideTip();
    const m = D.models[state.model], v = pooledAt(m, state.layer, state.head, b, k);
    showTip(ev, `query rows ${b * m.block}-${b * m.block + blockSize(m, b) - 1}, keys ${k * m.block}-` +
      `${k * m.block + blockSize(m, k) - 1}: mean entry ${fmt(v)}, a row's mass ${fmt(v * blockSize(m, k))}`);
  });
  $("pooled").addEventListener("mouseleave", hideTip);
  $("pooled").addEventListener("click", (ev) => {
    const [b] = blockAt(ev);
    if (b !== null) pickBlock(b);
  });

  // ---- the tokens ----
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
  async function pickBlock(b) {
    state.block = b;
    const i = state.model, m = D.models[i], l = state.layer, h = state.head;
    drawPooled(m, l, h);
    const panel = $("tokens-panel"), out = $("tokens");
    panel.hidden = false;
    $("tokens-title").textContent = `${m.name} layer ${l} head ${h}: query rows of block ${b} ` +
      `(rows ${b * m.block}-${b * m.block + blockSize(m, b) - 1})`;
    out.textContent = D.live ? "computing..." : "";
    const t0 = performance.now();
    let rows;
    try { rows = await rowsOf(m, i, l, h, b); } catch (err) { out.textContent = "error: " + err.message; return; }
    if (!rows) {
      out.textContent = `This file holds the rows of blocks ${(m.precomputed || []).join(", ")} only; ` +
        "`poslens view --serve` computes any block's rows.";
      return;
    }
    out.textContent = "";
    const note = document.createElement("p");
    note.className = "note";
    note.textContent = `${rows.length} rows, each its ${D.limits.top} most attended keys and the ${D.limits.before} ` +
      "keys ending at the query (the query's own token outlined); colour: the weight over the row's largest shown. " +
      "Exact hook_pattern rows.";
    out.appendChild(note);
    rows.forEach(([q, keys, ws]) => {
      const line = document.createElement("div");
      line.className = "qrow";
      const head = document.createElement("span");
      head.className = "qlabel"; head.textContent = `q ${q}`;
      line.appendChild(head);
      const top = Math.max(...ws);
      keys.forEach((k, j) => {
        if (j && k > keys[j - 1] + 1) {
          const gap = document.createElement("span");
          gap.className = "gap"; gap.textContent = ` ...${k - keys[j - 1] - 1}... `;
          line.appendChild(gap);
        }
        const s = document.createElement("span");
        s.className = "tok" + (k === q ? " query" : "");
        const text = m.tokens[k];
        s.textContent = text.replace(/\n/g, "\u21b5");
        s.dataset.k = k; s.dataset.w = ws[j];
        s.style.background = `rgba(228,0,43,${(ws[j] / top).toFixed(3)})`;
        s.addEventListener("mouseenter", (ev) =>
          showTip(ev, `weight ${ws[j].toFixed(4)} | key ${k} ${JSON.stringify(text)} | query ${q}`));
        s.addEventListener("mouseleave", hideTip);
        line.appendChild(s);
      });
      out.appendChild(line);
    });
    window.viewer.lastDrill = performance.now() - t0;
  }

  drawGrids();
  $("mode").textContent = D.live ? "live: any block's rows are computed on click" :
    "file: rows of the marked blocks only";
  window.viewer = {
    state, data: D,
    cellCentre(i, l, h) {  // viewport coordinates (page.mouse.click's)
      const m = D.models[i], r = m.canvas.getBoundingClientRect(), [x, y, w, hh] = cellRect(m, l, h);
      return [r.left + x + w / 2, r.top + y + hh / 2];
    },
    blockCentre(b, k) {
      const m = D.models[state.model], r = $("pooled").getBoundingClientRect(), px = r.width / m.n_blocks;
      return [r.left + (k + 0.5) * px, r.top + (b + 0.5) * px];
    },
    ready: performance.now(),
  };
})();
