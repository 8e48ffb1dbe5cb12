"""Threads come from the cores this process may use, not from the machine's core count."""

import json

import pytest

from poslens.run import threads


def test_affinity_and_cgroup_quota_bound_the_usable_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    cpu_max = tmp_path / "cpu.max"
    assert threads.usable_cores(cpu_max) == 6  # no cgroup file: the affinity mask
    cpu_max.write_text("max 100000\n")
    assert threads.usable_cores(cpu_max) == 6  # no quota
    cpu_max.write_text("250000 100000\n")
    assert threads.usable_cores(cpu_max) == 3  # 2.5 CPUs of quota: 3 threads
    cpu_max.write_text("50000 100000\n")
    assert threads.usable_cores(cpu_max) == 1


@pytest.mark.parametrize("cores, busy, ranks, expected", [
    (2, 0.0, 1, 2),    # idle 2-core machine: both cores
    (2, 1.1, 1, 1),    # one other busy process: the free core only (the 91 s -> 18.5 s case)
    (2, 5.0, 1, 1),    # overloaded: never below one
    (16, 0.2, 4, 4),   # torchrun, 4 ranks on a node: a quarter each
    (16, 4.0, 4, 3),   # ... of what the other processes leave free
    (3, 0.0, 4, 1),    # more ranks than cores: one each
])
def test_choice_leaves_busy_cores_and_splits_between_ranks(cores, busy, ranks, expected, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    chosen = threads.choose(cores=cores, busy=busy, ranks_here=ranks)
    assert chosen["threads"] == expected
    assert f"{cores} usable cores" in chosen["reason"] and f"{ranks} rank(s)" in chosen["reason"]
    assert threads.choose(7, cores=cores, busy=busy, ranks_here=ranks) == {"threads": 7, "reason": "--threads"}


def test_torchrun_local_world_size_is_read(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert threads.choose(cores=8, busy=0.0)["threads"] == 4


def test_omp_num_threads_set_by_the_user_wins(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.choose(cores=8, busy=0.0) == {"threads": 3, "reason": "OMP_NUM_THREADS"}
    assert threads.choose(5, cores=8, busy=0.0)["threads"] == 5  # --threads wins over it


def _fake_proc(root, states: dict[int, list[str]], parents: dict[int, int] | None = None,
               kernel: set[int] = frozenset()):
    """A /proc with one directory per pid and a stat file per thread in the given states."""
    parents = parents or {}
    for pid, tids in states.items():
        flags = 0x00200040 if pid in kernel else 4194560 & ~0x00200000

        def line(state):  # a command name with spaces and a ')' inside, as /proc allows
            return f"{pid} (evil) name) {state} {parents.get(pid, 1)} {pid} {pid} 0 -1 {flags} 100 0 0 0 5 3 0\n"

        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(line(tids[0]))
        for i, state in enumerate(tids):
            d = root / str(pid) / "task" / str(pid * 100 + i)
            d.mkdir(parents=True)
            (d / "stat").write_text(line(state))
    (root / "loadavg").write_text("1.00 1.00 1.00 1/100 999\n")


def test_running_threads_counts_other_processes_running_threads(tmp_path):
    _fake_proc(tmp_path, {10: ["R", "S", "R"], 11: ["S"], 12: ["D", "R"], 13: ["R", "R"], 14: ["R"],
                          15: ["R"], 16: ["R"]},
               parents={13: 7, 15: 7, 16: 7}, kernel={14})
    # pid 13 is this process: its own threads do not count, nor kernel threads (14)
    assert threads.running_threads(tmp_path, exclude=13) == 5
    # under torchrun its siblings (15, 16: the other ranks of the same agent) are left to the division between ranks
    assert threads.running_threads(tmp_path, exclude=13, siblings=True) == 3
    assert threads.running_threads(tmp_path / "missing") is None


def test_a_command_that_just_ended_does_not_count(tmp_path, monkeypatch):
    """The 1-minute load average still counted the previous command of a script (1.0 on an idle machine), so each
    command got one thread of two; what runs now decides."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    _fake_proc(tmp_path, {10: ["S", "S"], 11: ["S"]})
    monkeypatch.setattr(threads, "PROC", tmp_path)
    assert threads.choose(cores=2)["threads"] == 2


def test_a_busy_process_running_now_is_seen(monkeypatch):
    """A real spinning child is counted while it runs, and the choice leaves its core to it."""
    import subprocess
    import sys
    import time

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 30: pass"])
    try:
        time.sleep(0.5)
        assert threads.busy_cores() >= 0.75
        chosen = threads.choose(cores=2)
        assert chosen["threads"] == 1 and "running threads of other processes" in chosen["reason"]
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bad_threads_is_one_line_before_any_model_loads(value, tmp_path, capsys):
    from poslens.cli import main

    assert main(["analyze", "byte-increments", "--model", "no-such-model", "--out", str(tmp_path / "o"),
                 "--threads", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"poslens: error: --threads {value}: expected an integer >= 1"
    assert main(["reproduce", "--out", str(tmp_path / "r"), "--threads", value]) == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


def test_threads_used_are_in_provenance(tmp_path):
    import torch

    from poslens.cli import main

    before = torch.get_num_threads()
    try:
        assert main(["analyze", "byte-increments", "--model", "increments-shared", "--out", str(tmp_path),
                     "--threads", "1", "--format", "html"]) == 0
        prov = json.loads((tmp_path / "byte-increments.provenance.json").read_text())
        assert prov["threads"] == {"torch": 1, "chosen": {"threads": 1, "reason": "--threads"}}
    finally:
        torch.set_num_threads(before)
