"""Writing figures: HTML always, PNG/PDF where a Chrome is present."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

CHROME_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chrome() -> str | None:
    """A Chrome/Chromium executable for static export, or None (``BROWSER_PATH`` wins if set)."""
    env = os.environ.get("BROWSER_PATH")
    if env and Path(env).exists():
        return env
    for name in CHROME_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def save(fig, stem, *, static: bool | None = None) -> list[Path]:
    """Write ``stem.html`` (+ ``stem.png`` and ``stem.pdf`` when a Chrome is found); returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    html = stem.with_suffix(".html")
    fig.write_html(html, include_plotlyjs="directory", full_html=True)
    written = [html]
    chrome = find_chrome() if static is not False else None
    if chrome:
        os.environ.setdefault("BROWSER_PATH", chrome)
        for ext in ("png", "pdf"):
            try:
                fig.write_image(stem.with_suffix(f".{ext}"), format=ext, scale=2 if ext == "png" else 1)
                written.append(stem.with_suffix(f".{ext}"))
            except Exception as err:  # a broken browser must not lose the HTML and CSV
                warnings.warn(f"static export of {stem.name}.{ext} failed: {err}", stacklevel=2)
                break
    return written
