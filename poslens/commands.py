"""``poslens analyze NAME ...`` (one sub-command per registered analysis) and ``poslens reproduce``."""

from __future__ import annotations

import argparse


def add_analysis_commands(sub) -> None:
    from analyses import all_analyses
    from poslens import merge

    a = sub.add_parser("analyze", help="run one analysis: CSV + figure + provenance")
    names = a.add_subparsers(dest="analysis", required=True, metavar="NAME")
    for analysis in all_analyses():
        p = names.add_parser(analysis.name, help=analysis.summary.split(":")[0].replace("%", "%%"), description=analysis.summary)
        p.add_argument("--model", action="append", required=True, metavar="NAME_OR_PATH",
                       help="registry name, poslens directory or upstream checkpoint (repeatable)")
        p.add_argument("--out", required=True, help="output folder")
        p.add_argument("--force", action="store_true", help="overwrite this analysis' earlier results in --out")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--device", default=None, help="torch device to run the models on (cpu, cuda, ...)")
        for opt in analysis.options:
            flag = "--" + opt.name.replace("_", "-")
            text = opt.help.replace("%", "%%")  # argparse %-formats help strings
            kw = dict(help=text, choices=opt.choices)
            if opt.type is bool:
                p.add_argument(flag, action="store_true", help=text)
            elif opt.multiple:
                p.add_argument(flag, action="append", type=opt.type, default=None, **kw)
            else:
                p.add_argument(flag, type=opt.type, default=opt.default, **kw)
        merge.add_shard_arguments(p)
        p.set_defaults(func=cmd_analyze, spec=analysis)

    r = sub.add_parser("reproduce", help="the main job: every analysis on the bundled models, with an index.html")
    r.add_argument("--out", default="results", help="results folder (default: results)")
    r.add_argument("--force", action="store_true", help="overwrite an earlier report in --out")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--quick", action="store_true", help="smaller samples (for tests)")
    r.add_argument("--device", default=None, help="torch device to run the models on (cpu, cuda, ...)")
    r.set_defaults(func=cmd_reproduce)
    merge.add_merge_command(sub)


def cmd_analyze(args: argparse.Namespace) -> int:
    from poslens.merge import analysis_session
    from poslens.run import run_analysis

    spec = args.spec
    options = {}
    for opt in spec.options:
        value = getattr(args, opt.name)
        if opt.name in spec.convert:
            options.update(spec.convert[opt.name](value))
        elif value is not None:
            options[opt.name] = value
    with analysis_session(args, spec.name, options):
        result = run_analysis(spec.name, args.model, args.out, options=options, seed=args.seed, force=args.force,
                              device=args.device)
    if not result.files:
        return 0  # a torchrun rank > 0 or one --shard I/N: rank 0 / `poslens merge` writes the outputs
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 20):
        print(result.table.head(40).to_string(index=False))
    print("wrote " + ", ".join(str(p) for p in result.files))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from poslens.reproduce import reproduce

    reproduce(args.out, seed=args.seed, force=args.force, quick=args.quick, device=args.device)
    return 0
