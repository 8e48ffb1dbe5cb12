import os

import pytest
import torch

# the cores shared out between pytest-xdist's workers (-n 2 on 2 cores: one thread each); two workers of two threads
# oversubscribe the cores, and small models' many short ops then wait on each other (attention-mass on repo-small: 10x)
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))))
# static export is tested where asked for: tests/acceptance/figures/test_render.py
os.environ.setdefault("POSLENS_FORMATS", "html")
# nnsight mounts .save() on every object at import (its PYMOUNT), which shadows a lazy export named save
# (poslens.save, interp.save) for the rest of the process: the tests use nnsight.save(x) with the mount off
os.environ.setdefault("NNSIGHT_CONFIG", os.path.join(os.path.dirname(__file__), "nnsight.yaml"))
# progress lines (interp.runtime.progress) are tested where asked for (tests/acceptance/poslens/test_feedback.py);
# elsewhere an error's one line stays the whole of stderr
os.environ.setdefault("POSLENS_PROGRESS", "0")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _threads_restored():
    """A command run in-process sets torch's threads for itself (``poslens.run.threads.apply``); the next test gets the
    suite's count back instead of inheriting it."""
    before = torch.get_num_threads()
    yield
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)
