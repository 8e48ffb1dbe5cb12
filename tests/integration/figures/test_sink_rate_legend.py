"""sink-rate's figure names every line in its legend, also one drawn only in a later panel (the kept evidence runs
Gemma 3 at 256 tokens with its start token only: that line first appears in the second panel)."""

import pandas as pd

from figures.sink_rate import figure
from poslens.known_results.types import EVIDENCE


def test_every_line_of_the_kept_sink_rate_run_has_one_legend_entry():
    df = pd.read_csv(EVIDENCE / "sink-rate.csv.gz")
    fig = figure(df)
    named = [t.name for t in fig.data if t.showlegend]
    drawn = {t.name for t in fig.data if t.mode == "lines+markers"}
    assert sorted(named) == sorted(drawn) and "gemma3-270m, 256 tokens" in named


def test_the_rows_of_panels_are_taller_than_the_gaps_between_them():
    """Seven conditions make four rows: a fixed share of the height between rows left each panel shorter than the gap
    under it (looked at: the report's figure of the run at 3c75c1e)."""
    df = pd.read_csv(EVIDENCE / "sink-rate.csv.gz")
    fig = figure(df)
    domains = sorted({tuple(fig.layout[a].domain) for a in fig.layout if a.startswith("yaxis")}, reverse=True)
    assert len(domains) >= 2
    panel = domains[0][1] - domains[0][0]
    gap = domains[0][0] - domains[1][1]
    assert panel > 2.5 * gap


def test_panel_titles_say_which_token_comes_first():
    """Looked at (a 5-length, 8-condition run on a tiny model): "text, start token second" and "text, <eos> first"
    where the titles once read "start-second, with start token"."""
    df = pd.read_csv(EVIDENCE / "sink-rate.csv.gz")
    sep = df[(df["input"] == "text") & ~df["start_token"]].assign(input="separator-first", start_token=True,
                                                                  separator_text="<|endoftext|>")
    titles = [a.text for a in figure(pd.concat([df, sep])).layout.annotations]
    assert "text, start token second" in titles and "text, <|endoftext|> first" in titles
    assert "text, without start token" in titles and not any("start-second" in t for t in titles)
