"""The viewer in a real browser (Playwright driving Debian's Chromium): the page loads without console errors, picking a
statistic recolours the grid, clicking a head draws its pooled pattern, clicking a block shows its rows' tokens, a
hover shows a token's weight; each state's screenshot is read back and its pixels checked against the data. Skipped
only where no Chromium is installed (``.ci/run`` installs Debian's). ``POSLENS_VIEWER_SHOTS=DIR`` keeps the
screenshots there."""

import io
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from poslens.viewer import view
from poslens.viewer.page import row_bytes
from tests.repo_helpers import tiny_repo

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install chromium)")

VIRIDIS = [(68, 1, 84), (71, 44, 122), (59, 81, 139), (44, 113, 142), (33, 144, 141), (39, 173, 129), (92, 200, 99),
           (170, 220, 50), (253, 231, 37)]


def viridis(t: float) -> np.ndarray:
    """viewer.js's colour of ``t`` in 0..1."""
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(len(VIRIDIS) - 2, int(math.floor(t)))
    f = t - i
    a, b = np.array(VIRIDIS[i]), np.array(VIRIDIS[i + 1])
    return np.round(a + f * (b - a))


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    """One page with its console errors collected and screenshots read back as pixels."""

    def __init__(self, browser, url, shots: Path, size=(1280, 1000)):
        self.errors = []
        self.page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.page.wait_for_function("window.viewer && window.viewer.ready > 0")
        self.shots = shots

    def shot(self, name: str) -> np.ndarray:
        from PIL import Image

        png = self.page.screenshot()
        (self.shots / f"{name}.png").write_bytes(png)
        if os.environ.get("POSLENS_VIEWER_SHOTS"):
            Path(os.environ["POSLENS_VIEWER_SHOTS"]).mkdir(parents=True, exist_ok=True)
            (Path(os.environ["POSLENS_VIEWER_SHOTS"]) / f"{name}.png").write_bytes(png)
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)

    def at(self, pixels: np.ndarray, xy) -> np.ndarray:
        x, y = xy
        return pixels[int(y), int(x)]

    def in_view(self, selector: str) -> bool:
        """The element's top is inside the viewport, below the sticky breadcrumb: seen without scrolling."""
        box = self.page.locator(selector).first.bounding_box()
        return box is not None and 40 <= box["y"] < self.page.viewport_size["height"] - 20

    def cell(self, i, l, h):
        self.page.locator(f"canvas.grid[data-model='{i}']").scroll_into_view_if_needed()
        return self.page.evaluate(f"viewer.cellCentre({i}, {l}, {h})")

    def block(self, b, k):
        self.page.locator("#pooled").scroll_into_view_if_needed()
        return self.page.evaluate(f"viewer.blockCentre({b}, {k})")


def _models():
    a, b = tiny_repo("rope"), tiny_repo("rope", seed=1)
    b.model_name = "tiny-rope-b"
    return [a, b]


def _grid(data, i, stat):
    return np.array(data["models"][i]["grid"][stat], dtype=float)


def _page(browser, tmp_path, v, size=(1280, 1000), fragment=""):
    return Page(browser, v.save(tmp_path / "view.html").as_uri() + fragment, tmp_path, size)


def _view(page_mb=None):
    ids = torch.randint(1, 250, (200,), generator=torch.Generator().manual_seed(4)).tolist()
    return view(_models(), text=ids, block=16, page_mb=page_mb)


def test_grid_head_block_and_token_levels_in_chromium(browser, tmp_path):
    v = _view()
    data = v.data
    p = _page(browser, tmp_path, v)

    # level 1: the grid, on one scale for both models; picking a statistic recolours it; its bar spans the data
    first = p.shot("1-grid")
    assert "Click a cell to open that head" in p.page.locator("#grid-hint").text_content()
    assert "marked" not in p.page.locator("header").text_content()
    cells = [(i, l, h) for i in range(2) for l in range(3) for h in range(4)]
    before = [p.at(first, p.cell(*c)) for c in cells]
    p.page.select_option("#stat", "entropy")
    after_shot = p.shot("1-grid-entropy")
    after = [p.at(after_shot, p.cell(*c)) for c in cells]
    assert sum(int(np.abs(a - b).max() > 10) for a, b in zip(before, after)) >= len(cells) // 2
    values = np.concatenate([_grid(data, 0, "entropy").ravel(), _grid(data, 1, "entropy").ravel()])
    lo, hi = values.min(), values.max()
    for c, seen, value in zip(cells, after, values):
        assert np.abs(seen - viridis((value - lo) / (hi - lo))).max() <= 3, (c, seen, value)
    bar = p.page.locator("#grid-bar")
    assert [float(bar.get_attribute("data-lo")), float(bar.get_attribute("data-hi"))] == [lo, hi]
    assert "entropy (nats)" in bar.text_content()
    assert "entropy of the pattern row (nats)" in p.page.locator("#stat-about").text_content()
    assert p.page.locator("#stat option[value=far]").is_disabled()  # 0 for every head at 200 tokens
    assert "s=entropy" in p.page.url

    # level 2: one head's pooled pattern, each block's colour the log of a row's mass on the key block
    m = data["models"][0]
    nb = m["n_blocks"]
    assert nb == 13
    p.page.mouse.click(*p.cell(0, 2, 1))
    p.page.wait_for_selector("#head:not([hidden])")
    assert p.page.locator("#head-title").text_content() == "tiny-rope layer 2 head 1"
    pooled = np.frombuffer(__import__("base64").b64decode(m["pooled"]), dtype="<f4").reshape(3, 4, nb, nb)
    p.block(0, 0)
    shot = p.shot("2-head")
    sizes = np.bincount(np.arange(200) // 16)
    for b, k in [(12, 0), (12, 12), (6, 3), (9, 8), (1, 0)]:
        mass = float(pooled[2, 1, b, k]) * sizes[k]
        assert np.abs(p.at(shot, p.block(b, k)) - viridis((math.log10(mass) + 4) / 4)).max() <= 3, (b, k)
    assert (p.at(shot, p.block(2, 9)) == 255).all()  # above the diagonal: 0, left white
    x, y = p.cell(0, 2, 1)
    outline = p.at(p.shot("2-head-grid"), (x - data["cell"] / 2 - 1.5, y))
    assert outline[0] > 200 and outline[1] < 40  # the picked head, outlined in red
    assert "13 x 13 blocks of 16 tokens" in p.page.locator("#pooled-note").text_content()
    assert "log scale" in p.page.locator("#pooled-bar").text_content()

    # level 3: a block's rows (every row: they fit in the page), their tokens, a hover giving a token's weight
    assert m["precomputed"] == list(range(13))
    p.page.mouse.click(*p.block(6, 2))
    p.page.wait_for_selector("#tokens .tok")
    rows = m["rows"]["2|1|6"]
    assert p.page.locator("#tokens .qrow").count() == len(rows) == 16
    assert p.page.locator("#tokens .tok").count() == sum(len(k) for _, k, _ in rows)
    q, keys, ws = rows[1]
    heavy = int(np.argmax(ws))
    token = p.page.locator("#tokens .qrow").nth(1).locator(".tok").nth(heavy)
    token.hover()
    tip = p.page.locator("#tip")
    assert tip.is_visible()
    text = tip.text_content()
    assert text.startswith(f"weight {ws[heavy]:.4f} | key {keys[heavy]} ") and text.endswith(f"| query {q}")
    shot = p.shot("3-tokens")
    box = token.bounding_box()
    seen = shot[int(box["y"]):int(box["y"] + box["height"]), int(box["x"]):int(box["x"] + box["width"])]
    reds = (seen[..., 0] > 200) & (seen[..., 1] < 60) & (seen[..., 2] < 90)
    assert reds.mean() > 0.4  # the row's heaviest key: full red behind its glyph
    assert p.page.locator("#tokens .tok.query").count() == 16
    assert "q 96" in p.page.locator("#tokens .qrow").nth(0).text_content()

    # token colouring: absolute weight on one scale for the block, its bar spanning the block's weights
    p.page.select_option("#colouring", "abs")
    p.page.wait_for_function("document.getElementById('tokens-bar').dataset.hi !== '1'")
    top = max(w for _, _, ws_ in rows for w in ws_)
    assert float(p.page.locator("#tokens-bar").get_attribute("data-hi")) == pytest.approx(top, rel=1e-6)
    alpha = p.page.locator("#tokens .qrow").nth(1).locator(".tok").nth(heavy).evaluate(
        "e => getComputedStyle(e).backgroundColor")
    assert alpha.startswith("rgba(228, 0, 43, ")
    assert float(alpha[17:-1]) == pytest.approx(ws[heavy] / top, abs=1 / 255)  # the browser keeps 8 bits of alpha
    assert "c=abs" in p.page.url
    assert p.errors == []


def test_drill_down_to_a_token_and_back_by_mouse_then_by_keyboard(browser, tmp_path):
    """At a laptop's 1280 x 720 each level comes into view as it opens, the breadcrumb names it, and Back, Escape and
    the browser's back return a level at a time."""
    v = _view()
    p = _page(browser, tmp_path, v, size=(1280, 720))
    m = v.data["models"][1]
    crumbs = lambda: p.page.locator("#trail").text_content()  # noqa: E731
    p.page.mouse.click(*p.cell(1, 1, 3))
    p.page.wait_for_selector("#head:not([hidden])")
    assert p.in_view("#pooled") and crumbs() == "head grid>tiny-rope-b layer 1 head 3"
    p.page.mouse.click(*p.page.evaluate("viewer.blockCentre(9, 0)"))
    p.page.wait_for_selector("#tokens .tok")
    assert p.in_view("#tokens .qrow") and crumbs().endswith(">block 9 (rows 144-159)")
    p.shot("drill-3-tokens")
    p.page.locator("#tokens .qrow").nth(3).locator(".tok").nth(2).click()  # that token becomes the query
    k = int(m["rows"]["1|3|9"][3][1][2])
    p.page.wait_for_function(f"viewer.state.q === {k} && viewer.state.block === {k // 16}")  # its block's rows
    assert p.in_view(f"#tokens .qrow.focus[data-q='{k}']") and crumbs().endswith(f">query {k}")
    p.page.click("#back")
    p.page.wait_for_function(f"viewer.state.q === null && viewer.state.block === {k // 16}")
    p.page.go_back()  # the browser's back: the query again
    p.page.wait_for_function(f"viewer.state.q === {k}")
    p.page.go_back()  # ... and block 9's rows before it
    p.page.wait_for_function("viewer.state.q === null && viewer.state.block === 9")
    p.page.keyboard.press("Escape")
    p.page.wait_for_function("viewer.state.block === null")
    assert p.page.locator("#tokens-panel").is_hidden() and p.in_view("#pooled")
    p.page.go_back()  # the browser's back: block 9 again
    p.page.wait_for_function("viewer.state.block === 9")
    p.page.keyboard.press("Escape")
    p.page.keyboard.press("Escape")
    p.page.wait_for_function("viewer.state.model === null")
    assert p.page.locator("#head").is_hidden() and p.page.locator("#back").is_disabled()

    # the keyboard alone: Tab to the first grid, arrows, Enter; Tab to the pattern, down, Enter; rows and tokens
    p.page.locator("#stat").focus()
    p.page.keyboard.press("Tab")
    for key in ("ArrowDown", "ArrowDown", "ArrowRight"):
        p.page.keyboard.press(key)
    assert "tiny-rope layer 2 head 1:" in p.page.locator("#tip").text_content()
    p.page.keyboard.press("Enter")
    p.page.wait_for_function("viewer.state.layer === 2 && viewer.state.head === 1 && viewer.state.model === 0")
    p.page.locator("#pooled").focus()
    for key in ("ArrowDown", "ArrowDown", "Enter"):
        p.page.keyboard.press(key)
    p.page.wait_for_selector("#tokens .qrow")
    assert p.page.evaluate("viewer.state.block") == 2
    p.page.locator("#tokens .qrow").first.focus()
    for key in ("ArrowDown", "Enter"):
        p.page.keyboard.press(key)
    p.page.wait_for_function("viewer.state.q === 33")
    for key in ("ArrowRight", "Enter"):
        p.page.keyboard.press(key)
    first_key = v.data["models"][0]["rows"]["2|1|2"][1][1][0]
    p.page.wait_for_function(f"viewer.state.q === {first_key} && viewer.state.block === {first_key // 16}")
    for _ in range(3):
        p.page.keyboard.press("Escape")
    p.page.wait_for_function("viewer.state.model === null")
    assert p.errors == []


def test_a_reload_restores_the_view_from_the_url(browser, tmp_path):
    v = _view()
    p = _page(browser, tmp_path, v, size=(1400, 900), fragment="#s=distance&m=1&l=2&h=3&b=4&q=70&c=abs")
    want = {"stat": "distance", "model": 1, "layer": 2, "head": 3, "block": 4, "q": 70, "colouring": "abs"}
    for _ in range(2):
        p.page.wait_for_selector("#tokens .qrow.focus")
        assert {k: p.page.evaluate(f"viewer.state.{k}") for k in want} == want
        assert p.page.locator("#stat").input_value() == "distance"
        assert p.page.locator("#head-title").text_content() == "tiny-rope-b layer 2 head 3"
        assert p.page.locator("#tokens .qrow.focus").get_attribute("data-q") == "70" and p.in_view(".qrow.focus")
        p.page.reload()
        p.page.wait_for_function("window.viewer && window.viewer.ready > 0")
    p.page.goto(p.page.url.split("#")[0] + "#m=7&l=1&h=1")  # a fragment naming no model: the grid
    p.page.wait_for_function("viewer.state.model === null")
    assert p.errors == []


def test_steps_back_taken_faster_than_the_url_changes_all_count(browser, tmp_path):
    """Three Escapes within one task (the full suite's load once let a test's quick presses run ahead of the
    browser's hashchange): each goes one level up, and the browser's back returns one step."""
    p = _page(browser, tmp_path, _view(), size=(1400, 900), fragment="#s=distance&m=1&l=2&h=3&b=4&q=70&c=abs")
    p.page.wait_for_selector("#tokens .qrow.focus")
    p.page.evaluate("for (let i = 0; i < 3; i++) document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    assert p.page.evaluate("[viewer.state.model, viewer.state.block, viewer.state.q]") == [None, None, None]
    p.page.wait_for_function("location.hash.indexOf('m=') < 0")
    assert p.page.locator("#head").is_hidden()
    p.page.go_back()
    p.page.wait_for_function("viewer.state.model === 1 && viewer.state.block === null")
    assert p.page.locator("#head-title").text_content() == "tiny-rope-b layer 2 head 3"
    assert p.errors == []


def test_every_block_of_a_saved_page_answers_a_click(browser, tmp_path):
    """With a budget too small for every row, each block still holds rows (a few per block) and answers; with less,
    the blocks without rows say so on the block itself, with the budget that holds every block's."""
    v = _view(page_mb=0.5)
    p = _page(browser, tmp_path, v, size=(1400, 900))
    m = v.data["models"][0]
    assert m["precomputed"] == list(range(13)) and len(m["rows"]["0|0|5"]) < 16
    p.page.mouse.click(*p.cell(0, 0, 0))
    p.page.wait_for_selector("#head:not([hidden])")
    for b in range(13):
        p.page.mouse.click(*p.block(b, 0))
        p.page.wait_for_function(f"viewer.state.block === {b} && document.querySelector('#tokens .qrow')")
        assert p.page.locator("#tokens .qrow").count() == len(m["rows"][f"0|0|{b}"])
    fewest = min(len(m["rows"][f"0|0|{b}"]) for b in range(13))
    assert f"every block's rows are in this file (at least {fewest} query rows of each; --serve computes all)" in (
        p.page.locator("#mode").text_content())

    base = len(view(_models(), text=list(range(1, 201)), block=16, page_mb=0).html.encode("utf-8"))
    few = _view(page_mb=(base + 2 * 3 * 4 * 12 * row_bytes(200)) / 1e6)
    held = few.data["models"][0]["precomputed"]
    assert held == [0, 6, 12]
    p = _page(browser, tmp_path, few, size=(1400, 900))
    p.page.mouse.click(*p.cell(0, 0, 0))
    p.page.wait_for_selector("#head:not([hidden])")
    shot = p.shot("held-strip")
    strip = [p.at(shot, (p.block(b, 12)[0] + 384 / 13 / 2 + 9, p.block(b, 12)[1])) for b in range(13)]
    assert [b for b, c in enumerate(strip) if tuple(c) == (26, 152, 80)] == held  # green: rows in the file
    p.page.mouse.click(*p.block(4, 0))
    p.page.wait_for_function("document.getElementById('tokens').textContent.includes('holds no rows of block 4')")
    said = p.page.locator("#tokens").text_content()
    assert f"--page-mb {few.data['budget']['needs_mb']}" in said and "--serve" in said and "3 of 13 blocks" in said
    assert p.errors == []


def test_live_drill_down_computes_any_block(browser, tmp_path):
    model = _models()[0]
    ids = torch.randint(1, 250, (160,), generator=torch.Generator().manual_seed(5)).tolist()
    v = view(model, text=ids, block=16, page_mb=0, serve=True, port=0)
    try:
        p = Page(browser, v.url, tmp_path)
        assert "live" in p.page.locator("#mode").text_content()
        p.page.mouse.click(*p.cell(0, 1, 3))
        p.page.wait_for_selector("#head:not([hidden])")
        p.page.mouse.click(*p.block(7, 1))
        p.page.wait_for_selector("#tokens .tok")
        p.shot("3-live-tokens")
        got = p.page.evaluate("viewer.data.models[0].rows['1|3|7']")
        _, cache = model.run_with_cache(torch.tensor([ids]))
        a = cache["blocks.1.attn.hook_pattern"][0].double()
        assert [q for q, _, _ in got] == [112, 117, 122, 127]
        for q, keys, ws in got:
            np.testing.assert_allclose(ws, a[3, q, keys].numpy(), atol=1e-6)
        assert p.page.locator("#tokens .qrow").count() == 4
        assert p.errors == []
    finally:
        v.stop()


def test_a_block_without_rows_is_a_gap_in_the_curves(browser, tmp_path):
    """Blocks of one token: block 0 holds row 0 alone, which the curves leave out, so it is a gap (null) and the note
    reads from the first block with a row; the line starts at block 1."""
    model = _models()[0]
    ids = torch.randint(1, 250, (24,), generator=torch.Generator().manual_seed(6)).tolist()
    v = view(model, text=ids, block=1, page_mb=5)
    p = Page(browser, v.save(tmp_path / "view.html").as_uri(), tmp_path)
    p.page.mouse.click(*p.cell(0, 1, 2))
    p.page.wait_for_selector("#head:not([hidden])")
    p.page.locator("#curve").scroll_into_view_if_needed()
    shot = p.shot("curve-gap")
    e = v.data["models"][0]["curves"]["entropy"][1][2]
    assert e[0] is None
    note = p.page.locator("#curve-note").text_content()
    assert f"Entropy {e[1]:.4f} ->" in note and "n/a" not in note
    box = p.page.locator("#curve").bounding_box()  # 460 x 240, drawn 1:1; plot from x = 40 to 452, y = 8 to 216
    x0, y0 = int(box["x"]), int(box["y"])
    plot = shot[y0 + 24:y0 + 214, x0 + 41:x0 + 451]  # below the legend's coloured labels
    coloured = (plot.max(-1) - plot.min(-1) > 60).any(0)  # columns holding a curve's colour
    assert coloured.any()
    step = 412 / 24  # one block of one token
    assert int(np.argmax(coloured)) >= 1.5 * step - 2  # nothing left of block 1's centre: block 0 is a gap
    assert p.errors == []
