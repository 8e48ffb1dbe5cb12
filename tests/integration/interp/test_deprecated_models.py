"""The old spellings that read, build or run models give what the new spellings give: the same weights and outputs, the
same files (README.md, "Deprecated names"; the table itself is checked in tests/unit/test_deprecated.py)."""

from __future__ import annotations

import re
import warnings

import pandas as pd
import pytest
import torch

import interp
from poslens import deprecated
from tests.encoder_helpers import tiny_encoder
from tests.helpers import tiny_model
from tests.hf_helpers import tiny_hf, write_tiny_hf


def _quiet_import(name: str):
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _outputs(model, ids):
    with torch.no_grad():
        return model(ids)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_load_hf_dir_reads_what_interp_load_reads(tmp_path, family):
    write_tiny_hf(family, tmp_path / family)
    old_module = _quiet_import(f"interp.loading.{family}")
    with pytest.warns(DeprecationWarning, match=re.escape(deprecated.message(
            f"interp.loading.{family}.load_hf_dir", f"interp.load(path, family='{family}')"))):
        load_hf_dir = old_module.load_hf_dir
    old, new = load_hf_dir(tmp_path / family), interp.load(tmp_path / family, family=family)
    assert type(old) is type(new) and old.model_name == new.model_name == family
    ids = torch.randint(3, 300, (1, 12))
    torch.testing.assert_close(_outputs(old, ids), _outputs(new, ids), rtol=0, atol=0)


def test_bert_from_hf_state_builds_the_model_interp_load_builds():
    hf = tiny_hf("bert")
    bert = _quiet_import("interp.loading.bert")
    with pytest.warns(DeprecationWarning, match=re.escape("interp.loading.bert.from_hf_state is deprecated")):
        from_hf_state = bert.from_hf_state
    old = from_hf_state(hf.config.to_dict(), dict(hf.state_dict()), "memory")
    new = interp.load(hf, family="bert")
    ids = torch.randint(3, 300, (2, 9))
    torch.testing.assert_close(_outputs(old, ids), _outputs(new, ids), rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(_outputs(old, ids), hf(ids).last_hidden_state, rtol=1e-4, atol=1e-4)


def test_save_state_pt_writes_a_file_interp_load_reads_back(tmp_path):
    model = tiny_encoder("disentangled", seed=3)
    encoder = _quiet_import("interp.loading.encoder")
    with pytest.warns(DeprecationWarning, match=re.escape("interp.loading.encoder.save_state_pt is deprecated")):
        save_state_pt = encoder.save_state_pt
    path = save_state_pt(model, tmp_path / "state_dict.pt")
    back = interp.load(path)
    assert back.source["format"] == "development state_dict.pt"
    ids = torch.randint(5, 60, (1, 10))
    torch.testing.assert_close(_outputs(back, ids), _outputs(model, ids), rtol=0, atol=0)


def test_hook_docs_families_and_table_of_a_class():
    from interp import hook_docs

    with pytest.warns(DeprecationWarning, match="interp.hook_docs.families is deprecated"):
        classes = hook_docs.families()
    assert classes == list(hook_docs.tables()) and len(classes) >= 6
    cls = classes[0]
    with pytest.warns(DeprecationWarning, match=re.escape("interp.hook_docs.table(cls) is deprecated")):
        old = hook_docs.table(cls)
    assert old == hook_docs.table(cls, hook_docs.tables()[cls], cls.family)
    assert old.startswith(f"**{cls.family}: {cls.__name__}**") and "| `blocks.{l}.hook_resid_pre` |" in old


def test_run_analysis_static_is_formats(tmp_path):
    from poslens.run import run_analysis

    model = tiny_model("shared")
    with pytest.warns(DeprecationWarning, match=re.escape(deprecated.message(
            "poslens.run.run_analysis(static=)",
            "formats=['html'] for static=False, formats=None (the default) for True"))):
        old = run_analysis("byte-increments", [model], tmp_path / "old", static=False)
    new = run_analysis("byte-increments", [model], tmp_path / "new", formats=["html"])
    names = sorted(p.name for p in (tmp_path / "old").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "new").iterdir())
    assert names == ["byte-increments.csv", "byte-increments.html", "byte-increments.provenance.json"]
    pd.testing.assert_frame_equal(old.table, new.table)
    with pytest.warns(DeprecationWarning):
        on = run_analysis("byte-increments", [model], tmp_path / "on", static=True)
    default = run_analysis("byte-increments", [model], tmp_path / "default")
    assert [p.name for p in on.files] == [p.name for p in default.files]
    with pytest.raises(TypeError, match="static= and formats= both"):
        run_analysis("byte-increments", [model], tmp_path / "both", static=False, formats=["html"])
    assert not (tmp_path / "both").exists()
