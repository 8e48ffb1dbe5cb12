"""bench.compare_csvs: float columns agree within rounding, everything else exactly, and a planted change is named."""

import numpy as np
import pandas as pd

from bench.compare_csvs import compare, differences


def _table():
    return pd.DataFrame(dict(model=["a", "b", "c"], layer=[0, 1, 2], auc=[0.5, 0.75, np.nan]))


def test_rounding_is_tolerated_and_a_planted_change_is_named():
    same = _table().assign(auc=[0.5 + 1e-12, 0.75, np.nan])
    assert differences(_table(), same) == []
    moved = _table().assign(auc=[0.5, 0.76, np.nan])
    assert differences(_table(), moved) == ["column auc: 1 rows differ (first: row 1, 0.75 != 0.76)"]
    renamed = _table().assign(model=["a", "B", "c"])
    assert differences(_table(), renamed) == ["column model: 1 rows differ (first: row 1, 'b' != 'B')"]
    assert differences(_table(), _table().iloc[:2]) == ["3 rows != 2 rows"]
    assert differences(_table(), _table()[["layer", "model", "auc"]])[0].startswith("columns ")
    assert differences(_table(), _table().assign(auc=[0.5, 0.75, 1.0]))  # NaN only matches NaN


def test_folders_are_compared_file_by_file(tmp_path):
    for name in ("before", "after"):
        (tmp_path / name).mkdir()
        _table().to_csv(tmp_path / name / "x.csv", index=False)
    _table().to_csv(tmp_path / "before" / "y.csv", index=False)
    _table().assign(layer=[0, 1, 3]).to_csv(tmp_path / "after" / "y.csv", index=False)
    _table().to_csv(tmp_path / "before" / "z.units.csv", index=False)
    found = compare(tmp_path / "before", tmp_path / "after")
    assert set(found) == {"y.csv", "z.units.csv"} and "missing" in found["z.units.csv"][0]
    assert compare(tmp_path / "before", tmp_path / "after", only=["x"]) == {}
