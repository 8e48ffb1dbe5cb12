"""Command-line side of data-parallel runs (``interp.runtime.parallel``, shards in ``poslens.run.shards``): the shard
options of ``poslens analyze`` and ``poslens merge SHARD_DIR --out OUT``, which reduces the shards of separate jobs into
the usual outputs."""

from __future__ import annotations

import argparse


def add_shard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard-dir", default=None, metavar="DIR",
                   help="write each share's per-document results here (resumable; `poslens merge DIR` combines them)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="compute share I of N only and write it to --shard-dir (one task of a SLURM array)")
    p.add_argument("--flush-every", type=int, default=8, metavar="K", help="write the shard every K batches")


def check_shard_arguments(args: argparse.Namespace) -> None:
    """The shard options, checked before any model loads (one line naming the option and the value)."""
    from analyses.registry import OptionError

    if args.flush_every < 1:
        raise OptionError(f"--flush-every {args.flush_every}: must be at least 1")
    if args.shard is not None:
        from poslens.run.shards import parse_share

        parse_share(args.shard)
        if args.shard_dir is None:
            raise OptionError(f"--shard {args.shard}: needs --shard-dir DIR to write its share to")


def analysis_session(args: argparse.Namespace, analysis: str, options: dict, seed: int):
    """The data-parallel session of ``poslens analyze``: torchrun's ranks or one ``--shard I/N``, with a shard store
    when ``--shard-dir`` is given."""
    from interp.runtime import parallel
    from poslens.run.shards import ShardStore, arguments_record, parse_share

    store = None
    if args.shard_dir is not None:
        store = ShardStore(args.shard_dir, record=arguments_record(analysis, args.model, options, seed,
                                                                  getattr(args, "dtype", None)),
                           flush_every=args.flush_every, standalone=args.shard is not None)
    share = parse_share(args.shard) if args.shard is not None else None
    return parallel.session(device=args.device, share=share, store=store)


def add_merge_command(sub) -> None:
    m = sub.add_parser("merge", help="combine the shards of a data-parallel run into the usual outputs")
    m.add_argument("shard_dir", help="the --shard-dir the shares wrote to")
    m.add_argument("--out", required=True, help="output folder")
    m.add_argument("--force", action="store_true", help="overwrite this analysis' earlier results in --out")
    m.add_argument("--device", default=None, help="torch device to load the models on (for their metadata)")
    m.set_defaults(func=cmd_merge)


def merge(shard_dir, out, *, force: bool = False, device=None):
    """Check the shards in ``shard_dir`` and write the analysis' outputs from them (the models are loaded, in the dtype
    the shards ran in, for provenance and for anything the analysis computes outside its corpus loop)."""
    from analyses import get
    from interp.runtime import parallel
    from poslens.run.execute import run_analysis
    from poslens.run.shards import ShardStore, read_shards

    record, by_share = read_shards(shard_dir)
    args = record["arguments"]
    spec = get(record["analysis"])
    # options read from files (--input, --entities) are recorded as given on the command line: read them again
    by_name = {o.name: o for o in spec.options}
    options = {(by_name[k].feeds or k) if k in by_name else k:
               by_name[k].parse(v) if k in by_name and by_name[k].convert is not None else v
               for k, v in args["options"].items()}
    with parallel.session(store=ShardStore(shard_dir, record=record, serve=by_share)):
        return run_analysis(record["analysis"], args["models"], out, options=options, seed=args["seed"],
                            force=force, device=device, dtype=args.get("dtype"))


def cmd_merge(args: argparse.Namespace) -> int:
    result = merge(args.shard_dir, args.out, force=args.force, device=args.device)
    print("wrote " + ", ".join(str(p) for p in result.files))
    return 0
