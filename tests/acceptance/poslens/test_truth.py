"""Provenance says what really ran; a table with NaN is never written as a result."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

import poslens.run.plan
from analyses import all_analyses, get
from analyses.nan_policy import check_table, may_be_nan, nan_columns
from interp.loading import load, save
from poslens.run.execute import run_analysis
from poslens.run.provenance import model_record
from tests.helpers import tiny_model


@pytest.fixture
def loaded(tmp_path):
    save(tiny_model("shared"), tmp_path / "m")
    return load(tmp_path / "m")


def test_an_untouched_model_is_recorded_as_loaded(loaded):
    record = model_record(loaded)
    assert record["weights_modified"] is False and record["hooks"] == []
    assert record["weights_sha256"] == record["weights_sha256_at_load"] == loaded.source["weights_sha256"]


def test_a_weight_edited_in_memory_is_recorded_as_modified_with_another_hash(loaded):
    before = model_record(loaded)["weights_sha256"]
    with torch.no_grad():
        next(p for n, p in loaded.named_parameters() if n.startswith("blocks.1")).view(-1)[0] += 1e-3
    record = model_record(loaded)
    assert record["weights_modified"] is True
    assert record["weights_sha256"] != before and record["weights_sha256_at_load"] == before
    assert record["sha256"]  # the checkpoint the edits started from is still named


def test_attached_hooks_are_listed_by_hook_point(loaded, tmp_path):
    def zero_head(t, hook):
        return t * 0

    loaded.add_hook("blocks.1.attn.hook_pattern", zero_head)
    try:
        result = run_analysis("byte-increments", [loaded], tmp_path / "out", formats=("html",))
    finally:
        loaded.reset_hooks()
    prov = json.loads(next(p for p in result.files if p.name.endswith(".provenance.json")).read_text())
    hooks = prov["models"][0]["hooks"]
    assert [(h["hook"], h["kind"]) for h in hooks] == [("blocks.1.attn.hook_pattern", "fwd")]
    assert prov["models"][0]["weights_modified"] is False
    assert model_record(loaded)["hooks"] == []


def test_a_table_with_nan_in_an_undeclared_column_is_not_written(tmp_path, monkeypatch):
    spec = get("byte-increments")

    def poisoned(model, **kw):
        df = spec.body(model, **kw)
        df.loc[df.index[2], "mean"] = np.nan
        return df

    monkeypatch.setattr(poslens.run.plan, "get", lambda name: dataclasses.replace(spec, body=poisoned))
    with pytest.raises(ValueError, match=r"byte-increments: column 'mean' holds NaN/inf in 1 of \d+ rows "
                                         r"\(row 2: model=tiny-shared"):
        run_analysis("byte-increments", [tiny_model("shared")], tmp_path / "out", formats=("html",))
    assert not (tmp_path / "out").exists()


def test_declared_nan_columns_pass_but_infinity_never_does():
    @may_be_nan(p_value="undefined for a constant sample")
    def analysis(model):
        return None

    assert nan_columns(analysis) == {"p_value": "undefined for a constant sample"}
    check_table(pd.DataFrame({"p_value": [0.5, np.nan], "n": [1, 2]}), "x", nan_columns(analysis))
    with pytest.raises(ValueError, match="column 'p_value' holds NaN/inf in 1 of 2 rows"):
        check_table(pd.DataFrame({"p_value": [0.5, np.inf]}), "x", nan_columns(analysis))
    with pytest.raises(ValueError, match="column 'n' holds NaN/inf"):
        check_table(pd.DataFrame({"n": [1.0, np.nan]}), "x", {})


def test_every_declared_nan_column_has_a_meaning():
    for analysis in all_analyses():
        for column, meaning in nan_columns(analysis.function).items():
            assert isinstance(column, str) and len(meaning) > 10, (analysis.name, column)
    assert "layer_index" in nan_columns(get("word-boundaries").function)
