"""Every bad option is refused before work starts: exit code 2 and one line naming the option and the value."""

import subprocess
import sys

import pytest

from poslens.cli import main

OUT = "never-written"
CASES = [  # (arguments, the option and value the one line must name)
    (["analyze", "loss-neutrality", "--model", "increments-shared", "--n-docs", "0"], "--n-docs 0"),
    (["analyze", "position-probes", "--model", "dstg-small", "--cv-folds", "0"], "--cv-folds 0"),
    (["analyze", "ap-spectrum", "--model", "dstg-small", "--n-components", "0"], "--n-components 0"),
    (["analyze", "ap-spectrum", "--model", "dstg-small", "--low-bins", "-1"], "--low-bins -1"),
    (["analyze", "position-patterns", "--model", "repo-small", "--layer", "abc"], "--layer abc"),
    (["analyze", "byte-increments", "--model", "increments-shared", "--device", "nonsense"], "--device nonsense"),
    (["analyze", "byte-increments", "--model", "increments-shared", "--seed", "x"], "--seed x"),
    (["analyze", "attention-mass", "--model", "repo-small", "--haystack", "sea"], "--haystack sea"),
    (["analyze", "attention-mass", "--model", "repo-small", "--depth", "2"], "--depth 2"),
    (["analyze", "kl-ablation", "--model", "dstg-small", "--rp-support", "nan-ish"], "--rp-support nan-ish"),
    (["analyze", "kl-ablation", "--model", "dstg-small", "--rp-support", "nan"], "--rp-support nan"),
    (["analyze", "position-patterns", "--model", "repo-small", "--head", ","], "--head ,"),
    (["analyze", "char-spacing", "--model", "increments-shared", "--scale", "huge"], "--scale huge"),
    (["analyze", "niah-accuracy", "--model", "repo-small", "--length", "512,x"], "--length 512,x"),
    # checked against the model right after it loads, before the analysis runs
    (["analyze", "kl-ablation", "--model", "dstg-small", "--length", "4096"], "--length 4096"),
    (["analyze", "position-patterns", "--model", "repo-small", "--layer", "9"], "--layer 9"),
]


@pytest.mark.parametrize("argv, named", CASES + [
    (["analyze", "entity-spacing", "--model", "increments-shared", "--entities", "EMPTY"], "--entities EMPTY"),
    (["analyze", "byte-increments", "--model", "increments-shared", "--device", "cuda"], "--device cuda"),
], ids=lambda v: " ".join(v[3:]) if isinstance(v, list) else None)
def test_bad_option_exits_2_with_one_line(argv, named, tmp_path, capsys, monkeypatch):
    if "--device" in argv and "cuda" in argv:
        import torch

        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU-only build, even on a GPU machine
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    argv = [str(empty) if a == "EMPTY" else a for a in argv]
    named = named.replace("EMPTY", str(empty))
    rc = main(argv + ["--out", str(tmp_path / OUT)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and named in err and "Traceback" not in err, err
    assert not (tmp_path / OUT).exists()


def test_static_checks_happen_before_any_model_loads(tmp_path):
    """A bad value is reported even when the model does not exist: nothing was loaded first."""
    rc = main(["analyze", "ap-spectrum", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
               "--n-components", "0"])
    assert rc == 2


def test_default_length_is_lowered_to_the_model_and_recorded(tmp_path):
    import json

    rc = main(["analyze", "kl-ablation", "--model", "dstg-small", "--n-docs", "1", "--out", str(tmp_path)])
    assert rc == 0
    prov = json.loads((tmp_path / "kl-ablation.provenance.json").read_text())
    assert prov["arguments"]["length"] == 256 and prov["arguments"]["n_docs"] == 1


@pytest.mark.parametrize("argv", [["--help"], ["analyze", "position-probes", "--help"], ["models"]])
def test_help_and_models_import_no_heavy_module(argv):
    code = ("import sys\nfrom poslens.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'transformer_lens', 'transformers', 'scipy') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code % argv], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_input_documents_are_read_by_corpora_user_and_recorded(monkeypatch, tmp_path):
    """Any analysis with a ``documents`` parameter gets --input; the reader is corpora.user's (faked here)."""
    import types
    from typing import Annotated

    import analyses.registry as registry

    calls = []
    fake = types.SimpleNamespace(read_documents=lambda p: calls.append(p) or [types.SimpleNamespace(id="a", text="x")],
                                 input_record=lambda p: {"path": str(p), "size": 1, "sha256": "00"})
    monkeypatch.setitem(sys.modules, "corpora.user", fake)
    seen = {}

    @registry.analysis("test-input")
    def test_input(model, *, documents=None, n: Annotated[int, registry.Help("n"), registry.Range(1)] = 2):
        """A test analysis."""
        seen.update(documents=documents, n=n)

    try:
        spec = registry.get("test-input")
        opt = next(o for o in spec.options if o.name == "documents")
        assert opt.flag == "--input"
        parsed = spec.parse_cli({"documents": "docs.jsonl", "n": "3"})
        assert calls == ["docs.jsonl"] and parsed["n"] == 3 and parsed["documents"][0].text == "x"
    finally:
        registry._REGISTRY.pop("test-input")


def test_the_walk_from_poslens_analyze_to_the_csv_checks_the_options_once(tmp_path, monkeypatch):
    """parse -> plan (every check that needs no model, once) -> execute (bind each model: its own checks only)."""
    from analyses.registry import Analysis

    calls = []
    check = Analysis.check_options
    monkeypatch.setattr(Analysis, "check_options",
                        lambda self, *a, **k: calls.append(self.name) or check(self, *a, **k))
    assert main(["analyze", "position-ranges", "--model", "rope-small", "--length", "64", "--n-docs", "1",
                 "--source", "wiki", "--out", str(tmp_path / "o"), "--format", "html"]) == 0
    assert calls == ["position-ranges"]
    assert (tmp_path / "o" / "position-ranges.csv").is_file()
