"""``poslens view --serve``: the page and a block's rows on demand, from a model kept loaded, on 127.0.0.1 only.

Routes (GET only): ``/`` the page (live: a click on any block asks ``api/rows``); ``/api/rows?model=I&layer=L&head=H&
block=B`` that block's rows for every head of that layer, cached: computed from the recording the server made at start
(``data.Recorded``: one forward pass that kept every layer's queries and keys, so a click costs a ``[rows, keys]``
product), or, for a model whose attention a recording cannot serve exactly (an additive bias such as the DSTG encoder's
relative-position bias, given scores, hooked patterns), by a forward pass up to the block per click
(``data.token_level``); ``/files/PATH`` a file inside
the results folder (a path that is absolute, holds ``..`` or resolves outside the folder is refused with 403). Anything
else is 404. The socket is bound before any model loads, so a port in use is said first.
"""

from __future__ import annotations

import errno
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs, unquote, urlsplit

from poslens.viewer.errors import ViewerError

HOST = "127.0.0.1"


def bind(port: int = 0) -> HTTPServer:
    """An HTTP server bound to 127.0.0.1:``port`` (0: one the OS picks), not yet serving."""
    if not 0 <= int(port) <= 65535:
        raise ViewerError(f"--port {port}: expected 0..65535")
    try:
        return HTTPServer((HOST, int(port)), _Handler)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ViewerError(f"--port {port}: in use on {HOST}; give another port, or 0 for one the OS "
                              "picks") from None
        raise


def inside(folder: Path | None, path: str) -> Path | None:
    """``path`` (as a URL gave it) as a file inside ``folder``, or None where it is absolute, climbs out (``..``),
    resolves outside the folder (a link) or is no file."""
    if folder is None:
        return None
    text = unquote(path)
    pure = PurePosixPath(text)
    if not text or "\\" in text or pure.is_absolute() or ".." in pure.parts or "\x00" in text:
        return None
    root = Path(folder).resolve()
    target = (root / pure).resolve()
    if target != root and root not in target.parents:
        return None
    return target if target.is_file() else None


class Live:
    """What the running server answers from: the page's data, the loaded models and their token ids."""

    def __init__(self, data: dict, models: list, ids: list, folder: Path | None):
        self.data, self.models, self.ids, self.folder = data, models, ids, folder
        self.lock = threading.Lock()
        self.cache: dict = {}
        self.recorded = [self._record(m, ids_) for m, ids_ in zip(models, ids)]
        from poslens.viewer.page import render

        self.page = render(dict(data, live=True)).encode("utf-8")

    @staticmethod
    def _record(model, ids):
        """The model's recording (``data.Recorded``), or None where its attention cannot be served from one (a click
        then runs the text up to the block through the model, ``data.token_level``). A recording that does not fit in
        memory is said (``MemoryError``), not skipped."""
        from poslens.viewer.data import NotRecordable, Recorded

        try:
            return Recorded.record(model, ids)
        except NotRecordable:
            return None

    def rows(self, i: int, layer: int, block: int) -> dict:
        from poslens.viewer.data import block_rows, recorded_token_level, token_level
        from poslens.viewer.page import rows_json

        m, meta = self.models[i], self.data["models"][i]
        if not 0 <= layer < meta["n_layers"]:
            raise ViewerError(f"layer {layer} outside 0..{meta['n_layers'] - 1}")
        if not 0 <= block < meta["n_blocks"]:
            raise ViewerError(f"block {block} outside 0..{meta['n_blocks'] - 1}")
        key = (i, layer, block)
        with self.lock:
            if key not in self.cache:
                rows = block_rows(meta["length"], meta["block"], block)
                if self.recorded[i] is not None:
                    got = recorded_token_level(self.recorded[i], rows, [layer], range(meta["n_heads"]))
                else:
                    got = token_level(m, self.ids[i], rows, [layer], range(meta["n_heads"]))
                self.cache[key] = rows_json(got, meta["block"])
        return self.cache[key]


class _Handler(BaseHTTPRequestHandler):
    server_version = "poslens-view"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _text(self, code: int, text: str) -> None:
        self._send(code, text.encode("utf-8"), "text/plain; charset=utf-8")

    def do_GET(self):  # noqa: N802 (http.server's name)
        live: Live = self.server.live
        port = self.server.server_address[1]
        if self.headers.get("Host") not in (f"{HOST}:{port}", f"localhost:{port}"):  # a rebound name is not ours
            return self._text(403, "this server answers requests to the loopback address only")
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            return self._send(200, live.page, "text/html; charset=utf-8")
        if url.path == "/api/rows":
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                i, layer, block = int(q["model"]), int(q["layer"]), int(q["block"])
                if not 0 <= i < len(live.models):
                    raise ViewerError(f"model {i} outside 0..{len(live.models) - 1}")
                rows = live.rows(i, layer, block)
            except (KeyError, ValueError) as err:
                return self._text(400, f"api/rows?model=I&layer=L&head=H&block=B: {err}")
            return self._send(200, json.dumps({"rows": rows}).encode("utf-8"), "application/json")
        if url.path.startswith("/files/"):
            target = inside(live.folder, url.path[len("/files/"):])
            if target is None:
                return self._text(403, "only files inside the results folder are served")
            kind = {".csv": "text/csv", ".json": "application/json", ".html": "text/html",
                    ".png": "image/png"}.get(target.suffix, "application/octet-stream")
            return self._send(200, target.read_bytes(), kind)
        return self._text(404, "not found")


def start(server: HTTPServer, live: Live) -> threading.Thread:
    """Serve in a daemon thread; ``server.shutdown()`` stops it."""
    server.live = live
    thread = threading.Thread(target=server.serve_forever, name="poslens-view", daemon=True)
    thread.start()
    return thread


def url_of(server: HTTPServer) -> str:
    return f"http://{HOST}:{server.server_address[1]}/"
