"""Every analysis' compact table builds from a real (tiny) result."""

import pytest

import analyses
from corpora.documents import Window
from poslens.run.summary import compact, markdown
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.repo_helpers import tiny_repo


@pytest.fixture(scope="module")
def results():
    repo = tiny_repo("repo")
    enc = tiny_encoder("disentangled")
    docs = [Window("", token_ids(enc, 1, 20, seed=s)[0].tolist()) for s in range(2)]
    return {
        "attention-mass": analyses.run("attention-mass", repo, n_docs=1, length=420),
        "niah-accuracy": analyses.run("niah-accuracy", repo, lengths=(300,), n_docs=1),
        "position-ranges": analyses.run("position-ranges", repo, n_docs=1, length=300),
        "position-patterns": analyses.run("position-patterns", repo, layers=[1], length=256),
        "ap-spectrum": analyses.run("ap-spectrum", enc),
        "kl-ablation": analyses.run("kl-ablation", enc, documents=docs),
    }


def _cells(text):
    lines = text.strip().split("\n")
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return split[0], split[2:]


@pytest.mark.parametrize("name", ["attention-mass", "niah-accuracy", "position-ranges", "position-patterns",
                                  "ap-spectrum", "kl-ablation"])
def test_compact_tables(results, name):
    """The Markdown holds the compact table's own header and values, row by row, to 3 digits."""
    table = compact(name, results[name])
    assert len(table) > 0
    header, rows = _cells(markdown(table))
    assert header == [str(c) for c in table.columns] and len(rows) == len(table)
    for row, (_, expected) in zip(rows, table.iterrows()):
        for cell, value in zip(row, expected):
            if isinstance(value, float):
                assert (cell == "") if value != value else float(cell) == pytest.approx(value, rel=5e-3, abs=5e-4)
            else:
                assert cell == str(value)


def test_compact_tables_summarise_the_raw_numbers(results):
    kl = results["kl-ablation"]
    counts = compact("kl-ablation", kl).set_index("model").iloc[0]
    assert counts.sum() == len(kl) and dict(counts[counts > 0]) == dict(kl["group"].value_counts())
    spec = results["ap-spectrum"]
    ap = compact("ap-spectrum", spec)
    assert list(ap["component"]) == [1, 2, 3, 4]
    first = spec[spec.component == 1].iloc[0]
    assert ap.iloc[0]["cumulative"] == first["cumulative"] == pytest.approx(first["explained_variance"])
    raw = results["position-ranges"]
    pr = compact("position-ranges", raw).iloc[0]
    per_head = raw[raw["mode"] == pr["mode"]].groupby(["layer", "head"])["d"].mean()
    assert pr["heads"] == len(per_head) and pr["d_max"] == pytest.approx(per_head.max()) \
        and pr["d_min"] == pytest.approx(per_head.min())


def test_attention_mass_table_has_the_three_parts(results):
    table = compact("attention-mass", results["attention-mass"])
    assert list(table.columns[:5]) == ["model", "mode", "needle (% per token)", "query (% per token)",
                                       "rest (% per token)"]
    raw = results["attention-mass"]
    first = raw[(raw["layer"].astype(str) == "all") & (raw["part"] == "needle")].iloc[0]
    assert table.iloc[0]["needle (% per token)"] == pytest.approx(100 * first["mean_per_token"])
