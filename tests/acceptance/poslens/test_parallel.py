"""Data-parallel analyses (``interp.runtime.parallel``): two gloo processes under torchrun give the one-process
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

from interp.runtime import parallel
from poslens.cli import main

ROOT = Path(__file__).resolve().parents[3]
INC, REPO, DSTG = "increments-per-layer", "repo-small", "dstg-small"
KL = ["--n-docs", "5", "--length", "64"]
PROBES = ["--n-docs", "12", "--n-train", "8", "--n-test", "4", "--n-seeds", "2", "--length", "64",
          "--cv-folds", "2"]
# a causal LM (contexts and NIAH prompts) and a model whose logits decompose (contexts with KLs)
CONTEXTS = ["--length", "64", "--max-rows", "16"]
PROFILES = ["--n-docs", "3", *CONTEXTS, "--niah-prompts", "3", "--niah-tokens", "224"]


def spec(entities: Path) -> list[tuple[str, list[str], list[str]]]:
    return [
        ("word-boundaries", [INC], ["--n-docs", "4", "--max-gaps", "300", "--n-boot", "20", "--length", "128"]),
        ("entity-spacing", [INC], ["--entities", str(entities)]),
        ("loss-neutrality", [INC, "rope-bytes"], ["--n-docs", "5", "--length", "64"]),
        ("attention-mass", [REPO], ["--n-docs", "3", "--length", "256", "--no-preamble"]),
        ("niah-accuracy", [REPO], ["--length", "256,320", "--n-docs", "3"]),
        ("position-ranges", [REPO], ["--n-docs", "5", "--length", "96", "--source", "wiki"]),
        ("kl-ablation", [DSTG], KL),
        ("compare-heads", [DSTG, "rp-encoder-small"], KL),
        ("position-probes", [DSTG], PROBES),
        ("head-profiles", [REPO, DSTG], PROFILES),
    ]


def jobs(out: Path, entities: Path) -> list[list[str]]:
    return [["analyze", name, "--out", str(out), *[a for m in models for a in ("--model", m)], *opts]
            for name, models, opts in spec(entities)]


@pytest.fixture(autouse=True)
def _html_only(monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("figures.save"), "find_chrome", lambda: None)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """``single(name, models, opts)``: the folder of the one-process ``analyze`` run with these arguments, run once per
    module: the torchrun, shard and resume tests compare against the same plain runs."""
    done = {}

    def run(name, models, opts):
        key = (name, tuple(models), tuple(opts))
        if key not in done:
            out = tmp_path_factory.mktemp(name)
            assert main(["analyze", name, *[a for m in models for a in ("--model", m)], *opts, "--out", str(out)]) == 0
            done[key] = out
        return done[key]

    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_same_table(a: Path, b: Path):
    left, right = pd.read_csv(a), pd.read_csv(b)
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=0, atol=1e-6)


def test_torchrun_two_processes_give_the_one_process_tables(tmp_path, single):
    entities = tmp_path / "entities.txt"
    entities.write_text("New York\nHong Kong\nAlbert Einstein\n")
    two = tmp_path / "two"
    one = {name: single(name, models, opts) for name, models, opts in spec(entities)}
    sharded = ["analyze", "position-probes", "--model", DSTG, *PROBES, "--out", str(tmp_path / "sharded"),
               "--shard-dir", str(tmp_path / "shards"), "--flush-every", "2"]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs(two, entities) + [sharded]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                           str(ROOT / "tests/acceptance/poslens/parallel_driver.py"), str(tmp_path / "jobs.json")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in one:
        assert_same_table(one[name] / f"{name}.csv", two / f"{name}.csv")
        prov = json.loads((two / f"{name}.provenance.json").read_text())
        assert prov["analysis"] == name and prov["parallel"] == {"processes": 2, "backend": "gloo"}
        assert "parallel" not in json.loads((one[name] / f"{name}.provenance.json").read_text())
    assert not (tmp_path / "two-rank1").exists()  # rank 1 wrote nothing
    # under torchrun with --shard-dir each rank writes its share; the shards merge into the same table
    assert_same_table(one["position-probes"] / "position-probes.csv", tmp_path / "sharded/position-probes.csv")
    assert sorted(p.name for p in (tmp_path / "shards").glob("*.json")) == ["share-0-of-2.json", "share-1-of-2.json"]
    assert main(["merge", str(tmp_path / "shards"), "--out", str(tmp_path / "merged")]) == 0
    assert_same_table(one["position-probes"] / "position-probes.csv", tmp_path / "merged/position-probes.csv")
    # the tables are not trivially equal: the models and analyses produce different numbers
    assert pd.read_csv(two / "kl-ablation.csv")["kl_sem"].std() > 0
    profiles = pd.read_csv(two / "head-profiles.csv")
    for col in ("previous_token_mass", "needle_mass", "retrieval_score", "position_range", "influence_sem"):
        assert profiles[col].std() > 0, col


def _run(argv, capsys=None):
    rc = main(argv)
    err = capsys.readouterr().err if capsys is not None else ""
    return rc, err


@pytest.mark.parametrize("name, models, opts", [("compare-heads", [DSTG, "rp-encoder-small"], KL),
                                                ("position-probes", [DSTG], PROBES),
                                                ("head-profiles", [REPO, DSTG], PROFILES)])
def test_shards_of_separate_jobs_merge_into_the_single_run(tmp_path, single, name, models, opts):
    model_args = [a for m in models for a in ("--model", m)]
    for i in range(2):
        assert main(["analyze", name, *model_args, "--out", str(tmp_path / "job"), *opts,
                     "--shard", f"{i}/2", "--shard-dir", str(tmp_path / "shards")]) == 0
    assert not (tmp_path / "job").exists()  # a share writes its shard only
    manifest = json.loads((tmp_path / "shards/share-1-of-2.json").read_text())
    assert manifest["complete"] and manifest["analysis"] == name and manifest["n_shares"] == 2
    assert len(manifest["calls"]) == len(models)
    assert not list((tmp_path / "shards").glob("*.pt")) and not list((tmp_path / "shards").glob("*.pkl"))
    assert main(["merge", str(tmp_path / "shards"), "--out", str(tmp_path / "merged")]) == 0
    assert_same_table(single(name, models, opts) / f"{name}.csv", tmp_path / "merged" / f"{name}.csv")
    prov = json.loads((tmp_path / "merged" / f"{name}.provenance.json").read_text())
    assert [m["name"] for m in prov["models"]] == models
    assert prov["parallel"] == {"merged_from": str(tmp_path / "shards"), "shares": 2}


class PowerCut(RuntimeError):
    pass


def _count_forwards(monkeypatch, cls, stop_after=None):
    calls = []
    forward = cls.forward

    def counted(self, *args, **kwargs):
        if stop_after is not None and len(calls) >= stop_after:
            raise PowerCut("interrupted")
        calls.append(1)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(cls, "forward", counted)
    return calls


@pytest.mark.parametrize("name, opts, n_items, per_item", [("kl-ablation", KL, 5, 1),
                                                           ("position-probes", PROBES, 12, 1),
                                                           ("head-profiles", ["--n-docs", "5", *CONTEXTS], 5, 2)])
def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, monkeypatch, single, name, opts, n_items, per_item):
    """``per_item``: forward passes per item (head-profiles: a context's masses, then its KLs)."""
    from interp.loading import load

    cls = type(load(DSTG))
    argv = ["analyze", name, "--model", DSTG, *opts, "--shard-dir", str(tmp_path / "shards"), "--flush-every", "1"]
    plain = single(name, [DSTG], opts)
    with monkeypatch.context() as m:
        _count_forwards(m, cls, stop_after=3 * per_item)
        with pytest.raises(PowerCut):
            main(argv + ["--out", str(tmp_path / "resumed")])
    manifest = json.loads((tmp_path / "shards/share-0-of-1.json").read_text())
    (entry,) = manifest["calls"].values()
    assert entry["done"] == [0, 1, 2] and not manifest["complete"]
    with monkeypatch.context() as m:
        calls = _count_forwards(m, cls)
        assert main(argv + ["--out", str(tmp_path / "resumed")]) == 0
    assert len(calls) == (n_items - 3) * per_item  # finished documents were not run again
    assert_same_table(plain / f"{name}.csv", tmp_path / "resumed" / f"{name}.csv")


def test_merge_refuses_missing_incomplete_or_foreign_shards(tmp_path, monkeypatch, capsys):
    from interp.loading import load

    base = ["analyze", "kl-ablation", "--model", DSTG, *KL, "--out", str(tmp_path / "x")]
    shards = tmp_path / "shards"
    assert main(base + ["--shard", "0/2", "--shard-dir", str(shards)]) == 0
    rc, err = _run(["merge", str(shards), "--out", str(tmp_path / "m")], capsys)
    assert rc == 2 and "lacks share(s) 1/2" in err

    with monkeypatch.context() as m:
        _count_forwards(m, type(load(DSTG)), stop_after=1)
        with pytest.raises(PowerCut):
            main(base + ["--shard", "1/2", "--shard-dir", str(shards), "--flush-every", "1"])
    rc, err = _run(["merge", str(shards), "--out", str(tmp_path / "m")], capsys)
    assert rc == 2 and "share 1/2" in err and "incomplete" in err and "lacks units 3" in err

    rc, err = _run(base + ["--seed", "5", "--shard", "1/2", "--shard-dir", str(shards)], capsys)
    assert rc == 2 and "written by another run" in err and "seed: 0 there, 5 here" in err
    rc, err = _run(base + ["--shard", "1/3", "--shard-dir", str(shards)], capsys)
    assert rc == 2 and "split 2 ways" in err

    other = tmp_path / "other"
    assert main(base + ["--n-docs", "6", "--shard", "1/2", "--shard-dir", str(other)]) == 0
    (shards / "share-1-of-2.json").write_text((other / "share-1-of-2.json").read_text())
    rc, err = _run(["merge", str(shards), "--out", str(tmp_path / "m")], capsys)
    assert rc == 2 and "written by another run" in err and "n_docs: 5 there, 6 here" in err
    assert not (tmp_path / "m").exists()

    rc, err = _run(base + ["--shard", "2/2", "--shard-dir", str(shards)], capsys)
    assert rc == 2 and "--shard expects I/N" in err


def test_results_round_trip_through_safetensors_exactly():
    value = {"a": torch.randn(3, 2), "b": np.arange(5, dtype=np.int64), "c": [1, 2.5, float("nan"), None, "s", True],
             "d": (np.float32(0.1), torch.zeros(0)), 7: {"e": np.random.default_rng(0).normal(size=(2, 2))}}
    back = parallel.decode(parallel.encode(value))
    assert torch.equal(back["a"], value["a"]) and back["b"].dtype == np.int64 and (back["b"] == value["b"]).all()
    assert back["c"][:2] == [1, 2.5] and np.isnan(back["c"][2]) and back["c"][3:] == [None, "s", True]
    assert isinstance(back["d"], tuple) and back["d"][0] == float(np.float32(0.1)) and back["d"][1].shape == (0,)
    assert (back[7]["e"] == value[7]["e"]).all()
    with pytest.raises(TypeError, match="cannot store a set"):
        parallel.encode({1, 2})


def test_world_comes_from_torchruns_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert parallel.detect_world() == parallel.World(rank=3, size=4, local_rank=1)
    monkeypatch.setattr(parallel, "_SESSION", parallel.Session(parallel.detect_world(), 3, 4))
    assert parallel.device_for("cuda") == "cuda:1" and parallel.device_for("cpu") == "cpu"
    assert not parallel.writes_outputs()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert parallel.detect_world() == parallel.World()
    from poslens.run.shards import parse_share

    assert parse_share("2/3") == (2, 3)
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError, match="--shard expects I/N"):
            parse_share(bad)
