"""Write one benchmark's section into BENCHMARKS.md, replacing its previous section."""

from __future__ import annotations

import datetime as dt
import platform
import re
from pathlib import Path

import torch

FILE = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
HEADER = "# Benchmarks\n\nWritten by `make bench` (`python -m bench`). Every number is a ratio against a baseline measured in the same run.\n"


def machine() -> str:
    return f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, {dt.date.today()}"


def write_section(key: str, title: str, body: str) -> None:
    text = FILE.read_text(encoding="utf-8") if FILE.exists() else HEADER
    section = f"<!-- {key} -->\n## {title}\n\n{body.strip()}\n<!-- /{key} -->\n"
    pattern = re.compile(rf"<!-- {re.escape(key)} -->.*?<!-- /{re.escape(key)} -->\n", re.S)
    text = pattern.sub(lambda m: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    FILE.write_text(text, encoding="utf-8")
