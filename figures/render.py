"""Figures from saved results: ``render(name, df)`` and ``rerender(OUT/NAME.csv, ...)`` (``poslens figure``).

An analysis' CSV carries everything its figure needs, so a figure is rebuilt at another size, template or format
without loading a model (and without importing torch). ``NAME.provenance.json`` beside the CSV names the
analysis and its models. The CSV is read as written: only empty fields are missing values (a token "NA" stays
text), floats round-trip exactly.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import inspect
import json
import pkgutil
from pathlib import Path

import pandas as pd

import figures
from figures.layout import TooSmall, fit
from figures.save import parse_length, resolve_formats, save
from figures.style import PAPER, PAPER_TEXT_PX, TEMPLATES
from stats import units

NOT_FIGURES = {"layout", "render", "save", "style"}


def known() -> list[str]:
    """Analysis names that have a figure (module ``figures.<name with _>``)."""
    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(figures.__path__) if m.name not in NOT_FIGURES)


def figure_module(name: str):
    if name.replace("_", "-") not in known():
        raise ValueError(f"no figure for '{name}' (known: {', '.join(known())})")
    return importlib.import_module(f"figures.{name.replace('-', '_')}")


def render(name: str, df: pd.DataFrame, *, template: str = "default", title: str | None = None,
           width: float | str | None = None, height: float | str | None = None, units: pd.DataFrame | None = None):
    """The figure of analysis ``name`` for its table ``df`` (and its unit-level values ``units``, for a figure that
    draws intervals over them: one whose ``figure`` takes ``units=``).

    ``width`` and ``height`` are lengths ("3.3in", "7in", "8cm", px); with only a width, the height keeps the
    figure's aspect (paper: the height its content needs). ``template="paper"`` applies ``poslens-paper``, drops the
    title (unless ``title`` is given) and lays the figure out for its printed width (``figures.layout.fit``): titles
    wrapped to their panels, gaps that hold their tick labels and titles, tables and ternaries sized to their content,
    texts placed by their data sized to their spacing and, without a height, the height the content needs, at most a
    page (9 in) where the panels can shrink to it. A height too small for the texts and panels is refused with the least
    that fits. A figure whose ``figure`` takes ``width=`` is given the width in px (None without one), to lay itself
    out for it.
    """
    if template not in TEMPLATES:
        raise ValueError(f"--template {template!r}: expected one of {', '.join(TEMPLATES)}")
    w = parse_length(width, "--width") if width is not None else None
    h = parse_length(height, "--height") if height is not None else None
    draw = figure_module(name).figure
    takes = inspect.signature(draw).parameters
    fig = draw(df, **({"width": w} if "width" in takes else {}), **({"units": units} if "units" in takes else {}))
    if template == "paper":
        fig.update_layout(template=PAPER, title_text=title)
        if fig.layout.legend.y is None:  # a figure that placed its legend (below ternaries, say) keeps it there
            fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=1.02, yanchor="bottom"))
        fig.update_annotations(font_size=PAPER_TEXT_PX)
        own_w, own_h = fig.layout.width or 700, fig.layout.height or 500
        try:
            fit(fig, w or own_w, h, base_height=max(own_h * w / own_w, 0.5 * w) if w else own_h)
        except TooSmall as err:
            raise ValueError(f"--height {height}: too small for the {name} figure at {(w or own_w) / 96:.2f} in wide; "
                             f"its titles, labels and panels need at least {err.need / 96:.2f} in "
                             f"({err.need:.0f} px)") from None
        if title:
            fig.update_layout(margin_t=fig.layout.margin.t + 24, height=fig.layout.height + (0 if h else 24))
        return fig
    if title is not None:
        fig.update_layout(title_text=title)
    if w is not None and h is None:
        h = max((fig.layout.height or 500) * w / (fig.layout.width or 700), 0.5 * w)
    if w is not None:
        fig.update_layout(width=w)
    if h is not None:
        fig.update_layout(height=h)
    return fig


def read_table(csv) -> pd.DataFrame:
    """An analysis CSV as the figure saw it (exact floats; only empty fields are missing)."""
    return pd.read_csv(csv, keep_default_na=False, na_values=[""], float_precision="round_trip")


def read_result(csv, analysis: str | None = None) -> tuple[str, pd.DataFrame, dict]:
    """``(analysis name, table, provenance)`` of ``OUT/NAME.csv``; the name comes from ``NAME.provenance.json``."""
    csv = Path(csv)
    if not csv.is_file():
        raise FileNotFoundError(f"{csv}: no such file (give the CSV that `poslens analyze` wrote)")
    prov_path = csv.with_name(csv.name[: -len(csv.suffix)] + ".provenance.json")
    prov = {}
    if prov_path.is_file():
        try:
            prov = json.loads(prov_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{prov_path}: not valid JSON ({err})") from None
    name = analysis or prov.get("analysis") or csv.stem
    figure_module(name) if analysis or prov else _known_or_advise(name, csv)
    try:
        df = read_table(csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{csv}: not a readable CSV ({err})") from None
    if "model" not in df.columns:
        raise ValueError(f"{csv}: no 'model' column; not a table written by `poslens analyze`")
    return name, df, prov


def missing_column(csv, name: str, column, prov: dict) -> str:
    """The error for a table without a column its figure reads: a CSV of another poslens version, whose columns have
    since been renamed (CHANGELOG.md's migration tables say how)."""
    wrote = (prov.get("versions") or {}).get("poslens")
    try:
        now = md.version("poslens")
    except md.PackageNotFoundError:
        now = None
    who = f"poslens {wrote}" if wrote else "a poslens whose version its provenance does not record"
    return (f"{csv}: the {name} figure reads column {column!r}, which this table lacks; it was written by {who}"
            f"{f' (this is poslens {now})' if now else ''}. Re-run `poslens analyze {name}`, or rename its columns "
            "as CHANGELOG.md's migration table says")


def _known_or_advise(name: str, csv: Path) -> None:
    if name.replace("_", "-") not in known():
        raise ValueError(f"{csv}: no {csv.stem}.provenance.json beside it and '{name}' is not an analysis; "
                         f"pass --analysis NAME (known: {', '.join(known())})")


def output_stem(csv: Path, out, template: str, width, height) -> Path:
    """``OUT/NAME[-paper][-3.3in][x2in]``: a re-rendered figure never takes the analysis' own file names by chance."""
    label = "-".join(p for p in (template if template != "default" else "",
                                 str(width).replace(" ", "") if width is not None else "") if p)
    if height is not None:
        label += f"x{str(height).replace(' ', '')}"
    folder = Path(out) if out is not None else csv.parent
    return folder / (f"{csv.stem}-{label}" if label else csv.stem)


def rerender(csv, *, formats=None, width=None, height=None, template: str = "default", title: str | None = None,
             out=None, force: bool = False, analysis: str | None = None) -> list[Path]:
    """Rebuild the figure of ``csv`` and write it in ``formats``; refuses to overwrite a file unless ``force``."""
    csv = Path(csv)
    formats = resolve_formats(formats)
    name, df, prov = read_result(csv, analysis)
    try:
        fig = render(name, df, template=template, title=title, width=width, height=height, units=units.read(csv))
    except KeyError as err:
        raise ValueError(missing_column(csv, name, err.args[0], prov)) from None
    stem = output_stem(csv, out, template, width, height)
    targets = [stem.parent / f"{stem.name}.{f}" for f in formats]
    clash = [p for p in targets if p.exists()]
    if clash and not force:
        verb = "exists" if len(clash) == 1 else "exist"
        raise FileExistsError(f"{', '.join(str(p) for p in clash)} already {verb}; pass --force to overwrite, "
                              "or --out DIR")
    w = fig.layout.width if width is not None else None
    return save(fig, stem, formats, width=w, height=fig.layout.height if w else None)
