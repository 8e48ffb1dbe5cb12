"""Writing figures: interactive HTML, and PDF / SVG / PNG through kaleido and a Chrome-family browser.

The browser is the one kaleido would use: ``BROWSER_PATH`` if set, else choreographer's own search (the Chrome
that ``plotly_get_chrome`` / ``kaleido.get_chrome_sync()`` downloaded, then a Chrome, Chromium, Edge or Brave
installed on the system). One browser is started per process, on the first static export, and serves every
later one (starting it costs seconds, an export a fraction of one). Static formats asked for without a browser
are refused before any work (``resolve_formats``); by default they are skipped with a one-line note.
``POSLENS_FORMATS`` (e.g. ``html``) replaces the default set; the test suite uses it so that only the tests
written for static export start a browser.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import sys
import threading
import warnings
from pathlib import Path

FORMATS = ("html", "pdf", "svg", "png")
STATIC = ("pdf", "svg", "png")
DEFAULT_FORMATS = ("html", "pdf", "png")
BROWSER_ADVICE = ("install one with `plotly_get_chrome` (or `kaleido_get_chrome`; both put Chrome where kaleido "
                  "looks), or the system's package (Debian/Ubuntu: `apt-get install chromium`), "
                  "or point BROWSER_PATH at a Chrome/Chromium executable")
PX_PER_UNIT = {"in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "pt": 96 / 72, "px": 1.0}
CJK_ADVICE = "Debian/Ubuntu: `apt-get install fonts-wqy-microhei` (or fonts-noto-cjk)"
_noted = False
_cjk_noted = False


class BrowserMissing(ValueError):
    """A static format was asked for and no browser can render it."""


def find_browser() -> str | None:
    """The Chrome-family executable kaleido will drive, or None; ``BROWSER_PATH`` overrides the search."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None
    from choreographer.browsers.chromium import Chromium

    return Chromium.find_browser(skip_local=False)


find_chrome = find_browser


def parse_formats(text) -> tuple[str, ...]:
    """``"pdf,svg"`` (or a list of such strings) -> ``("pdf", "svg")``; unknown names are an error naming them."""
    items = [text] if isinstance(text, str) else list(text)
    out = [f.strip().lower().lstrip(".") for item in items for f in str(item).split(",") if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise ValueError(f"--format {','.join(bad) or repr(text)}: expected any of {','.join(FORMATS)}, "
                         "comma-separated")
    return tuple(dict.fromkeys(out))


def resolve_formats(formats=None, *, log=None) -> tuple[str, ...]:
    """The formats to write: as asked (static ones need a browser, else ``BrowserMissing`` with advice),
    or by default HTML plus PDF and PNG where a browser is found (one note, once per process, where not)."""
    global _noted
    if formats is None and os.environ.get("POSLENS_FORMATS"):
        formats = os.environ["POSLENS_FORMATS"]
    if formats is not None:
        formats = parse_formats(formats)
        static = [f for f in formats if f in STATIC]
        if static and find_browser() is None:
            where = f"BROWSER_PATH={os.environ['BROWSER_PATH']} is not an executable" \
                if os.environ.get("BROWSER_PATH") else "no Chrome or Chromium found"
            raise BrowserMissing(f"--format {','.join(static)} needs a browser for kaleido and {where}: "
                                 f"{BROWSER_ADVICE}")
        return formats
    if find_browser() is not None:
        return DEFAULT_FORMATS
    if not _noted:
        _noted = True
        (log or (lambda s: print(s, file=sys.stderr)))("poslens: HTML only, no PDF/PNG (no Chrome or Chromium found): "
                                                       f"{BROWSER_ADVICE}")
    return ("html",)


def parse_length(text, what: str = "--width") -> float:
    """``"3.3in"``, ``"8.5cm"``, ``"80mm"``, ``"240pt"``, ``"600px"`` or a bare number of pixels -> CSS pixels."""
    if isinstance(text, (int, float)):
        value, unit = float(text), "px"
    else:
        s = str(text).strip().lower()
        unit = next((u for u in PX_PER_UNIT if s.endswith(u)), "px")
        try:
            value = float(s[: len(s) - len(unit)] if s.endswith(unit) else s)
        except ValueError:
            raise ValueError(f"{what} {text!r}: expected a length such as 3.3in, 7in, 8.5cm, 80mm or 600px") from None
    if not 0 < value * PX_PER_UNIT[unit] <= 20_000:
        raise ValueError(f"{what} {text!r} is not a positive length of at most 20000 px")
    return value * PX_PER_UNIT[unit]


class _Browser:
    """One kaleido (one headless browser) on an event loop of its own thread, for every export of the process."""

    def __init__(self, path: str):
        self.path = path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="poslens-kaleido", daemon=True)
        self.thread.start()
        try:
            self.kaleido = self._call(self._open(), timeout=120)
        except BaseException:
            self._stop()
            raise

    async def _open(self):
        import kaleido

        k = kaleido.Kaleido(path=self.path, mathjax=False)
        await k.open()
        return k

    def _call(self, coro, timeout: float):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def calc(self, fig) -> bytes:
        return self._call(self.kaleido.calc_fig(fig, opts=dict(format="json")), timeout=120)

    def write(self, items: list[dict]) -> None:
        self._call(self.kaleido.write_fig_from_object(items, cancel_on_error=True), timeout=60 + 30 * len(items))

    def _stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def close(self):
        try:
            self._call(self.kaleido.close(), timeout=20)
        finally:
            self._stop()


def _has_cjk(fig) -> bool:
    """Whether a text the figure draws (trace texts, tick labels, titles, annotations) is in a CJK script."""
    texts = [str(v) for t in fig.data for key in ("text", "x", "y", "name") if key in t and t[key] is not None
             for v in (t[key] if isinstance(t[key], (list, tuple)) or hasattr(t[key], "tolist") else [t[key]])]
    texts += [str(a.text) for a in fig.layout.annotations if a.text]
    return any(ord(ch) >= 0x2E80 for text in texts for ch in text)


def cjk_font_available() -> bool | None:
    """Whether fontconfig (what the browser draws with) has a font for Chinese text; None where it cannot say."""
    import shutil
    import subprocess

    if shutil.which("fc-list") is None:
        return None
    try:
        return bool(subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True,
                                   timeout=20).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None


def _note_cjk(fig, stem: Path) -> None:
    """One note per process when a static figure has CJK text that no installed font draws (it would print boxes)."""
    global _cjk_noted
    if not _cjk_noted and _has_cjk(fig) and cjk_font_available() is False:
        _cjk_noted = True
        print(f"poslens: note: {stem.name} has Chinese / Japanese / Korean text and no font here draws it, so its "
              f"PDF / SVG / PNG show empty boxes in their place (the HTML uses the reader's fonts): {CJK_ADVICE}",
              file=sys.stderr)


_browser: _Browser | None = None
_lock = threading.Lock()


def _session() -> _Browser:
    global _browser
    with _lock:
        path = find_browser()
        if path is None:
            raise BrowserMissing(f"static export needs a browser and none was found: {BROWSER_ADVICE}")
        if _browser is None or _browser.path != path:
            close_browser()
            _browser = _Browser(path)
        return _browser


def close_browser() -> None:
    """Stop the shared browser (it also stops at exit)."""
    global _browser
    if _browser is not None:
        b, _browser = _browser, None
        b.close()


atexit.register(close_browser)


def laid_out(fig):
    """The figure as plotly.js lays it out (every default filled in: axis ranges, domains), computed by this process'
    browser: what ``plotly.io.full_figure_for_development`` gives, without starting a browser per figure."""
    import json

    import plotly.graph_objects as go

    return go.Figure(json.loads(_session().calc(fig).decode("utf-8")), skip_invalid=True)


_PLOTLYJS: contextvars.ContextVar[str] = contextvars.ContextVar("poslens_plotlyjs", default="inline")


@contextlib.contextmanager
def shared_plotlyjs():
    """HTML written inside this block loads ``plotly.min.js`` from its folder (one copy for a report's many
    figures) instead of carrying it inline (a figure alone opens anywhere, offline)."""
    token = _PLOTLYJS.set("directory")
    try:
        yield
    finally:
        _PLOTLYJS.reset(token)


def save(fig, stem, formats=None, *, width: float | None = None, height: float | None = None,
         scale: float | None = None) -> list[Path]:
    """Write ``stem.<format>`` for each format; returns the paths written, in the order asked.

    ``formats=None`` is the default set (``resolve_formats``): there a failing browser only warns, since the
    HTML is written; formats asked for must all be written or this raises.
    ``width``/``height`` are CSS pixels (96 per inch; a PDF page is ``width * 0.75`` pt wide); PNG is rendered
    at ``scale`` (default 2, or 300 dpi when a width is given). HTML carries plotly.js inline, so one figure opens
    on its own; inside ``shared_plotlyjs()`` (the report) it loads one ``plotly.min.js`` beside it.
    """
    default = formats is None
    formats = resolve_formats() if default else parse_formats(formats)
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written, items = [], []
    for fmt in formats:
        path = stem.parent / f"{stem.name}.{fmt}"
        if fmt == "html":
            fig.write_html(path, include_plotlyjs=_PLOTLYJS.get(), full_html=True)
        else:
            opts = {"format": fmt, "width": width or fig.layout.width or 700,
                    "height": height or fig.layout.height or 500}
            if fmt == "png":
                opts["scale"] = scale or (300 / 96 if width else 2)
            items.append({"fig": fig, "path": path, "opts": opts})
        written.append(path)
    if items:
        _note_cjk(fig, stem)
        try:
            _session().write(items)
            missing = [i["path"].name for i in items if not i["path"].is_file()]
            if missing:
                raise RuntimeError(f"kaleido wrote no {', '.join(missing)}")
        except Exception as err:
            if not default:
                raise RuntimeError(f"static export of {stem.name} failed: {err}") from err
            warnings.warn(f"static export of {stem.name} failed ({err}); kept {stem.name}.html", stacklevel=2)
            return [p for p in written if p.suffix == ".html"]
    return written
