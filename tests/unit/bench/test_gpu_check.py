"""``python -m bench.gpu`` end to end in its tiny CPU mode: every model shape built, every cell measured or recorded as
not run, exactness per family, results written after the run; and the time budget stops it."""

import json

from bench import gpu


def test_the_gpu_check_runs_its_tiny_cpu_mode_end_to_end(tmp_path):
    results = gpu.run("cpu", tiny=True, budget=300, out=tmp_path, models=("smollm2-135m", "gemma3-270m"))
    assert not results.get("stopped")
    assert [(r["model"], r["tokens"]) for r in results["rows"]] == [
        (m, n) for m in ("smollm2-135m", "gemma3-270m") for n in gpu.TINY_LENGTHS]
    for row in results["rows"]:
        assert all("s" in row[cell] for cell in ("hf_sdpa", "forward", "masses", "statistics", "eager")), row
    for family, paths in results["exactness"].items():
        for path, diffs in paths.items():
            assert max(v for s, v in diffs.items()) < 1e-5, (family, path, diffs)
    written = json.loads((tmp_path / "gpu.json").read_text())
    assert written["rows"] == json.loads(json.dumps(results["rows"]))
    assert "| smollm2-135m | 512 |" in (tmp_path / "gpu.md").read_text()


def test_the_budget_stops_the_check_and_says_so(tmp_path):
    # 10 ms: less than building one model takes, however warm the process (0.5 s was met by a warm tiny run)
    results = gpu.run("cpu", tiny=True, budget=0.01, out=tmp_path, models=("llama-3.2-1b",))
    assert results["stopped"] and "STOPPED" in (tmp_path / "gpu.md").read_text()


def test_a_cell_expected_past_the_budget_is_not_started():
    rows = [{"model": "m", "tokens": 1000, "statistics": {"s": 10.0, "gib": 0.0, "n": 1}}]
    assert gpu.estimate(rows, "m", "statistics", 4000) == 160.0
    assert gpu.estimate(rows, "m", "masses", 4000) is None
