"""``torchrun -m poslens.cli reproduce``: two gloo processes write the one-process report (every CSV to 1e-6),
only rank 0 takes a lock or writes, refusals stop every rank before any work, and a failure on one rank ends
the whole launch instead of leaving the other waiting in a collective.

The plan is cut to four steps (``reproduce_driver.py`` puts it in place of ``main_plan()``): three data-parallel
analyses (``head-profiles`` folds contexts, NIAH prompts and KLs in one call) and one that is not
(``byte-increments``)."""

import json
import os
import socket
import subprocess
import sys

import pandas as pd
import pytest

import poslens.reproduce
from interp.loading import save
from poslens.cli import main
from tests.acceptance.poslens.test_parallel import ROOT, assert_same_table, free_port
from tests.helpers import tiny_model

TWO_GLOO = {"processes": 2, "backend": "gloo"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for variant in ("shared", "per-layer"):
        save(tiny_model(variant, max_seq_len=512), root / variant,
             training={"steps": 3, "tokens_seen": 99, "final_validation_loss": 5.5})
    inc = [str(root / "shared"), str(root / "per-layer")]
    return [
        dict(analysis="loss-neutrality", models=inc, quick=dict(n_docs=2, n_boot=10), section="A"),
        dict(analysis="byte-increments", models=inc, section="A"),
        dict(analysis="kl-ablation", models=["dstg-small"], options=dict(n_docs=4, length=64), section="B"),
        dict(analysis="head-profiles", models=["dstg-small"], options=dict(n_docs=1, length=64, max_rows=16),
             section="B"),
    ]


def torchrun(tmp_path, spec: dict, timeout: int = 300):
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "POSLENS_FORMATS": "html"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                           str(ROOT / "tests/acceptance/poslens/reproduce_driver.py"), str(tmp_path / "spec.json")],
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_two_processes_write_the_one_process_report(plan, tmp_path, monkeypatch):
    steps = tuple(poslens.reproduce.Step(**{**s, "models": tuple(s["models"])}) for s in plan)
    monkeypatch.setattr(poslens.reproduce, "main_plan", lambda: steps)
    one, two, mine = tmp_path / "one", tmp_path / "two", tmp_path / "mine"
    assert main(["reproduce", "--quick", "--out", str(one)]) == 0
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / ".report.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")  # a live run holds it
    jobs = [[["reproduce", "--quick", "--out", str(two)], 0],  # rank 1 may take no lock (reproduce_driver.py)
            [["reproduce", "--quick", "--out", str(two)], 2],
            [["reproduce", "--quick", "--out", str(mine)], 2],
            [["reproduce", "--quick", "--out", str(busy)], 2]]
    proc = torchrun(tmp_path, dict(plan=plan, jobs=jobs))
    assert proc.returncode == 0, proc.stderr[-3000:]

    csvs = sorted(p.name for p in one.glob("*.csv"))
    assert csvs == sorted(f"{s['analysis']}.csv" for s in plan) == sorted(p.name for p in two.glob("*.csv"))
    for name in csvs:
        assert_same_table(one / name, two / name)
    for step in plan:
        prov = json.loads((two / f"{step['analysis']}.provenance.json").read_text())
        assert prov["parallel"] == TWO_GLOO
        assert "parallel" not in json.loads((one / f"{step['analysis']}.provenance.json").read_text())
    index = (two / "index.html").read_text()
    assert " by 2 processes (gloo)" in index and " by 2 processes" not in (one / "index.html").read_text()
    assert all(f"<iframe src='{s['analysis']}.html'" in index for s in plan)
    assert (two / "SUMMARY.md").read_text().count("\n## ") == len(plan)
    assert not [p.name for p in two.iterdir() if p.name.endswith(".lock") or ".partial-" in p.name]
    # the folder checks are rank 0's, and every rank stops on them with the same message
    assert proc.stderr.count(f"{two} already holds a report; pass --force") == 2
    assert proc.stderr.count(f"{mine} exists and is not a poslens report folder") == 2
    assert proc.stderr.count(f"{busy / '.report.lock'}: pid {os.getpid()} on {socket.gethostname()} is writing") == 2
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and [p.name for p in busy.iterdir()] == [".report.lock"]
    assert proc.stdout.count("[1/4] loss-neutrality") == 1  # rank 0 alone reports progress
    # not trivially equal: the analyses give varied numbers
    assert pd.read_csv(two / "kl-ablation.csv")["kl_sem"].std() > 0


def test_a_failure_on_rank_0_ends_the_launch_instead_of_leaving_rank_1_waiting(plan, tmp_path):
    out = tmp_path / "r"
    # rank 0 fails once byte-increments is written; rank 1 goes on into kl-ablation's collective
    proc = torchrun(tmp_path, dict(plan=plan[:3], jobs=[[["reproduce", "--quick", "--out", str(out)], 0]],
                                   fail=[0, "byte-increments"]))
    assert proc.returncode != 0  # within torchrun()'s timeout: nothing waited for gloo's own (30 minutes)
    assert "poslens: error: planted failure" in proc.stderr
    assert (out / "byte-increments.csv").exists() and not (out / "kl-ablation.csv").exists()
    assert not (out / "index.html").exists() and not (out / "SUMMARY.md").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".lock") or ".partial-" in p.name]  # rank 0 cleaned up
