"""The head viewer on the real models: page size, time to first paint and to each drill-down in headless Chromium.

``python -m bench.viewer --model smollm2 [--model gemma3-270m] [--shots docs/viewer] [--json out.json]``: loads the
models, builds one page at each model's full context (``poslens.viewer.view``: one statistics pass and one pass for
the precomputed blocks' rows per model), writes it, then in Debian's Chromium (Playwright, headless):

- **first paint**: a fresh page per repeat, the file opened from disk; ``first-contentful-paint`` and the moment the
  grid is drawn (``viewer.ready``), both from navigation start;
- **head**: a click on a grid cell until that head's curves and pooled pattern are drawn (wall clock around the click);
- **block (file)**: a click on a precomputed block until its rows' tokens are shown;
- **block (live)**: the same page served by ``View.serve`` (127.0.0.1), a click on a block the file does not hold until
  its rows, computed by the loaded model, are shown (from the server's recording, ``poslens.viewer.data.Recorded``;
  the runs below were made before it, by a pass that stops after the head's layer; ``bench.viewer_live`` times both).

Not a timed test: the numbers depend on the machine's load, which is printed with them. ``--shots`` keeps one
screenshot of each level (the README's).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


def _load() -> str:
    return " / ".join(open("/proc/loadavg").read().split()[:3])


def _small_png(png: bytes, path: Path) -> None:
    """A screenshot as a 64-colour PNG (README-sized)."""
    import io

    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("RGB")
    path.parent.mkdir(parents=True, exist_ok=True)
    im.quantize(64).save(path, optimize=True)


def measure(models: list[str], repeats: int, shots: Path | None, layers: dict | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    record = {}
    v, out = _build(models, record)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        record["paint"] = _paints(browser, out, repeats)
        record["file"], record["live"] = [], []
        _file_clicks(browser, out, v, repeats, shots, record["file"])
        v.serve(0)
        try:
            _live_clicks(browser, v, repeats, shots, record["live"])
        finally:
            v.stop()
        browser.close()
    record["load_end"] = _load()
    return record


def _build(models: list[str], record: dict):
    """Loads the models and builds and writes their page, its times and sizes into ``record``; returns the view and
    the page's path."""
    import torch

    from interp.loading import load
    from poslens.viewer import view

    record |= {"models": models, "load_start": _load(), "torch_threads": torch.get_num_threads()}
    t0 = time.perf_counter()
    loaded = [load(m) for m in models]
    record["load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    v = view(loaded)
    record["build_s"] = time.perf_counter() - t0
    record["timings"] = v.timings
    record["lengths"] = [m["length"] for m in v.data["models"]]
    record["blocks"] = [[m["block"], m["n_blocks"]] for m in v.data["models"]]
    out = Path(tempfile.mkdtemp()) / "view.html"
    v.save(out)
    record["page"] = str(out)
    record["page_mb"] = out.stat().st_size / 1e6
    print(f"built in {record['build_s']:.0f} s, page {record['page_mb']:.1f} MB", flush=True)
    return v, out


def _ready_page(browser, url: str):
    """A new page at ``url`` once the viewer has drawn its grid."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_function("window.viewer && window.viewer.ready > 0", timeout=120_000)
    return page


def _paints(browser, out: Path, repeats: int) -> list[dict]:
    """Per repeat, a fresh page's first contentful paint and the moment its grid is drawn."""
    paints = []
    for _ in range(repeats):
        page = _ready_page(browser, out.as_uri())
        fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
        paints.append({"fcp_ms": fcp, "grid_ms": page.evaluate("viewer.ready")})
        page.close()
    return paints


def _file_clicks(browser, out: Path, v, repeats: int, shots: Path | None, found: list) -> None:
    """On the page opened from disk, per model and layer, a click on a head until its curves are drawn and on a
    precomputed block until its rows are shown (the times appended to ``found``); the screenshots, if asked for."""
    page = _ready_page(browser, out.as_uri())
    for i, m in enumerate(v.data["models"]):
        for l in _layers(m["n_layers"], repeats):
            h = l % m["n_heads"]
            page.locator(f"canvas.grid[data-model='{i}']").scroll_into_view_if_needed()
            t = time.perf_counter()
            page.mouse.click(*page.evaluate(f"viewer.cellCentre({i}, {l}, {h})"))
            title = f"layer {l} head {h}"
            page.wait_for_function(f"document.getElementById('head-title').textContent.endsWith('{title}')")
            head_ms = (time.perf_counter() - t) * 1e3
            b = m["precomputed"][-1]
            page.locator("#pooled").scroll_into_view_if_needed()
            t = time.perf_counter()
            page.mouse.click(*page.evaluate(f"viewer.blockCentre({b}, 0)"))
            page.wait_for_selector("#tokens .tok")
            found.append({"model": m["name"], "layer": l, "head": h, "head_ms": head_ms,
                          "block_ms": (time.perf_counter() - t) * 1e3})
    if shots is not None:
        _shots(page, v.data, shots)
    page.close()


def _live_clicks(browser, v, repeats: int, shots: Path | None, found: list) -> None:
    """On the served page, per model and layer, a click on a block the file does not hold until the server's rows
    are shown (the times appended to ``found``); the live tokens' screenshot, if asked for."""
    page = _ready_page(browser, v.url)
    for i, m in enumerate(v.data["models"]):
        free = [b for b in range(m["n_blocks"]) if b not in m["precomputed"]] or list(range(m["n_blocks"]))
        for j, l in enumerate(_layers(m["n_layers"], repeats)):
            h, b = l % m["n_heads"], free[(j + 1) * len(free) // (repeats + 1)]
            page.locator(f"canvas.grid[data-model='{i}']").scroll_into_view_if_needed()
            page.mouse.click(*page.evaluate(f"viewer.cellCentre({i}, {l}, {h})"))
            page.locator("#pooled").scroll_into_view_if_needed()
            t = time.perf_counter()
            page.mouse.click(*page.evaluate(f"viewer.blockCentre({b}, 0)"))
            page.wait_for_selector("#tokens .tok", timeout=600_000)
            found.append({"model": m["name"], "layer": l, "head": h, "block": b,
                          "ms": (time.perf_counter() - t) * 1e3})
            print(found[-1], flush=True)
    if shots is not None:
        page.screenshot()  # settle
        png = page.screenshot()
        _small_png(png, shots / "tokens-live.png")

def synthetic(n_layers: int, n_heads: int, n: int, repeats: int = 3) -> dict:
    """Page size and first paint of a page with a model's shapes and random numbers (no model run): what the page
    costs the browser, apart from the model's time. Rows of 8 blocks, each row its full 48 keys; tokens of 4-6
    characters."""
    import numpy as np

    from poslens.viewer.data import STATS, HeadData, block_rows, default_block
    from poslens.viewer.page import ModelView, payload, spaced_blocks, write

    rng = np.random.default_rng(0)
    block = default_block(n)
    nb = -(-n // block)
    heads = HeadData(n, block, {k: rng.random((n_layers, n_heads)) for k in STATS},
                     {k: rng.random((n_layers, n_heads, nb)) for k in STATS},
                     rng.random((n_layers, n_heads, nb, nb)).astype(np.float32) / block)
    blocks = spaced_blocks(nb, 8)
    rows = {}
    for b in blocks:
        for q in block_rows(n, block, b):
            keys = sorted(set(rng.integers(0, q + 1, 32).tolist()) | set(range(max(0, q - 15), q + 1)))
            for l in range(n_layers):
                for h in range(n_heads):
                    rows[(l, h, q)] = (keys, rng.random(len(keys)).tolist())
    tokens = ["".join(rng.choice(list("abcdefghij "), rng.integers(4, 7))) for _ in range(n)]
    view = ModelView(f"synthetic {n_layers}x{n_heads}", n_layers, n_heads, tokens, heads, rows, blocks)
    out = write(Path(tempfile.mkdtemp()) / "view.html", payload([view]))
    record = {"shape": [n_layers, n_heads, n, block, nb], "page_mb": out.stat().st_size / 1e6, "load": _load()}
    return record | {"grid_ms": _grid_times(out, repeats)}


def _grid_times(page: Path, repeats: int) -> list[float]:
    """Per repeat, a fresh tab's time (ms) until the viewer has drawn its grid."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        paints = []
        for _ in range(repeats):
            tab = _ready_page(browser, page.resolve().as_uri())
            paints.append(tab.evaluate("viewer.ready"))
            tab.close()
        browser.close()
    return paints


def paint(page: Path, repeats: int = 3) -> dict:
    """Size and first paint of a page written by an earlier run (``--paint PAGE``: no model)."""

    data = page_data(page)
    record = {"paint_of": [m["name"] for m in data["models"]], "lengths": [m["length"] for m in data["models"]],
              "blocks": [[m["block"], m["n_blocks"]] for m in data["models"]],
              "page_mb": page.stat().st_size / 1e6, "load": _load()}
    return record | {"grid_ms": _grid_times(page, repeats)}


def _layers(n_layers: int, repeats: int) -> list[int]:
    """Layers to click: the first, the middle and the last (``repeats`` of them, spread)."""
    return sorted({round(i * (n_layers - 1) / max(1, repeats - 1)) for i in range(repeats)})


def _shots(page, data: dict, shots: Path) -> None:
    """The three levels on the last model: the grid (first-token mass), a sink head's pooled pattern, a block's tokens
    with a hover."""
    import numpy as np

    shots.mkdir(parents=True, exist_ok=True)
    i = len(data["models"]) - 1
    m = data["models"][i]
    page.select_option("#stat", "first")
    page.evaluate("window.scrollTo(0, 0)")
    _small_png(page.screenshot(), shots / "grid.png")
    prev = np.array(m["grid"]["previous"], dtype=float)
    l, h = np.unravel_index(np.nanargmax(prev), prev.shape)  # the strongest previous-token head
    page.locator(f"canvas.grid[data-model='{i}']").scroll_into_view_if_needed()
    page.mouse.click(*page.evaluate(f"viewer.cellCentre({i}, {int(l)}, {int(h)})"))
    page.locator("#head").scroll_into_view_if_needed()
    _small_png(page.screenshot(), shots / "head.png")
    b = m["precomputed"][len(m["precomputed"]) // 2]
    page.locator("#pooled").scroll_into_view_if_needed()
    page.mouse.click(*page.evaluate(f"viewer.blockCentre({b}, 0)"))
    page.wait_for_selector("#tokens .tok")
    page.locator("#tokens-panel").scroll_into_view_if_needed()
    page.locator("#tokens .qrow").nth(1).locator(".tok").nth(2).hover()
    _small_png(page.screenshot(), shots / "tokens.png")


def page_data(path: Path) -> dict:
    """The data a written page holds."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index('<script id="poslens-data" type="application/json">') + len(
        '<script id="poslens-data" type="application/json">')
    return json.loads(text[start:text.index("</script>", start)].replace("<\\/", "</"))


def readable(data: dict) -> None:
    """Token strings of pages written before the viewer decoded each id (BPE pieces such as "Ġthe"): each piece back
    to its id through the model's tokenizer (``interp.load_tokenizer``: a transformers tokenizer) and decoded as
    ``poslens.viewer`` now does."""
    from types import SimpleNamespace

    from interp.loading import load_tokenizer
    from poslens.viewer import _token_strings

    for m in data["models"]:
        tok = load_tokenizer(m["name"])
        if not hasattr(tok, "tok"):
            continue
        ids = tok.tok.convert_tokens_to_ids(m["tokens"])
        m["tokens"] = _token_strings(SimpleNamespace(tokenizer=tok), ids)


def readme_shots(pages: list[Path], shots: Path, *, retokenize: bool = False) -> None:
    """The README's three screenshots from written pages (each built by its own run at full context): the grid of
    all their models on one scale (first-token mass), the last model's farthest-reading head (largest far mass) with
    its pooled pattern, and the tokens of its last precomputed block with a hover on a row's heaviest key."""
    import numpy as np
    from playwright.sync_api import sync_playwright

    from poslens.viewer.page import render

    datas = [page_data(p) for p in pages]
    data = dict(datas[0], models=[m for d in datas for m in d["models"]],
                title=", ".join(m["name"] for d in datas for m in d["models"]))
    if retokenize:
        readable(data)
    out = Path(tempfile.mkdtemp()) / "both.html"
    out.write_text(render(data), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(out.as_uri())
        page.wait_for_function("window.viewer && window.viewer.ready > 0", timeout=120_000)
        page.select_option("#stat", "first")
        _small_png(page.screenshot(), shots / "grid.png")
        i = len(data["models"]) - 1
        m = data["models"][i]
        far = np.array(m["grid"]["far"], dtype=float)
        l, h = (int(x) for x in np.unravel_index(np.nanargmax(far), far.shape))
        page.select_option("#stat", "far")
        page.locator(f"canvas.grid[data-model='{i}']").scroll_into_view_if_needed()
        page.mouse.click(*page.evaluate(f"viewer.cellCentre({i}, {l}, {h})"))
        page.locator("#head").scroll_into_view_if_needed()
        _small_png(page.screenshot(), shots / "head.png")
        b = m["precomputed"][-1]
        page.locator("#pooled").scroll_into_view_if_needed()
        page.mouse.click(*page.evaluate(f"viewer.blockCentre({b}, 0)"))
        page.wait_for_selector("#tokens .tok")
        rows = m["rows"][f"{l}|{h}|{b}"]
        r = min(1, len(rows) - 1)
        page.locator("#tokens-panel").scroll_into_view_if_needed()
        page.locator("#tokens .qrow").nth(r).locator(".tok").nth(int(np.argmax(rows[r][2]))).hover()
        _small_png(page.screenshot(), shots / "tokens.png")
        browser.close()


def table(record: dict) -> str:
    import statistics as st

    if "paint_of" in record:  # --paint: a page an earlier run wrote
        return (f"- {', '.join(record['paint_of'])} at {', '.join(f'{n:,}' for n in record['lengths'])} tokens (blocks "
                f"{', '.join(f'{b} x {n}' for b, n in record['blocks'])}), the page its run wrote (`--paint PAGE`): "
                f"{record['page_mb']:.1f} MB, grid drawn {', '.join(f'{x:.0f}' for x in record['grid_ms'])} ms "
                f"(n={len(record['grid_ms'])}), load average {record['load']}")
    if "shape" in record:  # synthetic
        l, h, n, block, nb = record["shape"]
        return (f"- synthetic page of Gemma 3's shapes ({l} layers x {h} heads, {n:,} tokens, {nb} x {nb} blocks of "
                f"{block}; random numbers, no model run; `--synthetic {l},{h},{n}`): {record['page_mb']:.1f} MB, grid "
                f"drawn {', '.join(f'{x:.0f}' for x in record['grid_ms'])} ms (n={len(record['grid_ms'])}), load "
                f"average {record['load']}")

    def med(xs):
        return f"{st.median(xs):.0f}" if xs else "-"

    lines = [f"- models {', '.join(record['models'])} at {', '.join(f'{n:,}' for n in record['lengths'])} tokens "
             f"(blocks {', '.join(f'{b} x {n}' for b, n in record['blocks'])}); load average {record['load_start']} at "
             f"the start, {record['load_end']} at the end; {record['torch_threads']} torch thread(s)",
             f"- page: {record['page_mb']:.1f} MB; built in {record['build_s']:.0f} s ("
             + ", ".join(f"{k} {v:.0f}" for k, v in record["timings"].items()) + ")",
             f"- first paint (n={len(record['paint'])}): first-contentful-paint median "
             f"{med([p['fcp_ms'] for p in record['paint'] if p['fcp_ms']])} ms, grid drawn median "
             f"{med([p['grid_ms'] for p in record['paint']])} ms (each: "
             + ", ".join(f"{p['grid_ms']:.0f}" for p in record["paint"]) + ")"]
    for name in dict.fromkeys(r["model"] for r in record["file"]):
        f = [r for r in record["file"] if r["model"] == name]
        live = [r for r in record["live"] if r["model"] == name]
        lines.append(f"- {name}: head click to pooled pattern median {med([r['head_ms'] for r in f])} ms (n={len(f)}); "
                     f"precomputed block to tokens median {med([r['block_ms'] for r in f])} ms (n={len(f)}); live "
                     f"block to tokens " + ", ".join(f"layer {r['layer']}: {r['ms'] / 1e3:.1f} s" for r in live)
                     + f" (n={len(live)})")
    return "\n".join(lines)


INTRO = """Written by `python -m bench.viewer --write RUN.json ...` from the runs of `python -m bench.viewer --model M
--json RUN.json` (module docstring: what each number times). Headless Debian Chromium through Playwright on this
machine, one torch thread, the machine shared with other work (its load average is given with each run). The issue's
targets, Gemma 3 at 32,768 tokens: page under 20 MB, first paint under 3 s, a live drill-down under 2 s once the
model is loaded. A live drill-down is one pass of the model over the tokens up to the block's last row, stopped after
the head's layer (``poslens.viewer.data.pattern_rows``), so its time grows with both: an early block of layer 0 is a
short pass, a late block of the last layer nearly a whole forward. The torch process got about a fifth of a core
under these loads (its wall time, not its CPU time, is what is given). These live lines were measured before the
server's recording pass (``poslens.viewer.data.Recorded``); the next section times both paths."""


def section(records: list[dict]) -> str:
    return INTRO + "\n\n" + "\n".join(table(r) for r in records)


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shots", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--readme-shots", type=Path, nargs="+", default=None, metavar="PAGE",
                    help="the README's screenshots of these written pages' models to --shots (no measuring)")
    ap.add_argument("--retokenize", action="store_true", help="with --readme-shots: decode BPE pieces (old pages)")
    ap.add_argument("--paint", type=Path, default=None, metavar="PAGE",
                    help="size and first paint of a page an earlier run wrote (no model)")
    ap.add_argument("--synthetic", default=None, metavar="LAYERS,HEADS,TOKENS",
                    help="page size and first paint of a page of these shapes with random numbers (no model)")
    ap.add_argument("--write", type=Path, nargs="+", default=None,
                    help="write BENCHMARKS.md's section from these runs' JSON (no measuring)")
    args = ap.parse_args(argv)
    if args.write:
        from bench.report import write_section

        text = section([json.loads(p.read_text()) for p in args.write])
        write_section("viewer", "The head viewer: page size, first paint, drill-downs (headless Chromium)", text)
        return text
    if args.paint:
        record = paint(args.paint, args.repeats)
        if args.json is not None:
            args.json.write_text(json.dumps(record, indent=2))
        print(table(record))
        return table(record)
    if args.synthetic:
        record = synthetic(*(int(x) for x in args.synthetic.split(",")), repeats=args.repeats)
        if args.json is not None:
            args.json.write_text(json.dumps(record, indent=2))
        print(json.dumps(record))
        return json.dumps(record)
    if args.readme_shots:
        readme_shots(args.readme_shots, args.shots or Path("."), retokenize=args.retokenize)
        return ""
    if not args.model:
        ap.error("--model, --readme-shots or --write")
    os.environ.setdefault("POSLENS_PROGRESS", "0")
    record = measure(args.model, args.repeats, args.shots)
    record["page"] = str(record.get("page", ""))
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=2))
    text = table(record)
    print(text)
    return text


if __name__ == "__main__":
    main()
