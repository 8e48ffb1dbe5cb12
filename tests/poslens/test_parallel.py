"""Data-parallel analyses (``interp.parallel``): two gloo processes under torchrun give the one-process
tables of every corpus-level analysis; shards resume after an interruption; ``--shard i/n`` shares merged
by ``poslens merge`` give the single run's table; merging incomplete or foreign shards is refused."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from interp import parallel
from poslens.cli import main

ROOT = Path(__file__).resolve().parents[2]
INC, REPO, DSTG = "increments-per-layer", "repo-small", "dstg-small"
KL = ["--n-docs", "5", "--max-tokens", "64"]
PROBES = ["--n-docs", "12", "--n-train", "8", "--n-test", "4", "--n-seeds", "2", "--max-tokens", "64", "--cv-folds", "2"]


def jobs(out: Path, entities: Path) -> list[list[str]]:
    spec = [
        ("word-boundaries", [INC], ["--max-docs", "4", "--max-gaps", "300", "--n-boot", "20", "--max-bytes", "128"]),
        ("entity-spacing", [INC], ["--entities", str(entities)]),
        ("loss-neutrality", [INC, "rope-bytes"], ["--n-windows", "5", "--context", "64"]),
        ("attention-mass", [REPO], ["--n-samples", "3", "--context-tokens", "256", "--no-preamble"]),
        ("niah-accuracy", [REPO], ["--length", "256,320", "--n-samples", "3"]),
        ("position-ranges", [REPO], ["--n-contexts", "5", "--context-tokens", "96", "--source", "wiki"]),
        ("kl-ablation", [DSTG], KL),
        ("compare-heads", [DSTG, "rp-encoder-small"], KL),
        ("position-probes", [DSTG], PROBES),
    ]
    return [["analyze", name, "--out", str(out), *[a for m in models for a in ("--model", m)], *opts] for name, models, opts in spec]


@pytest.fixture(autouse=True)
def _html_only(monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("figures.save"), "find_chrome", lambda: None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_same_table(a: Path, b: Path):
    left, right = pd.read_csv(a), pd.read_csv(b)
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=0, atol=1e-6)


def test_torchrun_two_processes_give_the_one_process_tables(tmp_path):
    entities = tmp_path / "entities.txt"
    entities.write_text("New York\nHong Kong\nAlbert Einstein\n")
    one, two = tmp_path / "one", tmp_path / "two"
    for argv in jobs(one, entities):
        assert main(argv) == 0
    (tmp_path / "jobs.json").write_text(json.dumps(jobs(two, entities)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                           "--master-port", str(free_port()), str(ROOT / "tests/poslens/parallel_driver.py"), str(tmp_path / "jobs.json")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = [argv[1] for argv in jobs(one, entities)]
    for name in names:
        assert_same_table(one / f"{name}.csv", two / f"{name}.csv")
        prov = json.loads((two / f"{name}.provenance.json").read_text())
        assert prov["analysis"] == name
    assert not (tmp_path / "two-rank1").exists()  # rank 1 wrote nothing
    # the tables are not trivially equal: the models and analyses produce different numbers
    assert pd.read_csv(two / "kl-ablation.csv")["kl_sem"].std() > 0
