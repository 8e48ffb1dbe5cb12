"""Every analysis' compact table builds from a real (tiny) result."""

import pytest

import analyses
from poslens.summary import compact, markdown
from probes.position import ProbeDoc
from tests.encoder_helpers import token_ids, tiny_encoder
from tests.repo_helpers import tiny_repo


@pytest.fixture(scope="module")
def results():
    repo = tiny_repo("repo")
    enc = tiny_encoder("disentangled")
    docs = [ProbeDoc("", token_ids(enc, 1, 20, seed=s)[0].tolist(), []) for s in range(2)]
    return {
        "attention-mass": analyses.run("attention-mass", repo, n_docs=1, length=420),
        "niah-accuracy": analyses.run("niah-accuracy", repo, lengths=(300,), n_docs=1),
        "position-ranges": analyses.run("position-ranges", repo, n_docs=1, length=300),
        "position-patterns": analyses.run("position-patterns", repo, layers=[1], length=256),
        "ap-spectrum": analyses.run("ap-spectrum", enc),
        "kl-ablation": analyses.run("kl-ablation", enc, docs=docs),
    }


@pytest.mark.parametrize("name", ["attention-mass", "niah-accuracy", "position-ranges", "position-patterns", "ap-spectrum", "kl-ablation"])
def test_compact_tables(results, name):
    table = compact(name, results[name])
    assert len(table) > 0
    text = markdown(table)
    assert text.startswith("| ") and text.count("\n") == len(table) + 1


def test_attention_mass_table_has_the_three_parts(results):
    table = compact("attention-mass", results["attention-mass"])
    assert list(table.columns[:5]) == ["model", "mode", "needle (% per token)", "query (% per token)", "rest (% per token)"]
    raw = results["attention-mass"]
    first = raw[(raw["layer"].astype(str) == "all") & (raw["part"] == "needle")].iloc[0]
    assert table.iloc[0]["needle (% per token)"] == pytest.approx(100 * first["mean_per_token"])
