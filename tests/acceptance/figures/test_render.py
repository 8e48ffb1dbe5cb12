"""Figures rebuilt from saved results equal the analysis-time figures; static export renders for real.

Every registered analysis runs once (its small run, or a case in ``_cases``) through ``run_analysis``; the figure it
made is captured and compared with ``render(name, read_table(csv))``. Where a Chrome/Chromium is found, every figure is
then written as PDF, SVG and PNG at a column's width through one browser and the files are checked.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import figures
from analyses import all_analyses
from analyses.char_spacing import DEFAULT_TEXTS
from figures.render import figure_module, known, read_result, read_table, render, rerender
from figures.style import MODEL_COLORS, PALETTE, PAPER, model_colors
from poslens.cli import main
from poslens.run.execute import run_analysis
from tests.helpers import tiny_model

ROOT = Path(__file__).resolve().parents[3]
BROWSER = figures.find_browser()
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chrome/Chromium for kaleido (install `chromium` or run "
                                   "`plotly_get_chrome`): static export not tested")


def _cases():
    """The few analyses drawn here from other inputs than their own small run (``@analysis(small=...)``), each for what
    it stresses in a figure that the small run does not:

    - loss-neutrality and word-boundaries on the same two models, built here under names no palette fixes: one
      colour per model across figures (the colour is hashed from the name), and two models' bars;
    - char-spacing on the user's own sentences, one of them ending in a token "NA" that must be read back from the
      CSV as text: their characters' spacing sizes the font of the paper figure;
    - niah-accuracy at two lengths and on two models: a line per model across lengths, not a lone point.

    Every other analysis is drawn from its small run, so a new analysis needs no line here."""
    inc = [tiny_model("shared", max_seq_len=512), tiny_model("per-layer", max_seq_len=512)]
    return {
        "loss-neutrality": (inc, dict(n_docs=2, length=32, n_boot=10)),
        "word-boundaries": (inc, dict(n_docs=3, max_gaps=400, n_boot=10)),
        "char-spacing": (inc, dict(documents={"english": DEFAULT_TEXTS["english"] + " NA",
                                              "chinese": DEFAULT_TEXTS["chinese"]})),
        "niah-accuracy": (["repo-small", "rope-small"], dict(lengths=(300, 400), n_docs=1)),
    }


def _plan():
    """Every registered analysis: its small run (``@analysis(small=...)``), or its case here where it has one."""
    cases = _cases()
    return {a.name: cases.get(a.name, (list(a.small.models), dict(a.small.options))) for a in all_analyses()
            if a.small is not None or a.name in cases}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """``{name: (csv path, the figure made at analysis time)}`` for every registered analysis."""
    out = tmp_path_factory.mktemp("results")
    made = {}
    real_save = figures.save

    def capture(fig, stem, formats=None, **kw):
        made[Path(stem).name] = fig
        return real_save(fig, stem, formats, **kw)

    figures.save = capture
    try:
        for name, (models, options) in _plan().items():
            run_analysis(name, models, out, options=options, seed=1, formats="html")
    finally:
        figures.save = real_save
    return {name: (out / f"{name}.csv", fig) for name, fig in made.items()}


def test_every_analysis_has_a_figure_named_after_it():
    names = {a.name for a in all_analyses()}
    assert set(known()) == names
    assert all(a.figure is figure_module(a.name).figure for a in all_analyses())


def test_plan_covers_every_registered_analysis(results):
    assert set(results) == {a.name for a in all_analyses()}


def _decoded(x):
    """plotly's typed arrays (``{"dtype", "bdata"}``) as numbers; the dtype itself is not compared."""
    if isinstance(x, dict) and "bdata" in x and "dtype" in x:
        import base64

        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"])).astype(float).tolist()
    return x


def _close(a, b, path="fig") -> list[str]:
    """Paths where two figure JSON trees differ (floats to 1e-12 relative)."""
    a, b = _decoded(a), _decoded(b)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in _close(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, (list, tuple, np.ndarray)) and isinstance(b, (list, tuple, np.ndarray)):
        a, b = list(a), list(b)
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f"{path}[{i}]")]
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(float(a)) and math.isnan(float(b)):
            return []
        return [] if math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-15) else [f"{path}: {a} != {b}"]
    return ([] if a == b and type(a) is type(b) or (a == b and {type(a), type(b)} <= {str, np.str_})
            else [f"{path}: {a!r} != {b!r}"])


@pytest.mark.parametrize("name", sorted(a.name for a in all_analyses()))
def test_figure_from_the_csv_equals_the_figure_made_at_analysis_time(results, name):
    csv, made = results[name]
    name_read, df, prov = read_result(csv)
    assert name_read == name and prov["analysis"] == name
    rebuilt = render(name, df)
    differences = _close(made.to_plotly_json(), rebuilt.to_plotly_json())
    assert not differences, differences[:5]
    assert len(made.data) > 0


def test_the_comparison_would_see_a_changed_value(results):
    csv, made = results["loss-neutrality"]
    df = read_table(csv)
    df.loc[0, "loss"] += 1e-9
    assert _close(made.to_plotly_json(), render("loss-neutrality", df).to_plotly_json())


def test_paper_template_drops_the_title_and_keeps_one_colour_per_model(results):
    csv, made = results["loss-neutrality"]
    df = read_table(csv)
    paper = render("loss-neutrality", df, template="paper", width="3.3in")
    assert made.layout.title.text and paper.layout.title.text is None
    assert paper.layout.template.layout.font.family == pio_template().layout.font.family
    assert paper.layout.width == pytest.approx(3.3 * 96) and paper.layout.height > 0.4 * paper.layout.width
    assert render("loss-neutrality", df, template="paper", title="Loss").layout.title.text == "Loss"
    colors = {t.name: t.marker.color for t in paper.data}
    words = render("word-boundaries", read_table(results["word-boundaries"][0]), template="paper")
    for t in words.data:
        model = t.name.split(" vs ")[0]
        assert t.line.color == colors[model]  # the same model, the same colour, in another figure
    assert len(set(colors.values())) == len(colors)


def pio_template():
    import plotly.io as pio

    return pio.templates[PAPER]


def test_model_colours_are_fixed_for_bundled_models_and_distinct_within_a_figure():
    reproduce_groups = [("increments-shared", "increments-per-layer", "rope-bytes"),
                        ("repo-small", "rope-small", "nope-small", "increments-per-layer", "smollm2"),
                        ("dstg-small", "ap-encoder-small", "rp-encoder-small", "rope-encoder-small", "minilm",
                         "repo-small", "increments-per-layer")]
    for group in reproduce_groups:
        colors = model_colors(group)
        assert len(set(colors.values())) == len(group) and all(colors[m] == MODEL_COLORS[m] for m in group)
    mine = model_colors(["my-a", "my-b", "my-c", "dstg-small"])
    assert mine == model_colors(["my-a", "my-b", "my-c", "dstg-small"]) and len(set(mine.values())) == 4
    assert set(mine.values()) <= set(PALETTE)


def test_kl_groups_match_the_analysis():
    from analyses.kl_ablation import GROUPS
    from figures.kl_ablation import GROUPS as FIGURE_GROUPS

    assert FIGURE_GROUPS == GROUPS


def test_rerendering_imports_no_torch(results, tmp_path):
    csv = results["loss-neutrality"][0]
    code = ("import sys; from figures.render import read_result, render; n, df, _ = read_result(sys.argv[1]); "
            "fig = render(n, df, template='paper', width='7in'); import poslens.cli; "
            "assert poslens.cli.main(['figure', sys.argv[1], '--format', 'html', '--out', sys.argv[2]]) == 0; "
            "print(len(fig.data), 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(csv), str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].split() == ["2", "False"]  # two models' bars
    assert (tmp_path / "loss-neutrality.html").is_file()


def test_bad_figure_requests_are_one_line_errors(results, tmp_path, capsys):
    csv = results["byte-increments"][0]
    for args, message in ((["--width", "wide"], "--width 'wide': expected a length"),
                          (["--format", "pdf,eps"], "--format eps: expected any of html,pdf,svg,png"),
                          (["--width=-3in"], "not a positive length")):
        assert main(["figure", str(csv), "--out", str(tmp_path)] + args) == 2
        assert message in capsys.readouterr().err
    (tmp_path / "stray.csv").write_text("model,x\na,1\n")
    assert main(["figure", str(tmp_path / "stray.csv"), "--format", "html"]) == 2
    assert "pass --analysis NAME" in capsys.readouterr().err
    assert main(["figure", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv: no such file" in capsys.readouterr().err
    assert not list(tmp_path.glob("byte-increments*"))


def test_existing_figures_are_not_overwritten_without_force(results, tmp_path, capsys):
    csv = results["niah-accuracy"][0]
    target = tmp_path / "niah-accuracy-paper.html"
    target.write_text("mine")
    args = ["figure", str(csv), "--format", "html", "--template", "paper", "--out", str(tmp_path)]
    assert main(args) == 2 and "already exist" in capsys.readouterr().err
    assert target.read_text() == "mine"
    assert main(args + ["--force"]) == 0 and "plotly" in target.read_text()


def test_static_format_without_a_browser_fails_before_the_analysis(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chrome"))
    loaded = []
    monkeypatch.setattr("poslens.run.execute.resolve_models", lambda *a, **k: loaded.append(a))
    rc = main(["analyze", "byte-increments", "--model", "increments-per-layer", "--out", str(tmp_path / "o"),
               "--format", "html,svg"])
    err = capsys.readouterr().err
    assert (rc == 2 and "--format svg needs a browser" in err and "plotly_get_chrome" in err
            and "apt-get install chromium" in err)
    assert not loaded and not (tmp_path / "o").exists()
    monkeypatch.setattr(sys.modules["figures.save"], "_noted", False)
    monkeypatch.delenv("POSLENS_FORMATS", raising=False)
    assert figures.resolve_formats(None) == ("html",)
    assert "HTML only, no PDF/PNG" in capsys.readouterr().err
    assert figures.resolve_formats(None) == ("html",) and capsys.readouterr().err == ""  # said once


def test_browser_path_overrides_the_search(tmp_path, monkeypatch):
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER_PATH", str(fake))
    monkeypatch.delenv("POSLENS_FORMATS", raising=False)
    assert figures.find_browser() == str(fake)
    assert figures.resolve_formats(None) == ("html", "pdf", "png")  # the default where a browser is found
    monkeypatch.setenv("POSLENS_FORMATS", "svg")
    assert figures.resolve_formats(None) == ("svg",)
    monkeypatch.delenv("BROWSER_PATH")
    from choreographer.browsers.chromium import Chromium

    assert figures.find_browser() == Chromium.find_browser(skip_local=False)


# ---- static export, for real ----------------------------------------------------------------------------

def _pdf_page_width_pt(path: Path) -> float:
    if shutil.which("pdfinfo"):
        out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
        size = next(line for line in out.splitlines() if line.startswith("Page size:"))
        return float(size.split()[2])
    import re

    box = re.search(rb"/MediaBox\s*\[\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", path.read_bytes())
    return float(box.group(3)) - float(box.group(1))


def _check_png(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as im:
        assert abs(im.width - 3.3 * 300) <= 2, im.size  # 300 dpi at 3.3 in
        grey = np.asarray(im.convert("L"))
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert (grey < 200).mean() > 0.005, f"{path.name} is (nearly) blank"
    assert colors is None or len(colors) > 2, f"{path.name} has {len(colors)} colours"


@needs_browser
@pytest.mark.parametrize("template", ["paper"])
def test_every_figure_renders_as_pdf_svg_and_png_at_column_width(results, tmp_path, template):
    for name, (csv, _) in sorted(results.items()):
        written = rerender(csv, formats="pdf,svg,png", width="3.3in", template=template, out=tmp_path)
        assert [p.name for p in written] == [f"{name}-paper-3.3in.{f}" for f in ("pdf", "svg", "png")]
        pdf, svg, png = written
        assert pdf.read_bytes()[:5] == b"%PDF-"
        assert abs(_pdf_page_width_pt(pdf) - 237.6) < 1.0, (name, _pdf_page_width_pt(pdf))  # Chrome snaps to 1/60 in
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg") and float(root.get("width")) == pytest.approx(316.8, abs=1)
        _check_png(png)


@needs_browser
def test_double_column_pdf_and_analyze_format_pdf_svg(results, tmp_path, capsys):
    written = rerender(results["attention-mass"][0], formats="pdf", width="7in", height="4in", out=tmp_path)
    assert written[0].name == "attention-mass-7inx4in.pdf"
    out = (subprocess.run(["pdfinfo", str(written[0])], capture_output=True, text=True).stdout
           if shutil.which("pdfinfo") else "")
    assert abs(_pdf_page_width_pt(written[0]) - 504) < 1.0 and ("x 288 pts" in out or not out)
    ckpt = tmp_path / "m"
    from interp.loading import save

    save(tiny_model("shared", max_seq_len=512), ckpt)
    assert main(["analyze", "byte-increments", "--model", str(ckpt), "--out", str(tmp_path / "o"),
                 "--format", "pdf,svg"]) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "byte-increments.csv", "byte-increments.pdf", "byte-increments.provenance.json", "byte-increments.svg"]
    prov = json.loads((tmp_path / "o" / "byte-increments.provenance.json").read_text())
    assert "byte-increments.svg" in json.dumps(prov)


# ---- no text of a paper figure hides another or leaves the page ------------------------------------------

@needs_browser
def test_every_paper_figure_keeps_its_texts_apart_and_on_the_page(results, tmp_path):
    """At a column's and at the page's width: the SVG's text boxes do not overlap, are not cut by a clip (a table
    cell, the legend, the plot area) and stay on the page."""
    from tests.figure_checks import crowded_data_texts, text_boxes, text_overlaps

    problems = {}
    for name, (csv, _) in sorted(results.items()):
        for width in ("3.3in", "7in"):
            svg = rerender(csv, formats="svg", width=width, template="paper", out=tmp_path)[0]
            found = text_overlaps(svg) + crowded_data_texts(svg)
            height = text_boxes(svg)[1][1]
            if height > 9 * 96 + 0.5:
                found.append(f"{height / 96:.2f} in tall: more than a page (9 in)")
            if found:
                problems[f"{name} at {width}"] = found
    assert not problems, "\n".join(f"{k}: {'; '.join(v[:6])}" + (f" (+{len(v) - 6} more)" if len(v) > 6 else "")
                                    for k, v in problems.items())


@needs_browser
def test_crowding_check_sees_characters_printed_too_large_for_their_spacing(results, tmp_path):
    """Characters at their learned positions drawn at the screen's 16 px in a 3.3 in column sit on each other at
    their typical spacing; the paper layout sizes them to it."""
    from tests.figure_checks import crowded_data_texts

    df = read_table(results["char-spacing"][0])
    fig = render("char-spacing", df, template="paper", width="3.3in")
    for trace in fig.data:
        if trace.mode == "text":
            trace.textfont.size = 16
    svg = figures.save(fig, tmp_path / "squeezed", "svg")[0]
    assert len(crowded_data_texts(svg)) > 10
    assert not crowded_data_texts(rerender(results["char-spacing"][0], formats="svg", width="3.3in", template="paper",
                                           out=tmp_path)[0])


def test_a_height_too_small_for_the_content_is_refused_with_the_least_that_fits(results, tmp_path, capsys):
    csv = results["char-spacing"][0]
    args = ["figure", str(csv), "--template", "paper", "--width", "3.3in", "--format", "html", "--out", str(tmp_path)]
    assert main(args + ["--height", "1in"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--height 1in: too small for the char-spacing figure at 3.30 in wide" in err, err
    least = float(err.split("at least ")[1].split(" in")[0])
    assert least > 1
    assert main(args + ["--height", f"{least + 0.01:.2f}in"]) == 0


def test_text_check_sees_overlap_clipping_and_the_page_edge(tmp_path):
    """The check fails where it should: on a hand-made SVG laid out as plotly writes one."""
    from tests.figure_checks import text_boxes, text_overlaps

    style = 'style="font-family: Arial; font-size: 10px;"'
    svg = tmp_path / "t.svg"
    svg.write_text(f"""<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" viewBox="0 0 200 100">
      <defs><clipPath id="c"><rect x="0" y="0" width="20" height="100"/></clipPath></defs>
      <text x="10" y="20" {style}>first title</text>
      <g transform="translate(30,0)"><text x="0" y="22" {style}>second</text></g>
      <text x="120" y="20" {style}>apart</text>
      <text x="143" y="20" {style}>touching</text>
      <g clip-path="url(#c)"><text x="2" y="60" {style}>a long cell</text></g>
      <text x="190" y="90" {style}>past</text>
      <text transform="rotate(-90,8,50)" x="8" y="50" text-anchor="middle" {style}>rotated title of the y axis</text>
      <text x="60" y="60" {style}><tspan class="line" dy="0em" x="60" y="60">two</tspan><tspan class="line" dy="1.3em" x="60" y="60">lines</tspan></text>
    </svg>""")  # noqa: E501 (a hand-made SVG, kept whole as plotly writes one)
    boxes, page = text_boxes(svg)
    assert page == (200, 100) and {b.text for b in boxes} >= {"two", "lines"}
    found = text_overlaps(svg)
    assert any(f.startswith("overlap: 'first title' and 'second'") for f in found), found
    assert any(f.startswith("clipped: 'a long cell'") for f in found), found
    assert any(f.startswith("off the page: 'past' (right") for f in found), found
    assert any(f.startswith("off the page: 'rotated title of the y axis' (top") for f in found), found
    assert not any("'apart'" in f or "'touching'" in f or "'two'" in f for f in found), found


@needs_browser
def test_text_check_flags_the_screen_layout_squeezed_into_a_column(results, tmp_path):
    """Without the paper layout, figures drawn for a screen put titles past a 3.3 in page and over each other."""
    from tests.figure_checks import text_overlaps

    for name in ("attention-mass", "ap-spectrum"):
        fig = render(name, read_table(results[name][0]), width="3.3in")
        svg = figures.save(fig, tmp_path / name, "svg", width=fig.layout.width, height=fig.layout.height)[0]
        found = text_overlaps(svg)
        assert any(f.startswith("off the page") for f in found), (name, found)


# ---- every value of the table is inside the drawn axes --------------------------------------------------

@needs_browser
@pytest.mark.parametrize("template", ["default", "paper"])
def test_every_figure_draws_every_value_inside_its_axes(results, template):
    from tests.figure_checks import outside_axes

    problems = {name: outside_axes(render(name, read_table(csv), template=template,
                                          width="3.3in" if template == "paper" else None))
                for name, (csv, _) in sorted(results.items())}
    assert not {k: v for k, v in problems.items() if v}


@needs_browser
def test_position_ranges_shows_small_and_large_ranges_together():
    """The case that hid the RePo heads: ranges of 2 to 34 beside RoPE's 511 on one log axis."""
    import pandas as pd

    from tests.figure_checks import outside_axes

    rows = [dict(model=m, layer=1, head=h, mode=mode, context="doc:0", d=d, n_tokens=512)
            for h, (m, mode, d) in enumerate([("repo-small", "repo", 2.3), ("repo-small", "repo", 4.9),
                                              ("repo-small", "repo", 34.0), ("rope-small", "rope", 511.0),
                                              ("rope-small", "rope", 790.0)])]
    assert outside_axes(render("position-ranges", pd.DataFrame(rows))) == []


@needs_browser
def test_figures_on_a_users_documents_show_every_value(tmp_path):
    import interp
    from tests.figure_checks import outside_axes

    docs = ["The committee met on Tuesday to review the budget. " * 12,
            "A short note: the river rose two metres overnight, and the bridge was closed until the water fell. " * 6]
    models = [interp.load("repo-small"), interp.load("rope-small")]
    for name, options in (("position-ranges", dict(length=256)), ("attention-mass", dict(length=256, preamble=False))):
        result = run_analysis(name, models, tmp_path, options={**options, "documents": docs}, seed=0, formats="html")
        assert outside_axes(render(name, result.table)) == [], name


def test_kl_ablation_paper_figure_keeps_titles_apart():
    """The paper layout that hid the AP axis: no subplot title annotation over a ternary's axis titles, no corner
    tick labels sharing a corner, the legend below the ternaries and the heads per group in it."""
    import pandas as pd

    rows = [dict(model=m, layer=0, head=h, group=g, influence_ap=a, influence_sem=b, influence_rp=1 - a - b)
            for m in ("dstg-small", "rp-encoder-small")
            for h, (g, a, b) in enumerate([("AP-oriented", 0.8, 0.1), ("RP-oriented", 0.1, 0.1),
                                           ("RP-oriented", 0.2, 0.1)])]
    fig = render("compare-heads", pd.DataFrame(rows), template="paper", width="3.3in")
    assert not fig.layout.annotations
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    for key in ("ternary", "ternary2"):
        t = fig.layout[key]
        assert all(0 not in ax.tickvals and 1 not in ax.tickvals for ax in (t.aaxis, t.baxis, t.caxis))
        assert fig.layout.legend.yanchor == "top"
        assert (t.domain.y[0] - fig.layout.legend.y) * plot_h >= 30  # px for the sem / RP titles between them
    assert {t.name for t in fig.data if t.showlegend} == {"AP-oriented (1, 1 heads)", "RP-oriented (2, 2 heads)"}


def test_a_static_figure_with_chinese_text_and_no_font_for_it_says_so_once(results, tmp_path, monkeypatch, capsys):
    """Without a CJK font the browser draws char-spacing's Chinese characters as empty boxes: the export says so."""
    saving = sys.modules["figures.save"]  # the module (figures.save is also the function it exports)

    fig = render("char-spacing", read_table(results["char-spacing"][0]))
    assert saving._has_cjk(fig) and not saving._has_cjk(render("loss-neutrality",
                                                               read_table(results["loss-neutrality"][0])))
    monkeypatch.setattr(saving, "_cjk_noted", False)
    monkeypatch.setattr(saving, "cjk_font_available", lambda: False)
    monkeypatch.setattr(saving, "_session", lambda: (_ for _ in ()).throw(RuntimeError("no browser in this test")))
    for _ in range(2):
        with pytest.raises(RuntimeError):
            saving.save(fig, tmp_path / "chars", "png")
    err = capsys.readouterr().err
    assert err.count("no font here draws it") == 1 and "fonts-wqy-microhei" in err
    if shutil.which("fc-list"):  # this machine's answer, whatever it is, is a bool
        assert saving.cjk_font_available() in (True, False)
