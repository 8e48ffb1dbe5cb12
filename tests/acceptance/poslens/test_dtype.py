"""``--dtype`` on ``poslens analyze`` and ``poslens reproduce``, ``run_analysis(dtype=)``: the models run in that
precision and provenance records it; a precision poslens does not run is refused by name before anything loads."""

import json

import pytest
import torch

from interp.capabilities import Capability
from poslens.cli import main
from poslens.run import execute as run
from tests.hf_helpers import write_tiny_hf


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    """A tiny rotary decoder of the generic family (the architecture whose loading failed in half precision)."""
    directory = tmp_path_factory.mktemp("qwen2")
    write_tiny_hf("qwen2", directory)
    return directory


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_analyze_runs_a_rotary_model_of_the_generic_family_in_half_precision_and_records_it(qwen2, tmp_path, dtype):
    out = tmp_path / "out"
    assert main(["analyze", "induction", "--model", str(qwen2), "--out", str(out), "--n-docs", "2",
                 "--half", "24", "--dtype", dtype, "--format", "html"]) == 0
    prov = json.loads((out / "induction.provenance.json").read_text())
    assert prov["dtype"] == dtype and prov["models"][0]["dtype"] == dtype
    assert "rotary positions" in prov["models"][0]["description"]


def test_the_default_is_float32_as_loaded(qwen2, tmp_path):
    assert main(["analyze", "induction", "--model", str(qwen2), "--out", str(tmp_path), "--n-docs", "2",
                 "--half", "24", "--format", "html"]) == 0
    prov = json.loads((tmp_path / "induction.provenance.json").read_text())
    assert prov["dtype"] is None and prov["models"][0]["dtype"] == "float32"


@pytest.mark.parametrize("command", [["analyze", "induction", "--model", "MODEL", "--out", "OUT"],
                                     ["reproduce", "--quick", "--out", "OUT"]])
def test_a_dtype_poslens_does_not_run_is_refused_by_name_before_anything_loads(command, qwen2, tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.setattr(run, "resolve_models", lambda *a, **k: pytest.fail("a model was loaded"))
    argv = [str(qwen2) if a == "MODEL" else str(tmp_path / "out") if a == "OUT" else a for a in command]
    assert main(argv + ["--dtype", "float64"]) == 2
    err = capsys.readouterr().err
    assert "poslens: error: --dtype float64: expected one of float32, bfloat16, float16" in err, err
    assert not (tmp_path / "out").exists()


def test_run_analysis_takes_dtype_by_name_or_torch_dtype_and_refuses_others(qwen2, tmp_path):
    with pytest.raises(ValueError, match=r"dtype 'int8': expected one of float32, bfloat16, float16"):
        run.run_analysis("induction", [str(qwen2)], tmp_path / "a", dtype="int8")
    assert not (tmp_path / "a").exists()
    half = run.resolve_models([str(qwen2)], dtype=torch.bfloat16)[0]
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16} and Capability.ROTARY in half.capabilities
    result = run.run_analysis("induction", [str(qwen2)], tmp_path / "b", dtype="torch.float16",
                              options={"n_docs": 2, "half": 24}, formats=["html"])
    prov = json.loads(next(p for p in result.files if p.name.endswith(".provenance.json")).read_text())
    assert prov["dtype"] == "float16" and prov["models"][0]["dtype"] == "float16"


def test_shards_run_in_the_dtype_asked_for_and_merge_loads_the_models_in_it(tmp_path, capsys):
    base = ["analyze", "kl-ablation", "--model", "dstg-small", "--n-docs", "4", "--length", "48",
            "--shard-dir", str(tmp_path / "shards"), "--out", str(tmp_path / "x")]
    for i in range(2):
        assert main(base + ["--shard", f"{i}/2", "--dtype", "bfloat16"]) == 0
    assert main(base + ["--shard", "1/2"]) == 2  # float32 into bf16 shards: another run
    assert "dtype: 'bfloat16' there, None here" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "shards"), "--out", str(tmp_path / "merged")]) == 0
    prov = json.loads((tmp_path / "merged" / "kl-ablation.provenance.json").read_text())
    assert prov["dtype"] == "bfloat16" and prov["models"][0]["dtype"] == "bfloat16"
