"""The head viewer at any length: from the head grid of several models to the tokens one head reads.

``view(models, text=..., results=..., length=...)`` (``poslens view`` on the command line) runs each model once over
one text at its full context (or ``length``) and builds a page of three levels (``poslens.viewer.data`` says what each
number is):

1. **the head grid**: layers x heads per model, side by side on one colour scale, coloured by a statistic picked from a
   menu (first-token, previous-token, window and far mass, entropy, mean distance; plus the columns of a results
   folder's CSV, copied as written: ``poslens.viewer.results``);
2. **one head**: its statistics per block of query rows along the context and its exact block-pooled pattern (the
   mean of the pattern's entries over each block of query rows and block of keys, from span masses of every row:
   never a ``[q, k]`` matrix);
3. **the tokens**: a block's query rows, their exact pattern rows bounded to the ``TOP_KEYS`` heaviest keys and the
   ``BEFORE`` keys ending at the query, over the text, a hover giving a key's weight and position.

A ``View`` saves as one self-contained HTML file (``View.save``: opens from disk, no server, no network; the token
level for ``PRECOMPUTED_BLOCKS`` blocks), shows in Jupyter (``_repr_html_``: an iframe of the same page) and serves
live (``View.serve``: 127.0.0.1 only, the model kept loaded, any block's rows computed on click from the queries
and keys one recording pass kept at start-up, ``data.Recorded``, or by a pass per click where a family cannot be
recorded).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path

from poslens.viewer.errors import ViewerError

__all__ = ["View", "ViewerError", "view"]


@dataclass
class View:
    """A built page: ``data`` (what the page holds), the loaded ``models`` and their token ``ids``."""

    data: dict
    models: list
    ids: list
    folder: Path | None = None
    timings: dict = field(default_factory=dict)
    server: object = None

    @property
    def html(self) -> str:
        from poslens.viewer.page import render

        return render(self.data)

    def save(self, path, force: bool = False) -> Path:
        """The self-contained page (grid, curves, pooled patterns, the precomputed blocks' rows), written atomically;
        a file there that ``poslens view`` did not write is kept unless ``force``."""
        from poslens.viewer.page import write

        return write(path, self.data, force)

    def serve(self, port: int = 0, *, server=None):
        """Serve live on 127.0.0.1 (``port`` 0: one the OS picks) in a background thread; ``stop()`` ends it."""
        from poslens.viewer.server import Live, bind, start

        self.server = server or bind(port)
        start(self.server, Live(self.data, self.models, self.ids, self.folder))
        return self

    @property
    def url(self) -> str | None:
        from poslens.viewer.server import url_of

        return None if self.server is None else url_of(self.server)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def _repr_html_(self) -> str:
        """Jupyter: an iframe of the live page where it is served, else of the page itself (``srcdoc``)."""
        if self.server is not None:
            return f'<iframe src="{self.url}" style="width:100%;height:900px;border:0"></iframe>'
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
                'style="width:100%;height:900px;border:0"></iframe>')


def _load(model):
    if not isinstance(model, str):
        return model
    from interp.loading import load

    return load(model)


def _ids(model, text, length: int | None) -> list[int]:
    """The token ids the model reads: ``text`` (a string, or token ids) or the built-in Wikipedia window, at
    ``length`` tokens (default: the model's context), refused past the model's context."""
    limit = int(model.max_seq_len)
    if length is not None and not 2 <= int(length) <= limit:
        raise ViewerError(f"--length {length}: {model.model_name} takes 2 to {limit} tokens")
    n = int(length) if length is not None else limit
    if text is None:
        from corpora.contexts import wikipedia_windows

        ids = wikipedia_windows(model.require_tokenizer("view"), 1, n)[0].ids
    elif isinstance(text, str):
        ids = model.require_tokenizer("view").encode(text, doc_start=True)[:n]
    else:
        ids = [int(i) for i in text]
        if len(ids) > limit:
            raise ViewerError(f"{len(ids)} token ids given: {model.model_name} takes 2 to {limit} tokens")
        ids = ids[:n]
    if len(ids) < 2:
        raise ViewerError("the viewer needs a text of at least 2 tokens")
    return ids


def _token_strings(model, ids) -> list[str]:
    """Each token as the text it stands for (``decode`` of that id alone: a space, not BPE's "Ġ" or "▁"); the
    tokenizer's own piece where that alone is not whole text (part of a UTF-8 character: "\ufffd")."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return [f"#{i}" for i in ids]
    pieces = [str(s) for s in tok.token_strings(ids)] if hasattr(tok, "token_strings") else [f"#{i}" for i in ids]
    if not hasattr(tok, "decode"):
        return pieces
    seen: dict[int, str] = {}
    out = []
    for i, piece in zip(ids, pieces):
        if i not in seen:
            text = tok.decode([i])
            seen[i] = text if text and "\ufffd" not in text else piece
        out.append(seen[i])
    return out


def view(models=None, *, text=None, results=None, length: int | None = None, block: int | None = None,
         precompute: int | None = None, out=None, force: bool = False, serve: bool = False, port: int = 0,
         server=None, title: str = "") -> View:
    """Build the viewer for ``models`` (registry names, paths or loaded models; default: the models of ``results``)
    on ``text`` (a string, token ids, or None for the built-in Wikipedia window) at ``length`` tokens (default each
    model's context). ``results``: the folder of a head-profiles, along-context, sink-rate or attention-window run,
    whose CSV columns join the grid's menu. ``block``: query rows and keys per block (default ``data.default_block``).
    ``precompute``: blocks whose rows the file holds. ``out``: write the page there (a file there that poslens did not
    write is kept, named before any model loads, unless ``force``). ``serve``: serve it live on
    127.0.0.1:``port`` (bound before any model loads)."""
    from poslens.viewer.data import block_rows, head_data, token_level
    from poslens.viewer.page import PRECOMPUTED_BLOCKS, ModelView, payload, precomputed_blocks, writable
    from poslens.viewer.results import read_results
    from poslens.viewer.server import bind

    found = read_results(results) if results is not None else None
    if models is None:
        if found is None:
            raise ViewerError("view: give a model (--model) or a results folder (--results)")
        models = found.models
    models = [models] if isinstance(models, str) or not isinstance(models, (list, tuple)) else list(models)
    if block is not None and int(block) < 1:
        raise ViewerError(f"--block {block}: expected a positive number of tokens")
    if length is not None and int(length) < 2:
        raise ViewerError(f"--length {length}: expected at least 2 tokens")
    if out is not None:
        writable(out, force)
    if serve and server is None:
        server = bind(port)  # a port in use is said before anything loads
    try:
        views, loaded, all_ids, timings = [], [], [], {}
        for given in models:
            model = _load(given)
            ids = _ids(model, text, length)  # a length past the context is said before the forward pass
            t0 = time.perf_counter()
            heads = head_data(model, ids, block)
            timings[f"{model.model_name} statistics s"] = time.perf_counter() - t0
            blocks = precomputed_blocks(heads.n_blocks, PRECOMPUTED_BLOCKS if precompute is None else precompute)
            rows = [q for b in blocks for q in block_rows(heads.n, heads.block, b)]
            t0 = time.perf_counter()
            got = token_level(model, ids, rows, range(model.n_layers), range(model.n_heads)) if rows else {}
            timings[f"{model.model_name} token rows s"] = time.perf_counter() - t0
            v = ModelView(model.model_name, model.n_layers, model.n_heads, _token_strings(model, ids), heads, got,
                          blocks)
            if found is not None:
                v.csv_grid, v.csv_curves, v.csv_label = found.grid(model.model_name), found.curves(
                    model.model_name), found.analysis
            views.append(v)
            loaded.append(model)
            all_ids.append(ids)
        if not title:
            title = (f"{', '.join(v.name for v in views)}" + (f"; results: {found.analysis} ({found.folder})"
                                                             if found is not None else ""))
        result = View(payload(views, title=title), loaded, all_ids, found.folder if found else None, timings)
        if out is not None:
            result.save(out, force)
        if serve:
            result.serve(server=server)
        return result
    except BaseException:
        if server is not None and serve:
            server.server_close()
        raise
