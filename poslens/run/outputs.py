"""Results appear whole, under a lock, or not at all.

``Outputs(out_dir, name)`` is a context manager for one analysis' files in ``out_dir``:

1. it takes the lock ``out_dir/.NAME.lock`` (created with ``O_EXCL``; it holds the owner's pid and host). A
   lock whose pid is dead on this host is stale and taken over; a live one is a clear error naming it;
2. the caller checks for clashes and writes every file into ``staging`` (``out_dir/.NAME.partial-PID-N``)
   under its final name;
3. ``commit()`` renames each staged file into place (``os.replace``) and removes older outputs of ``NAME``
   that this run did not write.

If anything raises before ``commit()``, the staging folder and lock are removed and ``out_dir`` is left as
it was (a folder created for the run is removed again if still empty). ``under_lock`` wraps a whole
function (``run_analysis``) in one such context; ``reproduce`` enters ``Outputs`` itself (rank 0 alone, under torchrun).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import inspect
import itertools
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path


class OutputLocked(FileExistsError):
    """Another live run holds the lock on these outputs."""


_COUNTER = itertools.count()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(lock: Path, what: str) -> None:
    """Create ``lock`` exclusively; take over a stale one (dead pid on this host); else raise ``OutputLocked``."""
    me = f"{os.getpid()} {socket.gethostname()}\n"
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid_text, _, host = lock.read_text(encoding="utf-8").strip().partition(" ")
                pid = int(pid_text)
            except FileNotFoundError:
                continue  # released meanwhile: try again
            except (OSError, ValueError):
                pid, host = None, ""  # unreadable or half-written: treat as held unless it vanishes
            if pid is not None and host == socket.gethostname() and not _alive(pid):
                lock.unlink(missing_ok=True)  # stale: its owner died without cleaning up
                continue
            owner = f"pid {pid} on {host}" if pid is not None else "an unknown process"
            raise OutputLocked(f"{lock}: {owner} is writing {what} right now; wait for it to finish "
                               "(or delete the lock if that process is gone)") from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(me)
        return
    raise OSError(errno.EBUSY, f"could not take the lock {lock}")


def check_out_dir(out_dir, label: str = "--out") -> Path:
    """``out_dir`` as a path, refused (``FileExistsError`` naming ``label`` and the value) where it, or a folder it
    would be created in, is a file: checked before any model loads."""
    out_dir = Path(out_dir)
    for path in (out_dir, *out_dir.parents):
        if path.exists():
            if not path.is_dir():
                what = "is a file" if path == out_dir else f"is inside {path}, which is a file"
                raise FileExistsError(f"{label} {out_dir}: {what}, not a folder; give a folder (it is created if "
                                      "missing)")
            break
    return out_dir


class Outputs:
    def __init__(self, out_dir, name: str):
        self.out_dir, self.name = Path(out_dir), name
        self.lock = self.out_dir / f".{name}.lock"
        self.staging: Path | None = None

    def __enter__(self) -> Outputs:
        check_out_dir(self.out_dir, "out_dir")
        self._created = not self.out_dir.exists()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            acquire(self.lock, f"the results of '{self.name}' in {self.out_dir}")
        except BaseException:
            self._remove_created_dir()
            raise
        for stale in self.out_dir.glob(f".{self.name}.partial-*"):
            # left by a killed run: nobody else writes NAME while we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{self.name}.partial-{os.getpid()}-{next(_COUNTER)}-",
                                             dir=self.out_dir))
        return self

    def foreign(self) -> list[Path]:
        """What ``out_dir`` holds besides this run's lock and staging folder."""
        return [p for p in self.out_dir.iterdir() if p not in (self.lock, self.staging)]

    def commit(self, files: list[Path], replaces=()) -> list[Path]:
        """Move everything staged into ``out_dir`` (``files`` and what their writers put beside them, such as
        ``plotly.min.js``); delete ``replaces`` that nothing staged overwrote. Returns ``files``' final paths."""
        moved = []
        for src in sorted(self.staging.iterdir()):
            dst = self.out_dir / src.name
            if src.is_dir() and dst.is_dir():
                shutil.rmtree(dst)
            os.replace(src, dst)
            moved.append(dst)
        for old in replaces:
            if Path(old) not in moved:
                Path(old).unlink(missing_ok=True)
        return [self.out_dir / Path(f).relative_to(self.staging) for f in files]

    def __exit__(self, *exc) -> None:
        try:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self.lock.unlink(missing_ok=True)
            if exc[0] is not None:
                self._remove_created_dir()

    def _remove_created_dir(self) -> None:
        if self._created:
            with contextlib.suppress(OSError):
                self.out_dir.rmdir()  # only if still empty


_ACTIVE: contextvars.ContextVar[Outputs | None] = contextvars.ContextVar("poslens_outputs", default=None)


def under_lock(fn):
    """Decorator: run the function inside ``Outputs(<its out_dir argument>, <its name argument>)``.

    The body writes into ``active().staging`` and ends with ``active().commit(...)``; whatever it raises
    leaves the folder as it was. A process that writes no outputs (a torchrun rank other than 0, a
    ``--shard I/N`` share: ``interp.runtime.parallel.writes_outputs``) runs the body without taking the lock; the
    body must not call ``active()`` there."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not _writes_outputs():
            return fn(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        with Outputs(bound.arguments["out_dir"], bound.arguments["name"]) as outputs:
            token = _ACTIVE.set(outputs)
            try:
                return fn(*args, **kwargs)
            finally:
                _ACTIVE.reset(token)
    return run


def _writes_outputs() -> bool:
    """Whether this process writes outputs: always, unless a data-parallel session (``interp.runtime.parallel``, only
    ever imported by a run that uses it) says it is a rank other than 0 or a standalone share."""
    parallel = sys.modules.get("interp.runtime.parallel")
    return parallel is None or parallel.writes_outputs()


def active() -> Outputs:
    """The ``Outputs`` of the innermost ``under_lock`` function running now."""
    outputs = _ACTIVE.get()
    if outputs is None:
        raise RuntimeError("active() is only defined inside a function decorated with under_lock")
    return outputs
