"""``poslens view``: the head viewer from the command line (``poslens.viewer.view``). Imports no torch to build its
parser."""

from __future__ import annotations

import argparse

HELP = "open the head viewer: head grid, one head's pooled pattern, a block's tokens (file or --serve)"


def add_view_command(sub) -> None:
    v = sub.add_parser("view", help=HELP, description=HELP)
    v.add_argument("--model", action="append", metavar="NAME_OR_PATH",
                   help="registry name, poslens directory, checkpoint or hub id (repeatable: side by side); default: "
                        "the models of --results")
    v.add_argument("--results", metavar="DIR", help="the --out folder of a head-profiles, along-context, sink-rate or "
                                                    "attention-window run: its CSV's columns join the grid's menu")
    v.add_argument("--input", metavar="FILE", help="a UTF-8 text file to read (default: the built-in Wikipedia text)")
    v.add_argument("--length", type=int, default=None, help="tokens (default: each model's context)")
    v.add_argument("--block", type=int, default=None,
                   help="query rows and keys per block of the pooled pattern (default: length / 32, at most 256)")
    v.add_argument("--page-mb", type=float, default=None, metavar="MB",
                   help="the saved page's size budget, which the token rows fill: every row of every block where they "
                        "fit, else 4, 2 or 1 rows per block, else as many blocks as fit (default 20; --serve computes "
                        "any block's)")
    v.add_argument("--out", default=None, help="write the self-contained page here (default: view.html unless --serve)")
    v.add_argument("--force", action="store_true", help="overwrite --out even if poslens view did not write it")
    v.add_argument("--serve", action="store_true", help="serve the page live on 127.0.0.1, the models kept loaded")
    v.add_argument("--port", type=int, default=0, help="with --serve: the port (default 0: one the OS picks)")
    v.add_argument("--threads", default=None, help="torch CPU threads")
    v.set_defaults(func=cmd_view)


def held(data: dict) -> str:
    """What the saved page holds of the token level, and the budget that holds every block's rows where it is not."""
    ms = data["models"]
    have, total = sum(len(m["precomputed"]) for m in ms), sum(m["n_blocks"] for m in ms)
    if have == total:
        return f"token rows of every block ({total})"
    return (f"token rows of {have} of {total} blocks; --page-mb {data['budget']['needs_mb']} holds every block's, "
            "--serve computes any")


def cmd_view(args: argparse.Namespace) -> int:
    from pathlib import Path

    from poslens.viewer import ViewerError, view

    if args.model is None and args.results is None:
        raise ViewerError("view: give --model or --results")
    text = None
    if args.input is not None:
        path = Path(args.input)
        if not path.is_file():
            raise ViewerError(f"--input {args.input}: no such file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ViewerError(f"--input {args.input}: not UTF-8 text (byte {e.start}: {e.reason}); convert it, e.g. "
                              f"iconv -f latin1 -t utf-8 {args.input}") from None
    if args.threads is not None:
        from poslens.run import threads

        threads.apply(int(args.threads))
    out = args.out if args.out is not None or args.serve else "view.html"
    shown = view(args.model, text=text, results=args.results, length=args.length, block=args.block,
                 page_mb=args.page_mb, out=out, force=args.force, serve=args.serve, port=args.port)
    if out is not None:
        print(f"wrote {out} ({Path(out).stat().st_size / 1e6:.1f} MB): {held(shown.data)}")
    if args.serve:
        print(f"serving {shown.url} (127.0.0.1 only); Ctrl-C stops it", flush=True)
        try:
            import threading

            threading.Event().wait()
        except KeyboardInterrupt:
            shown.stop()
    return 0
