"""Progress of the long loops of analyses and probes: a bar on a terminal, and lines in pipes, logs and CI.

``progress(iterable, desc)`` counts a loop; ``layers(model, desc, passes)`` counts a forward pass layer by layer
(a tick as each block's ``hook_resid_post`` fires), for passes long enough that a single one takes minutes;
``stage(desc)`` brackets a step that has no loop to count (loading a model, running an analysis, writing files).

Where stderr is a terminal, loops show tqdm bars that vanish when done. Where it is not (a batch log, a pipe, CI),
each loop writes one line when it starts and one when it ends (with a line at most every ``EVERY`` seconds
between), so a log says what ran and for how long; a loop of one item writes nothing (there is nothing to count, and
the ``stage`` around it says what ran). ``stage`` writes its line in both cases.
``POSLENS_PROGRESS=0`` silences the lines (the bars follow tqdm's own rules).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

EVERY = 60.0  # seconds between a loop's lines in a log


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _lines_on() -> bool:
    return os.environ.get("POSLENS_PROGRESS", "1").strip().lower() not in ("0", "off", "false", "no")


def say(text: str) -> None:
    """One progress line on stderr (unless ``POSLENS_PROGRESS=0``)."""
    if _lines_on():
        print(f"[poslens] {text}", file=sys.stderr, flush=True)


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


class _Lines:
    """What a tqdm bar offers the loops here (iteration, ``update``, ``set_postfix_str``, ``close``), as log lines."""

    def __init__(self, iterable, desc: str, total: int | None, unit: str = "it"):
        self.iterable, self.desc, self.unit = iterable, desc, unit
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.n, self.postfix, self.closed = 0, "", False
        self.start = self.last = time.perf_counter()
        self.quiet = self.total is not None and self.total <= 1
        self._say(f"{desc}: started" + (f" ({self.total} {unit})" if self.total is not None else ""))

    def _say(self, text: str) -> None:
        if not self.quiet:
            say(text)

    def _count(self) -> str:
        return f"{self.n}/{self.total}" if self.total is not None else str(self.n)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self.last >= EVERY:
            self.last = now
            self._say(f"{self.desc}: {self._count()} {self.unit} after {_seconds(now - self.start)}"
                + (f" ({self.postfix})" if self.postfix else ""))

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._say(f"{self.desc}: done, {self._count()} {self.unit} in {_seconds(time.perf_counter() - self.start)}")

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __len__(self):
        return self.total or 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress(iterable, desc: str, total: int | None = None):
    if not _tty():
        return _Lines(iterable, desc, total)
    from tqdm.auto import tqdm  # imported here: analysis modules stay light to import (the CLI reads them)

    return tqdm(iterable, desc=desc, total=total, leave=False, disable=None, dynamic_ncols=True)


@contextlib.contextmanager
def stage(desc: str):
    """One line as the block starts and one as it ends, with its time (or the exception that ended it)."""
    say(f"{desc} ...")
    start = time.perf_counter()
    try:
        yield
    except BaseException as err:
        say(f"{desc}: stopped after {_seconds(time.perf_counter() - start)} ({type(err).__name__})")
        raise
    say(f"{desc}: done in {_seconds(time.perf_counter() - start)}")


@contextlib.contextmanager
def layers(model, desc: str, passes: int = 1, enabled: bool = True):
    """A bar of ``passes x model.n_layers`` ticks, one as each layer finishes, for the ``with`` block's forward passes.
    Yields the bar (None when not ``enabled``); the hooks it adds are plain torch hooks, apart from
    ``model.hooks()``."""
    if not enabled:
        yield None
        return
    if _tty():
        from tqdm.auto import tqdm

        bar = tqdm(desc=desc, total=passes * model.n_layers, leave=False, disable=None, dynamic_ncols=True,
                   unit="layer")
    else:
        bar = _Lines(None, desc, passes * model.n_layers, unit="layer")
    points = [model.hook_dict[n] for n in (f"blocks.{layer}.hook_resid_post" for layer in range(model.n_layers))
              if n in model.hook_dict]
    handles = [p.register_forward_hook(lambda *_: bar.update(1)) for p in points]
    try:
        yield bar
    finally:
        for h in handles:
            h.remove()
        bar.close()
