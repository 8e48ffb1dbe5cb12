"""``poslens analyze NAME ...`` (one sub-command per registered analysis) and ``poslens reproduce``.

The parser is built from the declarations alone (``analyses.registry``), so ``--help`` imports no torch.
Every option is checked before any model loads: its value against its declaration here, then against each
model right after it loads (``Analysis.bind``), before the analysis runs.
"""

from __future__ import annotations

import argparse
import re

from analyses.registry import OptionError

DTYPE_HELP = ("precision the models run in: float32 (default), bfloat16 or float16 (recorded in provenance; README "
              "'Half precision' says how far bfloat16 statistics sit from float32 ones)")
THREADS_HELP = ("torch CPU threads (default: the cores this process may use that other processes do not keep busy, "
                "divided between torchrun's ranks on the node)")


def add_analysis_commands(sub) -> None:
    from analyses import all_analyses
    from poslens.cli import merge

    a = sub.add_parser("analyze", help="run one analysis: CSV + figure + provenance")
    names = a.add_subparsers(dest="analysis", required=True, metavar="NAME")
    for analysis in all_analyses():
        p = names.add_parser(analysis.name, help=analysis.about.split(":")[0].replace("%", "%%"),
                             description=analysis.about.replace("%", "%%"), formatter_class=_Help)
        p.add_argument("--model", action="append", required=True, metavar="NAME_OR_PATH",
                       help="registry name (poslens models), poslens directory, upstream checkpoint, Hugging Face "
                            "directory or hub id owner/name (repeatable)")
        p.add_argument("--out", required=True, help="output folder")
        p.add_argument("--force", action="store_true", help="overwrite this analysis' earlier results in --out")
        p.add_argument("--seed", default="0", help="random seed (default: 0)")
        p.add_argument("--device", default=None, help="torch device to run the models on (cpu, cuda, cuda:1, mps)")
        p.add_argument("--dtype", default=None, help=DTYPE_HELP)
        p.add_argument("--threads", default=None, help=THREADS_HELP)
        p.add_argument("--tokenizer", default=None, metavar="DIR_OR_MODEL",
                       help="tokenizer for models loaded without one: a directory of tokenizer files, or a registry "
                            "name, checkpoint or hub id whose tokenizer to use")
        p.add_argument("--format", default=None, metavar="FORMATS",
                       help="figure formats, any of html,pdf,svg,png (default: html, plus pdf,png where a browser "
                            "is found)")
        for opt in analysis.options:
            p.add_argument(opt.flag, **_argument(opt))
        merge.add_shard_arguments(p)
        p.set_defaults(func=cmd_analyze, spec=analysis)

    r = sub.add_parser("reproduce", help="the main job: every analysis on the bundled models, with an index.html")
    r.add_argument("--out", default="results", help="results folder (default: results)")
    r.add_argument("--force", action="store_true", help="overwrite an earlier report in --out")
    r.add_argument("--seed", default="0", help="random seed (default: 0)")
    r.add_argument("--quick", action="store_true", help="smaller samples (for tests)")
    r.add_argument("--resume", action="store_true",
                   help="continue a report in --out: steps done at this commit with the same arguments are kept")
    r.add_argument("--real-models", action="store_true",
                   help="also the pretrained models' runs behind README's known results (SmolLM2, Gemma 3; "
                        "about 2 h 45 min more on a 2-core CPU; resumable with --resume)")
    r.add_argument("--device", default=None, help="torch device to run the models on (cpu, cuda, cuda:1, mps)")
    r.add_argument("--dtype", default=None, help=DTYPE_HELP)
    r.add_argument("--threads", default=None, help=THREADS_HELP)
    r.add_argument("--steps", default=None, metavar="A,B",
                   help="only these steps of the job (comma-separated analysis names; default: every step)")
    r.set_defaults(func=cmd_reproduce)
    merge.add_merge_command(sub)
    from poslens.viewer.cli import add_view_command

    add_view_command(sub)


class _Help(argparse.HelpFormatter):
    """Help lines that never break an option's name at its hyphens ("--max-" / "docs")."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _argument(opt) -> dict:
    """argparse keywords for one declared option: values stay text (parsed and checked by the declaration,
    so a bad value gets one line naming it), and an option not given is absent (its default is the function's)."""
    text = opt.help
    if opt.convert is None and opt.default is not None and opt.type is not bool:
        shown = ",".join(map(str, opt.default)) if isinstance(opt.default, tuple) else opt.default
        text += f" (default: {shown})"
    kw = dict(dest=opt.name, default=argparse.SUPPRESS, help=text.replace("%", "%%"))
    if opt.type is bool and opt.convert is None:
        return dict(kw, action=argparse.BooleanOptionalAction)
    kw["metavar"] = opt.metavar or ("{" + ",".join(opt.choices) + "}" if opt.choices else
                                    {int: "N", float: "X"}.get(opt.type, "TEXT"))
    return dict(kw, action="append") if opt.multiple else kw


_DEVICE = re.compile(r"^(cpu|cuda|mps|xpu|meta)(:\d+)?$")


def check_common(args: argparse.Namespace) -> int:
    """``--seed``, ``--device`` and ``--threads``, checked before anything loads (torch's threads then set); the
    seed as an int."""
    try:
        seed = int(args.seed)
    except ValueError:
        raise OptionError(f"--seed {args.seed}: expected an integer") from None
    threads = None
    if args.threads is not None:
        try:
            threads = int(args.threads)
        except ValueError:
            threads = 0
        if threads < 1:
            raise OptionError(f"--threads {args.threads}: expected an integer >= 1")
    device = args.device
    if device is not None:
        if not _DEVICE.match(device):
            raise OptionError(f"--device {device}: not a torch device (cpu, cuda, cuda:N, mps)")
        import torch

        kind, _, index = device.partition(":")
        if kind == "cuda":
            if not torch.cuda.is_available():
                raise OptionError(f"--device {device}: this torch build ({torch.__version__}) sees no CUDA device")
            if index and int(index) >= torch.cuda.device_count():
                raise OptionError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
        if kind == "mps" and not torch.backends.mps.is_available():
            raise OptionError(f"--device {device}: MPS is not available here")
    from poslens.run import threads as cpu_threads

    cpu_threads.apply(threads)
    return seed


DTYPES = ("float32", "bfloat16", "float16")  # poslens.run.plan.DTYPES, named here without importing torch


def check_dtype(args: argparse.Namespace) -> str | None:
    """``--dtype``, checked before anything loads."""
    if args.dtype is not None and args.dtype not in DTYPES:
        raise OptionError(f"--dtype {args.dtype}: expected one of {', '.join(DTYPES)}")
    return args.dtype


def cmd_analyze(args: argparse.Namespace) -> int:
    spec = args.spec
    from poslens.cli.merge import analysis_session, check_shard_arguments
    from poslens.run.execute import run_analysis
    from poslens.run.outputs import check_out_dir

    options = spec.parse_cli(vars(args))
    seed = check_common(args)
    dtype = check_dtype(args)
    check_shard_arguments(args)
    check_out_dir(args.out)
    # the shards' manifest keeps what the command line gave for options read from files (--input, --entities),
    # so `poslens merge` reads them again (analyses.registry Option.parse)
    ns = vars(args)
    recorded = {o.name: ns[o.name] if o.convert is not None else options[o.feeds or o.name]
                for o in spec.options if o.name in ns}
    with analysis_session(args, spec.name, recorded, seed):
        result = run_analysis(spec.name, args.model, args.out, options=options, seed=seed, force=args.force,
                              device=args.device, dtype=dtype, cli=True, formats=args.format,
                              tokenizer=args.tokenizer)
    if not result.files:
        return 0  # a torchrun rank > 0 or one --shard I/N: rank 0 / `poslens merge` writes the outputs
    from poslens.cli import headline

    print("\n".join(headline.lines(spec, result)))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from poslens.run.outputs import check_out_dir

    seed = check_common(args)
    dtype = check_dtype(args)
    check_out_dir(args.out)
    from interp.runtime import parallel
    from poslens.reproduce import reproduce

    plan = _steps(args.steps, args.real_models)
    with parallel.session(device=args.device):  # under torchrun: one process group for every step
        reproduce(args.out, seed=seed, force=args.force, quick=args.quick, device=args.device,
                  real_models=args.real_models, dtype=dtype, resume=args.resume, plan=plan)
    return 0


def _steps(given: str | None, real_models: bool):
    """``--steps``: the job's steps of those names, in the job's order (None: every step); an unknown name is an
    error listing the steps."""
    if given is None:
        return None
    from poslens.reproduce import main_plan, real_plan

    everything = main_plan() + (real_plan() if real_models else ())
    names = [n.strip() for n in given.split(",") if n.strip()]
    unknown = [n for n in names if n not in {s.analysis for s in everything}]
    if unknown or not names:
        raise OptionError(f"--steps {given}: {', '.join(unknown) or 'no step'} is not a step of the job (steps: "
                          f"{', '.join(dict.fromkeys(s.analysis for s in everything))})")
    return tuple(s for s in everything if s.analysis in names)
