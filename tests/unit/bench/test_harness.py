"""One benchmark harness: every ``bench/`` module runs its cells through ``bench.harness`` (a fresh process per cell,
its peak RSS, a timeout, the free-memory watch, JSON), and the harness does what it says."""

import ast
import sys
from pathlib import Path

import pytest

from bench import harness

BENCH = Path(harness.__file__).resolve().parent
LEFT = {"gpu.py"}  # being rewritten with the attention package; it moves onto the harness with that work


def test_a_cell_gives_its_json_its_wall_time_and_its_peak_rss():
    done = harness.run([sys.executable, "-c", "import json; b = bytearray(60 * 2**20); print(json.dumps({'x': 3}))"])
    row = done.result()
    assert row["x"] == 3 and row["wall_s"] > 0 and row["peak_rss_mb"] >= 60 and done.cpu_s > 0


def test_a_cell_over_its_time_or_failing_says_why():
    slow = harness.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert slow.failed == "over 0 s" and slow.result() == {"failed": "over 0 s"} and slow.wall_s < 10
    broken = harness.run([sys.executable, "-c", "raise SystemExit('no model here')"])
    assert broken.failed == "exit 1: no model here"
    with pytest.raises(RuntimeError, match="no_such_module"):
        harness.cell("no_such_module", 1)


def test_the_free_memory_watch_kills_a_cell(monkeypatch):
    monkeypatch.setattr(harness, "meminfo", lambda: {"MemAvailable": 0.5, "MemTotal": 8.0})
    done = harness.run([sys.executable, "-c", "import time; time.sleep(30)"], floor_gb=1.0)
    assert done.failed == "killed: the machine's free memory fell under 1 GB"


def test_no_bench_module_runs_a_process_of_its_own():
    """Every subprocess call in bench/ is the harness' (a busy-loop neighbour and git's commit id aside)."""
    for path in sorted(BENCH.glob("*.py")):
        if path.name in LEFT | {"harness.py"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and getattr(node.func.value, "id", None) == "subprocess":
                argv = ast.unparse(node.args[0]) if node.args else ""
                assert "while True" in argv or "git" in argv, f"{path.name}: {ast.unparse(node)[:80]}"
            if isinstance(node, ast.Attribute) and node.attr in ("wait4", "getrusage"):
                assert path.name in ("attention.py", "extraction.py"), f"{path.name}: {node.attr}"  # in-child marks
