import pandas as pd
import pytest

from analyses.byte_increments import byte_increments
from analyses.char_spacing import char_spacing
from analyses.entity_spacing import entity_spacing
from analyses.loss_neutrality import loss_neutrality
from analyses.word_boundaries import word_boundaries
from figures import byte_increments as f_bytes
from figures import char_spacing as f_chars
from figures import entity_spacing as f_entity
from figures import loss_neutrality as f_loss
from figures import save, shared_plotlyjs
from figures import word_boundaries as f_words
from tests.helpers import tiny_model


@pytest.fixture(scope="module")
def models():
    return [tiny_model("shared", max_seq_len=512), tiny_model("per-layer", max_seq_len=512)]


def test_word_boundary_figure_has_one_trace_per_model_and_reference_with_the_table_values(models):
    df = pd.concat([word_boundaries(m, n_docs=3, max_gaps=500, n_boot=20) for m in models])
    fig = f_words.figure(df)
    assert len(fig.data) == 4
    per_layer_gold = next(t for t in fig.data if t.name == "tiny-per-layer vs gold")
    expected = df[(df.model == "tiny-per-layer") & (df.reference == "gold") & (df.layer != "jieba")]
    assert list(per_layer_gold.x) == ["L0", "L1"] and list(per_layer_gold.y) == list(expected["auc"])


def test_entity_and_char_and_byte_figures_show_every_model(models, tmp_path):
    ent = pd.concat([entity_spacing(m, real=(("New", "York"), ("Hong", "Kong")), invented=()) for m in models])
    assert len(f_entity.figure(ent).data) == 4  # real + reversed bars per model panel
    chars = pd.concat([char_spacing(m, documents={"en": "a b."}) for m in models])
    fig = f_chars.figure(chars)
    text_traces = [t for t in fig.data if t.mode == "text"]
    # the shared model's one row is placed alike on both scales: one panel; the per-layer model's scales differ: two
    assert len(text_traces) == 3 and all("".join(t.text) in ("a b.a b.", "a b.") for t in text_traces)
    titles = [a.text for a in fig.layout.annotations]
    assert sum("alike" in t for t in titles) == 1 \
        and sum("scale)" in t and "alike" not in t for t in titles) == 2, titles
    table = pd.concat([byte_increments(m) for m in models])
    assert len(f_bytes.figure(table).data) == 3  # two range traces and the table
    paths = save(f_bytes.figure(table), tmp_path / "alone" / "bytes", "html")
    assert [p.name for p in paths] == ["bytes.html"] and not (tmp_path / "alone" / "plotly.min.js").exists()
    page = paths[0].read_text(encoding="utf-8")
    assert 'src="plotly.min.js"' not in page and "Plotly.newPlot" in page and len(page) > 3_000_000  # plotly.js inline
    with shared_plotlyjs():
        for stem in ("a", "b"):
            save(f_bytes.figure(table), tmp_path / "report" / stem, "html")
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["a.html", "b.html", "plotly.min.js"]
    assert all('src="plotly.min.js"' in (tmp_path / "report" / f).read_text() for f in ("a.html", "b.html"))


def test_loss_figure(models):
    df = pd.concat([loss_neutrality(m, n_docs=2, length=32, n_boot=10) for m in models])
    fig = f_loss.figure(df)
    assert [t.name for t in fig.data] == ["tiny-shared", "tiny-per-layer"]


def test_static_export_where_a_chrome_is_found(tmp_path):
    import plotly.graph_objects as go

    from figures import find_browser

    if find_browser() is None:
        pytest.skip("no Chrome or Chromium on this machine: HTML only")
    paths = save(go.Figure(go.Bar(x=["人", "b"], y=[1, 2])), tmp_path / "f", "html,pdf,png")
    assert [p.suffix for p in paths] == [".html", ".pdf", ".png"]
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "f.pdf").read_bytes()[:5] == b"%PDF-"


def test_loss_figure_plots_the_table_numbers(models):
    df = pd.concat([loss_neutrality(m, n_docs=2, length=32, n_boot=10) for m in models])
    fig = f_loss.figure(df)
    for model, g in df.groupby("model"):
        trace = next(t for t in fig.data if t.name == model)
        assert list(trace.x) == list(g["language"])
        assert list(trace.y) == pytest.approx(list(g["loss"]), rel=0, abs=0)
        assert list(trace.error_y.array) == pytest.approx(list(g["ci_high"] - g["loss"]))
        assert list(trace.error_y.arrayminus) == pytest.approx(list(g["loss"] - g["ci_low"]))


def test_entity_figure_bars_are_the_table_means_per_layer(models):
    ent = pd.concat([entity_spacing(m, real=(("New", "York"), ("Hong", "Kong")), invented=()) for m in models])
    fig = f_entity.figure(ent)
    panels = list(ent.groupby(["model", "set"], sort=False))
    assert len(fig.data) == 2 * len(panels)
    for i, ((model, _), g) in enumerate(panels):
        real, reversed_ = fig.data[2 * i], fig.data[2 * i + 1]
        layers = [label.split("<br>")[0] for label in real.x]
        g = g.set_index("layer").loc[layers]
        assert sorted(layers) == sorted(ent[ent.model == model]["layer"])
        assert list(real.y) == pytest.approx(list(g["mean_real"]), rel=0, abs=0)
        assert list(reversed_.y) == pytest.approx(list(g["mean_reversed"]), rel=0, abs=0)
        assert real.name == "real order" and reversed_.name == "reversed"
