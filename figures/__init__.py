"""Plotly figures, one module per analysis: ``figures.<name>.figure(df) -> go.Figure``.

``save(fig, stem)`` always writes interactive HTML (plotly.js written once per folder, so reports work
offline) and also PNG and PDF when a Chrome or Chromium is found for kaleido.
"""

from figures.save import find_chrome, save

__all__ = ["save", "find_chrome"]
