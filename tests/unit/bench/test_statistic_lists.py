"""The benches' lists of statistics are read off the table of declared statistics, so a statistic declared is a
statistic measured: nothing to keep in step by hand."""

import dataclasses

from interp.attention import statistics


def test_the_exactness_and_half_precision_lists_follow_the_declared_table(monkeypatch):
    import bench.exactness as exactness
    import bench.half_precision as half

    assert exactness.PATHS["chunked"] == exactness.WANTED == half.WANTED
    assert set(exactness.WANTED) == {n for n, s in statistics.DECLARED.items() if "key_parts" not in s.needs}
    assert set(exactness.PATHS["fused"]) == {"first_mass", "self_mass", "previous_mass", "window_mass"}
    planted = dataclasses.replace(statistics.DECLARED["entropy"], name="planted_mass", band=lambda o: (1, -1))
    monkeypatch.setitem(statistics.DECLARED, "planted_mass", planted)
    every, fused = exactness._declared()
    assert "planted_mass" in every and "planted_mass" in fused and "span_mass" not in every
