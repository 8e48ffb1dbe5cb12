"""Write one benchmark's section into BENCHMARKS.md, replacing its previous section."""

from __future__ import annotations

import datetime as dt
import platform
import re
from pathlib import Path

import torch

FILE = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
HEADER = ("# Benchmarks\n\nWritten by `make bench` (`python -m bench`). Every number is a ratio against a baseline "
          "measured in the same run.\n")


def machine() -> str:
    return (f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
            f"{dt.date.today()}")


def rss_mb(field: str = "VmRSS") -> float:
    """This process' resident memory (``VmRSS``) or its peak since the last reset (``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Set the peak mark (``VmHWM``) to the current resident memory."""
    Path("/proc/self/clear_refs").write_text("5")


def write_section(key: str, title: str, body: str) -> None:
    text = FILE.read_text(encoding="utf-8") if FILE.exists() else HEADER
    section = f"<!-- {key} -->\n## {title}\n\n{body.strip()}\n<!-- /{key} -->\n"
    pattern = re.compile(rf"<!-- {re.escape(key)} -->.*?<!-- /{re.escape(key)} -->\n", re.S)
    text = pattern.sub(lambda m: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    FILE.write_text(text, encoding="utf-8")
