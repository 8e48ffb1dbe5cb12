"""poslens: hooked models with learned positions, their analyses and figures (models, train, analyze, reproduce,
figure)."""

from __future__ import annotations

import argparse
import re
import sys


class Parser(argparse.ArgumentParser):
    """argparse that says "did you mean" for a wrong choice (an analysis name, a recipe) and for an unknown option (the
    options of the command given: ``poslens analyze sink-rate --n-doc 4`` suggests ``--n-docs``)."""

    def error(self, message):
        wrong = re.search(r"invalid choice: '?([^'\s]*)'? \(choose from (.*)\)", message)
        if wrong:
            from analyses.registry import did_you_mean

            message += did_you_mean(wrong.group(1), [c.strip(" '") for c in wrong.group(2).split(",")])
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            from analyses.registry import did_you_mean

            parser = self._innermost(ns)
            flags = [f for a in parser._actions if a.help is not argparse.SUPPRESS for f in a.option_strings]
            hint = next((h for e in extras if e.startswith("-") and (h := did_you_mean(e.split("=")[0], flags))), "")
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return ns

    def _innermost(self, ns) -> argparse.ArgumentParser:
        """The sub-command's own parser (``poslens analyze NAME``'s), whose options an unknown one is compared with."""
        parser = self
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(ns, sub.dest, None) if sub is not None else None
            if chosen not in getattr(sub, "choices", {}):
                return parser
            parser = sub.choices[chosen]


def _parse_overrides(items: list[str]) -> dict:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        for cast in (int, float):
            try:
                value = cast(value)
                break
            except ValueError:
                continue
        else:
            value = {"true": True, "false": False}.get(value.lower(), value)
        out[key] = value
    return out


def cmd_models(args) -> int:
    from interp import catalog

    rows = []
    for e in catalog.entries():
        ok = e.available()
        n = e.n_params if ok else None
        rows.append((e.name, e.family, f"{n / 1e6:.2f}M" if n else "-", e.origin + ("" if ok else " (not installed)"),
                     e.description))
    widths = [max(len(str(r[i])) for r in rows + [("name", "family", "params", "from", "")]) for i in range(4)]
    print("  ".join(h.ljust(w) for h, w in zip(("name", "family", "params", "from"), widths)) + "  about")
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    return 0


def cmd_train(args) -> int:
    import torch

    from poslens.train import make_spec, train
    from poslens.train.loop import TrainArgs

    if args.threads:
        torch.set_num_threads(args.threads)
    spec = make_spec(args.recipe, size=args.size, overrides=_parse_overrides(args.set), seed=args.seed)
    targs = TrainArgs(steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
                      eval_every=args.eval_every, save_every=args.save_every, seed=args.seed, bf16=not args.fp32)
    record = train(spec, args.out, targs, resume=args.resume, force=args.force, session_steps=args.session_steps,
                   device=args.device)
    if record is None:
        print(f"{spec.name}: stopped after this session's steps; continue with --resume")
        return 0
    print(f"{spec.name}: {record['steps']} steps, {record['tokens_seen']:,} tokens, "
          f"validation loss {record['final_validation_loss']:.4f} -> {args.out}")
    return 0


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The whole command line. Recipes (which import torch) are listed only when the command is ``train``."""
    argv = sys.argv[1:] if argv is None else argv
    import poslens

    p = Parser(prog="poslens", description=__doc__)
    p.add_argument("--version", action="version", version=f"poslens {poslens.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("models", help="list the models loadable by name")
    m.set_defaults(func=cmd_models)

    if argv[:1] == ["train"]:
        from poslens.train.recipes import all_recipes, sizes

        recipes, size_names = all_recipes(), sizes()
    else:
        recipes = size_names = None
    t = sub.add_parser("train", help="train a model family from a recipe (seeded, resumable)")
    t.add_argument("recipe", choices=recipes)
    t.add_argument("--out", required=True, help="run directory (weights, training record, resumable state)")
    t.add_argument("--size", choices=size_names, default="small",
                   help="small (CPU), blog (the increments blog's 256-d model) or large (decoders, for GPUs)")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    t.add_argument("--steps", type=int, default=2000)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--eval-every", type=int, default=200)
    t.add_argument("--save-every", type=int, default=100)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    t.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda, cuda:1, ...)")
    t.add_argument("--fp32", action="store_true", help="train in float32 instead of bf16 autocast")
    t.add_argument("--resume", action="store_true", help="continue the run in --out")
    t.add_argument("--session-steps", type=int, default=None, help="stop after this many steps (resume later)")
    t.add_argument("--force", action="store_true", help="start over even if --out holds a run")
    t.set_defaults(func=cmd_train)

    from poslens.cli import commands

    commands.add_analysis_commands(sub)
    from poslens.cli.figure import add_figure_command

    add_figure_command(sub)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["figure"]:  # re-rendering loads no model: its parser alone, without the analyses (torch)
        from poslens.cli.figure import figure_parser

        args = figure_parser(__doc__).parse_args(argv)
    else:
        args = build_parser(argv).parse_args(argv)
    from interp.runtime.memory import MemoryRefused

    try:
        return args.func(args)
    except (FileExistsError, FileNotFoundError, ValueError, KeyError, TypeError, MemoryRefused) as err:
        print(f"poslens: error: {err}", file=sys.stderr)
        return 2

