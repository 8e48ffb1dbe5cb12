"""sink-rate's figure names every line in its legend, also one drawn only in a later panel (the kept evidence runs
Gemma 3 at 256 tokens with its start token only: that line first appears in the second panel)."""

import pandas as pd

from figures.sink_rate import figure
from poslens.known_types import EVIDENCE


def test_every_line_of_the_kept_sink_rate_run_has_one_legend_entry():
    df = pd.read_csv(EVIDENCE / "sink-rate.csv.gz")
    fig = figure(df)
    named = [t.name for t in fig.data if t.showlegend]
    drawn = {t.name for t in fig.data if t.mode == "lines+markers"}
    assert sorted(named) == sorted(drawn) and "gemma3-270m, 256 tokens" in named
