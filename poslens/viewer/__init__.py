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
level for the rows that fit in ``page_mb``, ``page.plan_rows``), shows in Jupyter (``_repr_html_``: an iframe of the
same page) and serves live (``View.serve``: 127.0.0.1 only, the model kept loaded, any block's rows computed on click
from the queries and keys one recording pass kept at start-up, ``data.Recorded``, or by a pass per click where a family
cannot be recorded). Its ``repr`` is a line (models, length, statistics, size), not the data; building says its
steps on stderr as ``analyze`` does (``interp.runtime.progress``).
"""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from poslens.viewer.errors import ViewerError

__all__ = ["View", "ViewerError", "view"]


@dataclass(repr=False)
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

    def __repr__(self) -> str:
        """One line: the models, length, statistics, blocks holding rows and the page's size; never the data."""
        ms = self.data["models"]
        held = sum(len(m["precomputed"]) for m in ms)
        names = ", ".join("{name} {n_layers}x{n_heads}".format(**m) for m in ms)
        lengths = ", ".join(sorted({"{length} tokens in {n_blocks} blocks of {block}".format(**m) for m in ms}))
        line = (f"View({names}; {lengths}"
                + f"; {len(self.data['stats'])} statistics; rows of {held}/{sum(m['n_blocks'] for m in ms)} blocks; "
                f"page {len(self.html.encode('utf-8')) / 1e3:,.0f} kB")
        return line + (f"; serving {self.url})" if self.server is not None else ")")

    def save(self, path, force: bool = False) -> Path:
        """The self-contained page (grid, curves, pooled patterns, the rows within its budget), written atomically;
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


def _models_of(models, found):
    if models is None:
        if found is None:
            raise ViewerError("view: give a model (--model) or a results folder (--results)")
        models = found.models
    return [models] if isinstance(models, str) or not isinstance(models, (list, tuple)) else list(models)


def _check(block, length, page_mb) -> None:
    if block is not None and int(block) < 1:
        raise ViewerError(f"--block {block}: expected a positive number of tokens")
    if length is not None and int(length) < 2:
        raise ViewerError(f"--length {length}: expected at least 2 tokens")
    if page_mb is not None and not float(page_mb) >= 0:
        raise ViewerError(f"--page-mb {page_mb}: expected a size in MB, 0 or more")


def _statistics(given, text, length, block, found, timings):
    """Load ``given``, read its ids and run the statistics pass: ``(model, ids, ModelView)`` (no token rows yet)."""
    from interp.runtime.progress import layers, stage
    from poslens.viewer.data import head_data
    from poslens.viewer.page import ModelView

    with stage(f"view: loading {given if isinstance(given, str) else given.model_name}"):
        model = _load(given)
    ids = _ids(model, text, length)  # a length past the context is said before the forward pass
    t0 = time.perf_counter()
    with layers(model, f"view: {model.model_name} statistics of every head at {len(ids):,} tokens") as bar:
        heads = head_data(model, ids, block)
        bar.update(model.n_layers - bar.n)  # the pass stops at the last attention, before its block's end
    timings[f"{model.model_name} statistics s"] = time.perf_counter() - t0
    v = ModelView(model.model_name, model.n_layers, model.n_heads, _token_strings(model, ids), heads)
    if found is not None:
        v.csv_grid, v.csv_curves, v.csv_label = (found.grid(model.model_name), found.curves(model.model_name),
                                                 found.analysis)
    return model, ids, v


def _fill_rows(built, page_mb: float, title: str, timings) -> dict:
    """Give each model the token rows that fit in what the page's ``page_mb`` leaves after the rest, shared by
    heads; the budget ``{"page_mb", "needs_mb"}`` (``needs_mb``: a budget in which every block holds rows)."""
    from interp.runtime.progress import stage
    from poslens.viewer.data import token_level
    from poslens.viewer.page import full_bytes, payload, plan_rows, render

    views = [v for _, _, v in built]
    base = len(render(payload(views, title=title)).encode("utf-8"))
    heads = [v.n_layers * v.n_heads for v in views]
    left = max(0.0, page_mb * 1e6 - base)
    for (model, ids, v), share in zip(built, heads):
        plan = plan_rows(v.heads.n, v.heads.block, share, left * share / sum(heads))
        rows = [q for b in plan for q in plan[b]]
        t0 = time.perf_counter()
        with stage(f"view: {v.name} token rows of {len(plan)}/{v.heads.n_blocks} blocks ({len(rows):,} query rows)"):
            v.rows = token_level(model, ids, rows, range(v.n_layers), range(v.n_heads)) if rows else {}
        v.precomputed = sorted(plan)
        timings[f"{v.name} token rows s"] = time.perf_counter() - t0
    need = base + sum(full_bytes(v.heads.n, v.heads.block, h) for v, h in zip(views, heads))
    return {"page_mb": page_mb, "needs_mb": math.ceil(need / 1e6)}


def view(models=None, *, text=None, results=None, length: int | None = None, block: int | None = None,
         page_mb: float | None = None, out=None, force: bool = False, serve: bool = False, port: int = 0,
         server=None, title: str = "") -> View:
    """Build the viewer for ``models`` (registry names, paths or loaded models; default: the models of ``results``)
    on ``text`` (a string, token ids, or None for the built-in Wikipedia window) at ``length`` tokens (default each
    model's context). ``results``: the folder of a head-profiles, along-context, sink-rate or attention-window run,
    whose CSV columns join the grid's menu. ``block``: query rows and keys per block (default ``data.default_block``).
    ``page_mb``: the saved page's size budget in MB (default ``page.PAGE_MB``), which the token rows fill
    (``page.plan_rows``). ``out``: write the page there (a file there that poslens did not write is kept, named before
    any model loads, unless ``force``). ``serve``: serve it live on 127.0.0.1:``port`` (bound before any model
    loads)."""
    from poslens.viewer.page import PAGE_MB, payload, writable
    from poslens.viewer.results import read_results
    from poslens.viewer.server import bind

    found = read_results(results) if results is not None else None
    models = _models_of(models, found)
    _check(block, length, page_mb)
    page_mb = PAGE_MB if page_mb is None else float(page_mb)
    if out is not None:
        writable(out, force)
    if serve and server is None:
        server = bind(port)  # a port in use is said before anything loads
    try:
        timings = {}
        built = [_statistics(given, text, length, block, found, timings) for given in models]
        views = [v for _, _, v in built]
        if not title:
            title = (f"{', '.join(v.name for v in views)}" + (f"; results: {found.analysis} ({found.folder})"
                                                             if found is not None else ""))
        budget = _fill_rows(built, page_mb, title, timings)
        result = View(payload(views, title=title, budget=budget), [m for m, _, _ in built],
                      [i for _, i, _ in built], found.folder if found else None, timings)
        if out is not None:
            result.save(out, force)
        if serve:
            result.serve(server=server)
        return result
    except BaseException:
        if server is not None and serve:
            server.server_close()
        raise
