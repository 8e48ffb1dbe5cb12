"""What a new user meets first: errors before any model loads (with "did you mean"), a headline instead of the table,
progress lines in logs, and ``--threads`` governing the BLAS libraries too."""

import os

import pytest

from poslens.cli import main


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith("[poslens] ")]


def test_a_misspelt_analysis_name_gets_the_nearest_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["analyze", "sinkrate", "--model", "repo-small", "--out", str(tmp_path / "o")])
    assert done.value.code == 2
    assert "invalid choice: 'sinkrate'" in (err := capsys.readouterr().err) and "did you mean 'sink-rate'?" in err


def test_an_unknown_option_gets_the_nearest_option_of_that_analysis(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["analyze", "sink-rate", "--model", "repo-small", "--out", str(tmp_path / "o"), "--n-dcos", "2"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "poslens analyze sink-rate: error: unrecognized arguments: --n-dcos 2; did you mean '--n-docs'" in err
    assert not (tmp_path / "o").exists()


def test_python_gets_did_you_mean_for_names_and_keywords():
    import analyses
    from analyses.registry import OptionError
    from tests.helpers import tiny_model

    with pytest.raises(KeyError, match="did you mean 'sink-rate'"):
        analyses.get("sinkrate")
    with pytest.raises(OptionError, match=r"sink-rate: no option 'n_dcos'; did you mean 'n_docs'[ ?]"):
        analyses.run("sink-rate", tiny_model("shared"), n_dcos=2)


def test_a_misspelt_model_name_gets_the_nearest_one():
    from interp.loading import CheckpointError, load

    with pytest.raises(CheckpointError, match=r"smolm2: no such file .* did you mean 'smollm2'\?"):
        load("smolm2")


def test_options_that_contradict_each_other_are_refused_before_the_model_loads(tmp_path, capsys):
    """The model does not exist: an error about the options means nothing was loaded first."""
    rc = main(["analyze", "along-context", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
               "--n-docs", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("poslens: error: --n-docs 1: a t-interval needs at least 2 documents; give more or "
                               "--interval none\n")
    assert not (tmp_path / "o").exists()


def test_out_naming_a_file_is_a_clear_error_before_any_load(tmp_path, capsys):
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    for out, said in ((tmp_path / "file", "is a file, not a folder"),
                      (tmp_path / "file" / "below", f"is inside {tmp_path / 'file'}, which is a file")):
        rc = main(["analyze", "byte-increments", "--model", str(tmp_path / "missing"), "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith(f"poslens: error: --out {out}: {said}") and err.count("\n") == 1, err
    assert (tmp_path / "file").read_text(encoding="utf-8") == "mine"


def test_niah_prompts_too_short_for_the_needle_name_the_option(tmp_path, capsys):
    rc = main(["analyze", "head-profiles", "--model", "repo-small", "--out", str(tmp_path / "o"), "--n-docs", "1",
               "--length", "48", "--niah-prompts", "1", "--niah-tokens", "32", "--max-rows", "16"])
    lines = _error_lines(capsys.readouterr().err)
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("poslens: error: --niah-tokens 32: NIAH prompts of 32 "
                                                               "tokens cannot hold the needle and the query ("), lines
    assert "give --niah-tokens" in lines[0]


def test_analyze_prints_a_headline_and_the_files_not_the_table(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("POSLENS_PROGRESS", raising=False)
    assert main(["analyze", "byte-increments", "--model", "increments-shared", "--out", str(tmp_path),
                 "--format", "html", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0].startswith("byte-increments on increments-shared: ") and len(out) == 4, out
    assert out[1] == f"  table:      {tmp_path / 'byte-increments.csv'} " + out[1].split(".csv ")[1]
    assert "rows x" in out[1] and out[2].endswith("byte-increments.html") and out[3].endswith(".provenance.json")
    # stderr is no terminal here: one line per stage, as a batch log would show
    err = captured.err.splitlines()
    assert "[poslens] loading increments-shared ..." in err
    assert any(line.startswith("[poslens] byte-increments on increments-shared: done in ") for line in err)


def test_a_default_headline_for_an_analysis_without_one():
    import pandas as pd

    from poslens.cli import headline

    table = pd.DataFrame({"model": ["a", "a", "b"], "x": [1, 2, 3]})
    assert headline.default(table) == "3 rows over 2 models (columns: model, x)"


def test_loops_write_a_line_as_they_start_and_end_when_stderr_is_no_terminal(capsys, monkeypatch):
    from interp.runtime import progress

    monkeypatch.delenv("POSLENS_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "EVERY", 0.0)
    assert list(progress.progress(range(3), "counting")) == [0, 1, 2]
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "[poslens] counting: started (3 it)"
    assert lines[1].startswith("[poslens] counting: 1/3 it after ")
    assert lines[-1].startswith("[poslens] counting: done, 3/3 it in ")
    assert list(progress.progress(range(1), "one chunk")) == [0] and capsys.readouterr().err == ""  # nothing to count
    monkeypatch.setenv("POSLENS_PROGRESS", "0")
    assert list(progress.progress(range(2), "quiet")) == [0, 1] and capsys.readouterr().err == ""


def test_threads_govern_the_blas_libraries_too(monkeypatch):
    import numpy as np
    from threadpoolctl import threadpool_info

    from poslens.run import threads

    for name in threads.BLAS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    try:
        threads.limit_blas(1)
        assert all(os.environ[name] == "1" for name in threads.BLAS_VARIABLES)
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas), blas
    finally:
        for limiter in threads._BLAS_LIMIT:
            limiter.restore_original_limits()
        threads._BLAS_LIMIT.clear()


def test_the_units_file_is_named_with_its_own_size(tmp_path):
    from types import SimpleNamespace

    import pandas as pd

    from poslens.cli import headline

    table = pd.DataFrame({"model": ["a"] * 2, "layer": [0, 1], "rate": [0.5, 0.25]})
    units = pd.DataFrame({"model": ["a"] * 6, "layer": [0, 0, 0, 1, 1, 1], "unit": [0, 1, 2] * 2, "value": [1] * 6})
    spec = SimpleNamespace(name="sink-rate", headline=None)
    result = SimpleNamespace(table=table, units=units,
                             files=[tmp_path / "sink-rate.csv", tmp_path / "sink-rate.units.csv"])
    said = headline.lines(spec, result)
    assert said[1] == f"  table:      {tmp_path / 'sink-rate.csv'} (2 rows x 3 columns)"
    assert said[2] == f"  units:      {tmp_path / 'sink-rate.units.csv'} (6 rows x 4 columns)"
