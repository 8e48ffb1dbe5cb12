import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import poslens
from interp.families.increments.checkpoints import save_step_pt
from interp.fingerprint import files_sha256
from interp.loading import save
from poslens.cli import main
from tests.helpers import tiny_model


def _pyproject_version() -> str:
    return tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    save_step_pt(tiny_model("per-layer", max_seq_len=512), root / "step_7.pt", 7)
    save(tiny_model("shared", max_seq_len=512), root / "shared")
    return root


def test_analyze_writes_csv_figure_and_provenance(checkpoints, tmp_path):
    out = tmp_path / "out"
    rc = main(["analyze", "entity-spacing", "--model", str(checkpoints / "step_7.pt"),
               "--model", str(checkpoints / "shared"), "--out", str(out), "--seed", "3", "--device", "cpu"])
    assert rc == 0
    df = pd.read_csv(out / "entity-spacing.csv")
    assert set(df["model"]) == {"step_7", "tiny-shared"} and set(df["layer"]) == {"L0", "L1", "shared"}
    prov = json.loads((out / "entity-spacing.provenance.json").read_text())
    assert prov["seed"] == 3 and prov["analysis"] == "entity-spacing"
    assert prov["models"][0]["sha256"] == files_sha256(checkpoints / "step_7.pt")
    assert prov["models"][0]["device"] == "cpu" and prov["models"][0]["dtype"] == "float32"
    assert prov["models"][1]["sha256"] == files_sha256(checkpoints / "shared")
    assert prov["versions"]["torch"] and prov["versions"]["poslens"] == poslens.__version__ == _pyproject_version()
    assert (out / "entity-spacing.html").exists()


def test_existing_results_are_not_overwritten_without_force(checkpoints, tmp_path, capsys):
    args = ["analyze", "byte-increments", "--model", str(checkpoints / "shared"), "--out", str(tmp_path)]
    assert main(args) == 0
    (tmp_path / "byte-increments.csv").write_text("mine\n")
    assert main(args) == 2
    assert "already holds results of 'byte-increments'" in capsys.readouterr().err
    assert (tmp_path / "byte-increments.csv").read_text() == "mine\n"
    assert main(args + ["--force"]) == 0
    assert (tmp_path / "byte-increments.csv").read_text() != "mine\n"


def test_same_seed_same_numbers(checkpoints, tmp_path):
    for d in ("a", "b"):
        main(["analyze", "word-boundaries", "--model", str(checkpoints / "step_7.pt"), "--out", str(tmp_path / d),
              "--max-gaps", "800", "--n-boot", "40", "--seed", "11"])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a/word-boundaries.csv"),
                                  pd.read_csv(tmp_path / "b/word-boundaries.csv"))


@pytest.mark.parametrize("extra, message", [
    (["--text", "x="], "text 'x' is empty"),
    (["--text", "no-equals-sign"], "--text no-equals-sign: expected ID=TEXT"),
])
def test_bad_input_exits_2_with_a_message(checkpoints, tmp_path, capsys, extra, message):
    rc = main(["analyze", "char-spacing", "--model", str(checkpoints / "shared"), "--out", str(tmp_path)] + extra)
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "char-spacing.csv").exists()


def test_wrong_family_and_truncated_checkpoint(checkpoints, tmp_path, capsys):
    bad = tmp_path / "step_1.pt"
    bad.write_bytes((checkpoints / "step_7.pt").read_bytes()[:300])
    assert main(["analyze", "byte-increments", "--model", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "cannot be read as a torch checkpoint" in capsys.readouterr().err
    assert main(["analyze", "word-boundaries", "--model", str(checkpoints / "shared"), "--out",
                 str(tmp_path / "o"), "--length", "4096"]) == 2
    assert "--length 4096: longer than" in capsys.readouterr().err


def test_console_script_runs_in_a_fresh_process(checkpoints, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "poslens.cli", "analyze", "byte-increments", "--model",
                           str(tmp_path / "missing.pt"), "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such file or directory" in proc.stderr


def test_every_analysis_help_renders_with_its_options(capsys):
    from analyses import all_analyses

    for analysis in all_analyses():
        with pytest.raises(SystemExit) as exit_:
            main(["analyze", analysis.name, "--help"])
        assert exit_.value.code == 0, analysis.name
        text = capsys.readouterr().out
        for opt in analysis.options:
            assert opt.flag in text, (analysis.name, opt.name)
