"""position-ranges' log axis as plotly lays it out: every tick label is the value at its tick, written out (a "5"
near the top of a 2-to-800 axis would mean 500), every decade inside the data's span is labelled, heads whose range
is 0 (NoPE layers) sit in a band of their own labelled 0, and every violin lies inside the drawn axis."""

import math

import numpy as np
import pandas as pd
import pytest

import figures
from figures.render import render

needs_browser = pytest.mark.skipif(figures.find_browser() is None, reason="no Chrome/Chromium for kaleido (install "
                                   "`chromium` or run `plotly_get_chrome`): plotly's layout not computed")


def table(heads: dict[str, list[tuple[str, float]]]) -> pd.DataFrame:
    """One row per head: ``{model: [(mode, d), ...]}``."""
    return pd.DataFrame([dict(model=model, layer=i // 4, head=i % 4, mode=mode, context="doc:0", d=d, n_tokens=512)
                         for model, rows in heads.items() for i, (mode, d) in enumerate(rows)])


BUNDLED = table({  # the shape of the bundled run: RePo's few positions, RoPE's 508, NoPE layers at 0
    "repo-small": [("rope", 508.25)] * 4 + [("repo", d)
                                            for d in (3.2, 3.4, 3.9, 4.1, 4.6, 5.0, 5.1, 6.2, 9.1, 9.8, 12.0, 32.0)],
    "nope-small": [("rope", 508.25)] * 4 + [("nope", 0.0)] * 12,
    "rope-small": [("rope", 508.25)] * 16,
    "increments-per-layer": [("increments", d) for d in np.linspace(505, 592, 16)],
})
WIDE = table({"a": [("repo", d) for d in (0.4, 2.0, 30.0, 700.0, 3100.0)], "b": [("rope", 4000.0)] * 3})
NARROW = table({"rope-small": [("rope", 508.25)] * 16, "smollm2": [("rope", 511.0)] * 30})


def drawn_ticks(axis) -> list[tuple[float, str]]:
    """``(value, label)`` of every labelled tick of a laid-out log axis: given as arrays, the digits plotly writes
    between decades for a ``D`` tick step (its "small digits": 2 ... 9 with no decade), or values at a step."""
    lo, hi = axis.range
    if axis.tickmode == "array":
        return list(zip(map(float, axis.tickvals), axis.ticktext))
    if isinstance(axis.dtick, str) and axis.dtick.startswith("D"):
        digits = range(1, 10) if axis.dtick == "D1" else (1, 2, 5)
        return [(m * 10.0 ** k, str(m) if m > 1 else f"{10.0 ** k:g}") for k in range(math.floor(lo), math.ceil(hi) + 1)
                for m in digits if lo <= math.log10(m * 10.0 ** k) <= hi]
    if isinstance(axis.dtick, str) and axis.dtick.startswith("L"):  # a linear step on the log axis, values written out
        step = float(axis.dtick[1:])
        return [(i * step, f"{i * step:g}")
                for i in range(math.ceil(10.0 ** lo / step), math.floor(10.0 ** hi / step) + 1)]
    step = float(axis.dtick)
    return [(10.0 ** (float(axis.tick0) + i * step), f"{10.0 ** (float(axis.tick0) + i * step):g}")
            for i in range(math.ceil((lo - float(axis.tick0)) / step), math.floor((hi - float(axis.tick0)) / step) + 1)]


@needs_browser
@pytest.mark.parametrize("template", ["default", "paper"])
@pytest.mark.parametrize("data", [pytest.param(BUNDLED, id="bundled"), pytest.param(WIDE, id="wide"),
                                  pytest.param(NARROW, id="narrow")])
def test_ticks_are_values_written_out_and_violins_stay_inside(data, template):
    from figures.save import laid_out
    from tests.figure_checks import _values, outside_axes

    fig = render("position-ranges", data, template=template, width="3.3in" if template == "paper" else None)
    full = laid_out(fig)
    axis = full.layout.yaxis
    assert axis.type == "log"
    lo, hi = axis.range
    positive = data.loc[data["d"] > 0, "d"]
    ticks = drawn_ticks(axis)
    zero = [(v, label) for v, label in ticks if label == "0"]
    for value, label in ticks:
        if label != "0":
            assert float(label) == pytest.approx(value, rel=1e-9), f"tick at {value:g} is labelled {label!r}"
    labelled = [v for v, label in ticks if label != "0"]
    decades = [10.0 ** k for k in range(math.ceil(math.log10(positive.min())), math.floor(hi) + 1)]
    assert all(any(math.isclose(d, v) for v in labelled) for d in decades), (decades, labelled)
    assert len(labelled) >= 2

    violins = [t for t in full.data if t.type == "violin"]
    assert {t.name for t in violins} == set(data["model"])
    for t in violins:
        y = _values(t.y)
        assert t.spanmode == "hard" and (y > 0).all(), t.name  # the shape spans the data, which a log axis can show
        assert lo <= math.log10(y.min()) and math.log10(y.max()) <= hi, t.name
    assert outside_axes(fig) == []

    floors = [t for t in full.data if t.type == "scatter"]
    if (data["d"] == 0).any():
        assert len(zero) == 1 and math.log10(zero[0][0]) < math.log10(positive.min())
        floor_y = np.concatenate([_values(t.y) for t in floors])
        assert len(floor_y) == int((data["d"] == 0).sum()) and np.allclose(floor_y, zero[0][0])
    else:
        assert not zero and not floors
