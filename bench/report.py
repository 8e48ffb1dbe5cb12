"""Write one benchmark's section into BENCHMARKS.md, replacing its previous section."""

from __future__ import annotations

import datetime as dt
import platform
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
    """BENCHMARKS.md's section ``key`` (appended at the end the first time), through README's writer."""
    from poslens import readme

    text = FILE.read_text(encoding="utf-8") if FILE.exists() else HEADER
    FILE.write_text(readme.replace(text, key, f"## {title}\n\n{body.strip()}", append=True, where=FILE.name),
                    encoding="utf-8")
