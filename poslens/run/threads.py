"""How many CPU threads torch gets: the cores this process may really use, shared fairly.

torch's default is one thread per core of the machine, whatever else runs there. On a 2-core machine with one
other busy process that oversubscribes: kl-ablation on 40 documents took 91-95 s with the default and 18.5 s on one
thread. ``choose`` counts the cores this process may run on (its CPU affinity, and a cgroup CPU quota when one is
set), leaves out the cores other processes keep busy *now*, and under torchrun divides what is left between the
ranks on this node (``LOCAL_WORLD_SIZE``). ``--threads N`` overrides it, and so does ``OMP_NUM_THREADS`` when the
user set it. The same count governs the BLAS libraries outside torch (``limit_blas``: threadpoolctl, and the
variables libraries read when they load), where scikit-learn's probes fit: left at their default they took a thread per
core, 3.3x slower than one thread on a busy 2-core machine.

"Busy now" is the number of other processes' threads in the running state (``R`` in ``/proc/<pid>/task/<tid>/stat``),
averaged over a few samples 10 ms apart. The 1-minute load average, used before, still counted a command for about a
minute after it ended, so each command of a script on an idle 2-core machine got one thread. Only this PID namespace
is visible in ``/proc``; work outside it is bounded by the cgroup quota, which ``usable_cores`` reads.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
PROC = Path("/proc")
CHOSEN: dict = {}  # what the last ``apply`` set and why, for provenance


def usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup v2 quota (``cpu.max``)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


PF_KTHREAD = 0x00200000  # a kernel thread (flags in /proc/<pid>/stat): the kernel's own work, not another user's


def _stat_fields(text: str) -> list[str]:
    """The fields after the command name of a ``/proc/.../stat`` line: state, ppid, pgrp, session, tty, tpgid, flags ...
    (the name is in parentheses and may itself hold spaces or ')')."""
    return text[text.rindex(")") + 2:].split()


def running_threads(proc: Path | None = None, exclude: int | None = None, siblings: bool = False) -> int | None:
    """Threads running or runnable right now in other processes than ``exclude`` (default: this one), kernel threads
    left out, and with ``siblings`` the processes that share this one's parent (torchrun's other ranks, which the
    division between ranks already accounts for); None where ``/proc`` cannot be read."""
    proc = PROC if proc is None else proc
    me = os.getpid() if exclude is None else exclude
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit() and int(p) != me]
    except OSError:
        return None
    parent = None
    if siblings:
        try:
            parent = _stat_fields((proc / str(me) / "stat").read_text())[1]
        except (OSError, ValueError, IndexError):
            parent = None
    running = 0
    for pid in pids:
        try:
            lead = _stat_fields((proc / pid / "stat").read_text())
            if int(lead[6]) & PF_KTHREAD or (parent is not None and lead[1] == parent):
                continue
            tids = os.listdir(proc / pid / "task")
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
        for tid in tids:
            try:
                running += _stat_fields((proc / pid / "task" / tid / "stat").read_text())[0] == "R"
            except (OSError, ValueError, IndexError):
                continue
    return running


def busy_cores(samples: int = 8, interval: float = 0.01, proc: Path | None = None,
               siblings: bool = False) -> float | None:
    """Mean number of other processes' running threads over ``samples`` looks ``interval`` seconds apart."""
    seen = []
    for i in range(samples):
        n = running_threads(proc, siblings=siblings)
        if n is None:
            return None
        seen.append(n)
        if i + 1 < samples:
            time.sleep(interval)
    return sum(seen) / len(seen)


def choose(requested: int | None = None, *, cores: int | None = None, busy: float | None = None,
           ranks_here: int | None = None) -> dict:
    """``{"threads": n, "reason": ...}``: ``requested`` when given, else ``OMP_NUM_THREADS`` when set, else the
    usable cores not kept busy by other processes now, divided between this node's ranks; at least 1."""
    if requested is not None:
        return {"threads": int(requested), "reason": "--threads"}
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) >= 1:
        return {"threads": int(omp), "reason": "OMP_NUM_THREADS"}
    cores = usable_cores() if cores is None else cores
    ranks_here = ranks_here if ranks_here is not None else int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    how = "given"
    if busy is None:
        busy = busy_cores(siblings=ranks_here > 1)
        how = "running threads of other processes in /proc"
        if busy is None:
            busy, how = 0.0, "/proc unreadable, taken as idle"
    taken = min(cores - 1, max(0, round(busy)))
    threads = max(1, (cores - taken) // max(1, ranks_here))
    return {"threads": threads, "reason": f"{cores} usable cores, {taken} busy ({busy:.1f} {how}), "
                                          f"{ranks_here} rank(s) on this node"}


BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
_BLAS_LIMIT: list = []  # the threadpoolctl limiter in force (kept so that it is not collected)


def limit_blas(threads: int) -> None:
    """The BLAS and OpenMP pools outside torch (numpy's and scipy's OpenBLAS, MKL: scikit-learn's probes fit there) to
    ``threads``: those already loaded through ``threadpoolctl``, those loaded later through their variables."""
    for name in BLAS_VARIABLES:
        os.environ[name] = str(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn brings it; without it, the variables above still reach later loads
        return
    _BLAS_LIMIT[:] = [threadpool_limits(limits=threads)]


def apply(requested: int | None = None) -> dict:
    """Set torch's intra-op threads and the BLAS libraries' (``limit_blas``) from ``choose``, and remember the choice
    for provenance."""
    import torch

    CHOSEN.clear()
    CHOSEN.update(choose(requested))
    torch.set_num_threads(CHOSEN["threads"])
    limit_blas(CHOSEN["threads"])
    return dict(CHOSEN)
