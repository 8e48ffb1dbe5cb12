"""``poslens figure OUT/NAME.csv``: re-render a saved result's figure (size, template, formats) without a model."""

from __future__ import annotations

import argparse


def add_figure_command(sub) -> None:
    f = sub.add_parser("figure", help="re-render a saved result's figure (PDF/SVG/PNG at a column's width) "
                                      "from its CSV",
                       description="Rebuild the figure of OUT/NAME.csv (analysis and models from NAME.provenance.json "
                                   "beside it) without loading a model. Files are named "
                                   "NAME[-TEMPLATE][-WIDTH].FORMAT.")
    f.add_argument("csv", help="a CSV written by `poslens analyze` or `poslens reproduce`")
    f.add_argument("--format", default=None, metavar="FORMATS",
                   help="any of html,pdf,svg,png, comma-separated (default: html, plus pdf,png where a browser "
                        "is found)")
    f.add_argument("--width", default=None, help="figure width: 3.3in (single column), 7in (double), 8.5cm, 600px")
    f.add_argument("--height", default=None, help="figure height (default: the figure's aspect at that width; "
                   "--template paper: the height its content needs)")
    f.add_argument("--template", default="default", choices=("default", "paper"),
                   help="paper: print fonts, colour-blind-safe colours, no title (default: the report's look)")
    f.add_argument("--title", default=None, help="a title to draw (the paper template draws none otherwise)")
    f.add_argument("--analysis", default=None, help="the analysis, where no NAME.provenance.json is beside the CSV")
    f.add_argument("--out", default=None, help="output folder (default: the CSV's folder)")
    f.add_argument("--force", action="store_true", help="overwrite figure files of the same name")
    f.set_defaults(func=cmd_figure)


def figure_parser(description: str) -> argparse.ArgumentParser:
    """``poslens`` with the ``figure`` sub-command only (what ``poslens figure ...`` parses)."""
    p = argparse.ArgumentParser(prog="poslens", description=description)
    add_figure_command(p.add_subparsers(dest="command", required=True))
    return p


def cmd_figure(args: argparse.Namespace) -> int:
    from figures.render import rerender

    written = rerender(args.csv, formats=args.format, width=args.width, height=args.height, template=args.template,
                       title=args.title, out=args.out, force=args.force, analysis=args.analysis)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
