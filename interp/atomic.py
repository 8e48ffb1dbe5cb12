"""Files that appear whole or not at all: write beside the target under a hidden name, then ``os.replace``.

``os.replace`` is atomic within one file system, so a reader (or a run killed midway) sees either the old
file or the complete new one, never a truncated one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def replacing(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it is removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path, text: str) -> Path:
    with replacing(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return Path(path)
