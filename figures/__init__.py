"""Plotly figures, one module per analysis: ``figures.<name>.figure(df) -> go.Figure``; a figure that lays itself out
differently in a narrow column takes ``width=`` too (the px it is drawn at, None on a screen).

``render(name, df, template=, width=, title=)`` builds an analysis' figure from its table (the CSV is enough),
``save(fig, stem, formats)`` writes HTML (plotly.js inline, or once per folder in ``shared_plotlyjs()``: both work
offline) and PDF / SVG / PNG through kaleido, ``rerender(csv, ...)`` does both for a saved result (``poslens figure``).
"""

from figures.render import read_result, read_table, render, rerender
from figures.save import (
    BrowserMissing,
    close_browser,
    find_browser,
    find_chrome,
    parse_formats,
    resolve_formats,
    save,
    shared_plotlyjs,
)

__all__ = ["save", "shared_plotlyjs", "render", "rerender", "read_result", "read_table", "find_browser",
           "find_chrome", "resolve_formats", "parse_formats", "close_browser", "BrowserMissing"]
