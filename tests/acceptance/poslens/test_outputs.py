"""Results appear atomically under a lock: concurrent runs, failed runs, stale locks (poslens.run.outputs)."""

import dataclasses
import json
import subprocess
import sys
import threading

import pandas as pd
import pytest

import poslens.run.plan
from analyses import get
from poslens.run.execute import run_analysis
from poslens.run.outputs import OutputLocked
from tests.helpers import tiny_model


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _blocking(monkeypatch, analysis, started, release):
    """Make ``analysis`` wait, once started, until ``release`` is set (so two runs overlap)."""
    spec = get(analysis)

    def slow(model, **kw):
        started.set()
        assert release.wait(30)
        return spec.body(model, **kw)

    monkeypatch.setattr(poslens.run.plan, "get", lambda name: dataclasses.replace(get(name), body=slow))


def test_two_concurrent_runs_one_wins_the_other_is_refused_naming_the_lock(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()
    _blocking(monkeypatch, "byte-increments", started, release)
    a, b = tiny_model("shared", seed=1), tiny_model("per-layer", seed=2)
    a.model_name, b.model_name = "model-a", "model-b"
    outcome = {}

    def first():
        try:
            outcome["a"] = run_analysis("byte-increments", [a], tmp_path, formats=("html",))
        except Exception as err:  # pragma: no cover - reported below
            outcome["a"] = err

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(30)
    with pytest.raises(OutputLocked, match=r"\.byte-increments\.lock: pid \d+ .* "
                                           r"is writing the results of 'byte-increments'"):
        run_analysis("byte-increments", [b], tmp_path, formats=("html",), force=True)
    release.set()
    thread.join(60)
    assert not isinstance(outcome["a"], Exception), outcome["a"]
    table = pd.read_csv(tmp_path / "byte-increments.csv")
    prov = json.loads((tmp_path / "byte-increments.provenance.json").read_text())
    assert set(table["model"]) == {"model-a"} == {m["name"] for m in prov["models"]}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no lock, no staging left


def test_a_run_that_fails_midway_leaves_the_folder_byte_identical(tmp_path, monkeypatch):
    model = tiny_model("shared")
    run_analysis("byte-increments", [model], tmp_path, formats=("html",))
    before = _snapshot(tmp_path)
    import figures

    def broken_figure(fig, stem, **kw):
        stem.with_suffix(".html").write_text("half a figure")
        raise RuntimeError("disk full while writing the figure")

    monkeypatch.setattr(figures, "save", broken_figure)
    with pytest.raises(RuntimeError, match="disk full"):
        run_analysis("byte-increments", [tiny_model("shared", seed=9)], tmp_path, formats=("html",), force=True)
    assert _snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)


def test_a_run_that_fails_in_a_new_folder_leaves_no_folder(tmp_path, monkeypatch):
    spec = get("byte-increments")

    def fails(model, **kw):
        raise ValueError("planted failure")

    monkeypatch.setattr(poslens.run.plan, "get", lambda name: dataclasses.replace(spec, body=fails))
    with pytest.raises(ValueError, match="planted failure"):
        run_analysis("byte-increments", [tiny_model("shared")], tmp_path / "new", formats=("html",))
    assert not (tmp_path / "new").exists()


def test_a_stale_lock_from_a_dead_process_is_taken_over(tmp_path):
    import socket

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / ".byte-increments.lock").write_text(f"{dead} {socket.gethostname()}\n")
    (tmp_path / ".byte-increments.partial-123-0-x").mkdir()  # staging left by a killed run
    result = run_analysis("byte-increments", [tiny_model("shared")], tmp_path, formats=("html",))
    assert (tmp_path / "byte-increments.csv").exists() and result.files[0] == tmp_path / "byte-increments.csv"
    assert not any(p.name.startswith(".byte-increments") for p in tmp_path.iterdir())


def test_a_live_lock_is_never_broken(tmp_path):
    import os
    import socket

    (tmp_path / ".byte-increments.lock").write_text(f"{os.getppid()} {socket.gethostname()}\n")
    with pytest.raises(OutputLocked, match="is writing"):
        run_analysis("byte-increments", [tiny_model("shared")], tmp_path, formats=("html",))
    assert (tmp_path / ".byte-increments.lock").exists() and not (tmp_path / "byte-increments.csv").exists()


def test_force_replaces_every_earlier_output_and_reports_final_paths(tmp_path):
    (tmp_path / "byte-increments.png").write_bytes(b"old png of another run")
    with pytest.raises(FileExistsError, match="pass --force"):
        run_analysis("byte-increments", [tiny_model("shared")], tmp_path, formats=("html",))
    result = run_analysis("byte-increments", [tiny_model("shared")], tmp_path, formats=("html",), force=True)
    assert not (tmp_path / "byte-increments.png").exists()  # not written by this run: a stale mix is removed
    assert all(p.parent == tmp_path and p.exists() for p in result.files)
