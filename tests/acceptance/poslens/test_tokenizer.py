"""A model loaded without a tokenizer: ``to_tokens`` says so, and ``--tokenizer`` gives it one (checked first)."""

import json

import pytest

from interp.catalog import MINILM
from interp.families.repo.checkpoints import save_pretrained
from interp.loading import load, load_tokenizer
from interp.package_files import package_file
from interp.tokenizers import TokenizerError
from poslens.cli import main
from tests.repo_helpers import tiny_repo


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A RePo directory with a 30,522-token vocabulary and no tokenizer files, and one with 1,000 tokens."""
    root = tmp_path_factory.mktemp("bare")
    save_pretrained(tiny_repo("repo", vocab_size=30522, tokenizer=None), root / "wide")
    save_pretrained(tiny_repo("repo", vocab_size=1000, tokenizer=None), root / "narrow")
    return root


def test_to_tokens_without_a_tokenizer_names_the_model_and_the_remedy(bare):
    model = load(bare / "wide")
    assert model.tokenizer is None
    with pytest.raises(TokenizerError, match=r"wide was loaded without a tokenizer.*--tokenizer"):
        model.to_tokens("The capital of France is")


def test_the_tokenizer_option_gives_a_bare_model_a_tokenizer_and_provenance_names_it(bare, tmp_path, capsys):
    args = ["analyze", "niah-accuracy", "--model", str(bare / "wide"), "--length", "300", "--n-docs", "1",
            "--format", "html"]
    assert main(args + ["--out", str(tmp_path / "none")]) == 2
    assert "loaded without a tokenizer" in capsys.readouterr().err
    minilm = package_file(*MINILM)
    assert main(args + ["--out", str(tmp_path / "with"), "--tokenizer", str(minilm)]) == 0
    record = json.loads((tmp_path / "with" / "niah-accuracy.provenance.json").read_text())
    tok = record["models"][0]["tokenizer"]
    assert tok["given"] == str(minilm) and tok["vocab_size"] == 30522 and tok["kind"] == "WordPieceTokenizer"


def test_a_registry_models_tokenizer_can_be_borrowed(bare):
    tok = load_tokenizer("repo-small")
    assert tok.vocab_size == 257 and tok.source["given"] == "repo-small"
    assert tok.encode("ab") == [97, 98]


def test_bad_tokenizers_are_refused_by_name_before_any_model_loads(bare, tmp_path, capsys, monkeypatch):
    import interp.loading

    loads = []
    real = interp.loading.load
    monkeypatch.setattr(interp.loading, "load", lambda *a, **k: loads.append(a) or real(*a, **k))
    base = ["analyze", "niah-accuracy", "--model", str(bare / "narrow"), "--length", "300", "--n-docs", "1",
            "--out", str(tmp_path / "out")]
    missing = tmp_path / "no-such-dir"
    assert main(base + ["--tokenizer", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "no such file or directory" in err and "Traceback" not in err
    assert loads == []
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(base + ["--tokenizer", str(empty)]) == 2
    assert f"{empty}: holds no tokenizer" in capsys.readouterr().err
    assert loads == []
    assert main(base + ["--tokenizer", str(package_file(*MINILM))]) == 2
    assert "has 30522 tokens but narrow reads 1000" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
