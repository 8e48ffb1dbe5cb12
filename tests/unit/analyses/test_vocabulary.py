"""One word for one thing, read off CHANGELOG.md's migration tables: an option's old spelling is no analysis' live
option (so it can only be refused, never mean something else), `poslens analyze` refuses it naming the option to use,
and a renamed result column took the name of the option it records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyses import all_analyses, get
from analyses.registry import OptionError

CHANGELOG = Path(__file__).resolve().parents[3] / "CHANGELOG.md"
FLAG_ROW = re.compile(r"^\| `poslens analyze ([\w-]+) (--[\w-]+)`, `(\w+)=` \| `(--[\w-]+)`, `(\w+)=` \|$")
COLUMN_ROW = re.compile(r"^\| `([\w-]+) column \{?([\w,]+)\}?` \| `\{?([\w,]+)\}?` \|$")


def _rows(pattern):
    return [m.groups() for line in CHANGELOG.read_text(encoding="utf-8").splitlines() if (m := pattern.match(line))]


FLAGS = _rows(FLAG_ROW)
COLUMNS = [(a, o, n) for a, olds, news in _rows(COLUMN_ROW) for o, n in zip(olds.split(","), news.split(","))]


def test_the_migration_table_lists_the_renamed_flags_and_columns():
    assert len(FLAGS) >= 18 and ("head-profiles", "--n-samples", "n_samples", "--niah-prompts", "niah_prompts") in FLAGS
    assert ("sink-rate", "is_sink", "sink_share") in COLUMNS and len(COLUMNS) >= 15


@pytest.mark.parametrize("analysis,old_flag,old_keyword,flag,keyword", FLAGS)
def test_an_old_spelling_is_no_live_option_and_is_refused_naming_the_new_one(analysis, old_flag, old_keyword, flag,
                                                                            keyword):
    live = {o.name for spec in all_analyses() for o in spec.options}
    assert old_keyword not in live
    spec = get(analysis)
    assert any(o.flag == flag and o.name == keyword for o in spec.options)
    with pytest.raises(OptionError, match=rf"no option '{old_keyword}'.*\(options: .*\b{keyword}\b"):
        spec.check_options({old_keyword: 1})


def test_a_renamed_column_takes_an_option_name_of_its_analysis():
    derived = {"sink_share", "poslens_logit_share"}  # renamed for what they hold, not after an option
    for name, old, new in COLUMNS:
        options = get(name).options
        # a row per value of a repeatable option (sink-rate's and niah-accuracy's lengths) names it in the singular
        names = {o.name for o in options} | {o.name[:-1] for o in options if o.multiple and o.name.endswith("s")}
        assert new in derived or new in names, f"{name} column {old} -> {new}: no option {new}"


def test_an_old_flag_on_the_command_line_is_refused_before_any_model_loads(capsys):
    from poslens.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["analyze", "retrieval-heads", "--model", "no-such-model", "--n-samples", "3", "--out", "x"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "unrecognized arguments: --n-samples 3" in err
    assert "--n-samples" in err and "--niah-prompts" in err
