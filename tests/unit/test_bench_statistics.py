"""bench.statistics' plan and table: cells interleaved per repeat, peers never started past the memory budget, ratios of
medians against the forward of the same model and length."""

import pytest

from bench import statistics as bench

GB = 1e9


def _planted(monkeypatch, budget: float):
    calls = []

    def run_child(model_name, cell, length, timeout):
        calls.append((cell, length))
        return {"seconds": float(len(calls)), "peak_mb": 1000.0 + len(calls), "above_mb": 1.0, "load": 0.0}

    monkeypatch.setattr(bench, "run_child", run_child)
    monkeypatch.setattr(bench, "hf_dir", lambda name: name)
    monkeypatch.setattr(bench, "shape_of", lambda d: {"n_layers": 30, "n_heads": 9, "weights_bytes": 0.5 * GB})
    monkeypatch.setattr(bench, "budget_gb", lambda others, margin: budget)
    return calls


def test_each_length_runs_its_cells_interleaved_and_skips_peers_that_would_not_fit(monkeypatch):
    calls = _planted(monkeypatch, budget=8.0)
    rows = bench.measure("smollm2", [2048], [1024, 2048, 4096], repeats=2, others_gb=12, margin_gb=2, timeout=10)
    round_2048 = [("forward", 2048), ("head-profiles", 2048), ("sink-rate", 2048), ("output_attentions", 2048),
                  ("transformerlens", 2048)]
    round_1024 = [("forward", 1024), ("output_attentions", 1024), ("transformerlens", 1024)]
    round_4096 = [("forward", 4096), ("transformerlens", 4096)]  # every layer's patterns would not fit, one layer's do
    assert calls == round_1024 * 2 + round_2048 * 2 + round_4096 * 2
    skipped = {(r["cell"], r["length"]): r["skipped"]["needs_gb"] for r in rows if "skipped" in r}
    assert set(skipped) == {("output_attentions", 4096)}
    one, mask = 9 * 4096**2 * 4 / GB, 4096**2 * 4 / GB
    assert skipped["output_attentions", 4096] == pytest.approx(0.5 + (30 + 6) * one + 2 * mask + bench.INTERPRETER_GB)
    assert all(len(r["runs"]) == 2 for r in rows if "skipped" not in r)


def test_table_gives_ratios_of_medians_against_the_same_models_forward():
    def row(model, cell, seconds, peaks):
        return {"model": model, "cell": cell, "length": 512,
                "runs": [{"seconds": s, "peak_mb": m, "above_mb": 5.0, "load": s / 10} for s, m in zip(seconds, peaks)]}

    rows = [row("smollm2", "forward", [10, 12, 11], [1000, 1100, 1050]),
            row("smollm2", "sink-rate", [22, 20, 30], [1200, 1155, 1300]),  # means 24 s, 1218 MB: 2.18x, 1.16x
            row("gemma3-270m", "forward", [5, 5, 5], [2000, 2000, 2000]),
            {"model": "smollm2", "cell": "output_attentions", "length": 512, "runs": [],
             "skipped": {"needs_gb": 21.34, "budget_gb": 9.5}}]
    lines = bench.table(rows).splitlines()
    assert lines[3] == ("| smollm2 | 512 | sink-rate | 3 | 22.0 (20.0..30.0) | 2.00x | 1200 (1155..1300) | 1.14x | "
                        "5 | 2.0..3.0 |")
    assert lines[4] == ("| gemma3-270m | 512 | forward | 3 | 5.0 (5.0..5.0) | 1.00x | 2000 (2000..2000) | 1.00x | "
                        "5 | 0.5..0.5 |")
    assert "not run: needs 21.3 GB, 9.5 GB could be taken" in lines[5]


def test_budget_is_free_memory_capped_by_what_other_work_may_claim():
    assert bench.budget_gb(12, 2, {"MemTotal": 24.0, "MemAvailable": 20.0}) == 10.0
    assert bench.budget_gb(12, 2, {"MemTotal": 24.0, "MemAvailable": 7.0}) == 5.0


@pytest.mark.parametrize("argv, message", [(["--lengths", "64"], "--lengths [64]"), (["--repeats", "0"], "--repeats 0"),
                                            (["--model", "gpt2"], "invalid choice: 'gpt2'")])
def test_bad_options_are_refused_before_any_cell_runs(argv, message, monkeypatch, capsys):
    monkeypatch.setattr(bench, "measure", lambda *a, **k: pytest.fail("a cell ran"))
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert message in capsys.readouterr().err


def _measured(seconds):
    def measure(name, lengths, peer_lengths, repeats, others, margin, timeout, on_length):
        rows = []
        for length in lengths:
            rows.append({"model": name, "cell": "forward", "length": length,
                         "runs": [{"seconds": seconds, "peak_mb": 900.0, "above_mb": 1.0, "load": 0.5}] * repeats})
            on_length(rows)
        return rows
    return measure


def test_the_section_is_written_after_every_length_with_the_run_conditions(monkeypatch, tmp_path):
    written = []
    monkeypatch.setattr(bench, "measure", _measured(1.0))
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "write_section", lambda key, title, body: written.append((key, body)))
    body = bench.main(["--model", "gemma3-270m", "--lengths", "128", "256", "--repeats", "2", "--write"])
    assert [key for key, _ in written] == ["statistics"] * 3
    assert "| gemma3-270m | 128 |" in written[0][1] and "| gemma3-270m | 256 |" not in written[0][1]
    assert body == written[-1][1]
    assert "`python -m bench.statistics --model gemma3-270m --lengths 128 256 --repeats 2 --write` at commit" in body
    assert "2 repeat(s) per cell; load average" in body
    assert len(list(tmp_path.glob("statistics-gemma3-270m-*.json"))) == 1


def test_merge_takes_earlier_lengths_and_replaces_those_measured_again(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "measure", _measured(1.0))
    bench.main(["--model", "gemma3-270m", "--lengths", "128", "256", "--peer-lengths"])
    (first,) = tmp_path.glob("*.json")
    monkeypatch.setattr(bench, "measure", _measured(7.0))
    body = bench.main(["--model", "smollm2", "gemma3-270m", "--lengths", "256", "--peer-lengths", "--merge",
                       str(first)])
    rows = [line for line in body.splitlines() if line.startswith("| smollm2") or line.startswith("| gemma3-270m")]
    assert [row.split(" | ")[:3] for row in rows] == [["| smollm2", "256 (run 2)", "forward"],
                                                      ["| gemma3-270m", "128 (run 1)", "forward"],
                                                      ["| gemma3-270m", "256 (run 2)", "forward"]]
    assert " 1.0 |" in rows[1] and " 7.0 |" in rows[2]
    assert "- Run 1: `python -m bench.statistics --model gemma3-270m --lengths 128 256 --peer-lengths`" in body
    assert ("- Run 2: `python -m bench.statistics --model smollm2 gemma3-270m --lengths 256 --peer-lengths "
            "--merge") in body
    (second,) = set(tmp_path.glob("*.json")) - {first}
    merge_only = bench.main(["--lengths", "--peer-lengths", "--merge", str(first), str(second)])  # measures nothing
    assert "- Run 2:" in merge_only and "Run 3" not in merge_only and "256 (run 2)" in merge_only


def test_merge_refuses_a_file_that_is_not_a_results_file(tmp_path, capsys):
    bad = tmp_path / "other.json"
    bad.write_text('{"results": []}')
    with pytest.raises(SystemExit):
        bench.main(["--merge", str(bad)])
    assert f"--merge {bad}: not a bench.statistics results file (KeyError" in capsys.readouterr().err
