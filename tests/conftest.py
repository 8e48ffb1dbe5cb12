import os

import pytest
import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))
os.environ.setdefault("POSLENS_FORMATS", "html")  # figures' static export is tested in tests/figures/test_render.py


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
