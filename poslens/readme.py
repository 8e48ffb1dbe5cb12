"""The generated sections of README.md and BENCHMARKS.md: the text between ``<!-- NAME -->`` and ``<!-- /NAME -->``.

README's sections are written by functions of the tree, one row each in ``SECTIONS``; a test keeps every one equal to
what its function writes now, and ``python -m poslens.readme --write`` rewrites those that differ. A benchmark's
section in BENCHMARKS.md is written by its run (``bench.report.write_section``) through the same ``replace``.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
SECTIONS = {  # README.md's generated sections, in the README's order: marker -> "module:function() -> Markdown"
    "interventions": "interp.intervention_docs:markdown",
    "analyses": "analyses.docs:markdown",
    "known-results": "poslens.known_results.render:kept",
    "hooks": "interp.hook_docs:markdown",
}


class SectionMissing(ValueError):
    """A file without a section's markers."""


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"<!-- {re.escape(name)} -->\n(.*?)<!-- /{re.escape(name)} -->", re.S)


def section(text: str, name: str, where: str = "README.md") -> str:
    """The text between the markers of ``name``."""
    m = _pattern(name).search(text)
    if m is None:
        raise SectionMissing(f"{where} has no <!-- {name} --> ... <!-- /{name} --> section")
    return m.group(1)


def replace(text: str, name: str, body: str, *, append: bool = False, where: str = "README.md") -> str:
    """``text`` with the section ``name`` holding ``body`` (one newline at its end); a missing section is appended
    at the end with ``append``, else refused."""
    body = body.rstrip("\n") + "\n"
    if _pattern(name).search(text) is None:
        if not append:
            raise SectionMissing(f"{where} has no <!-- {name} --> ... <!-- /{name} --> section")
        return text.rstrip("\n") + f"\n\n<!-- {name} -->\n{body}<!-- /{name} -->\n"
    return _pattern(name).sub(lambda m: f"<!-- {name} -->\n{body}<!-- /{name} -->", text, count=1)


def generate(name: str) -> str:
    """What ``SECTIONS[name]``'s function writes now."""
    module, _, function = SECTIONS[name].partition(":")
    return getattr(importlib.import_module(module), function)().rstrip("\n") + "\n"


def stale(path: Path = README, names=None) -> list[str]:
    """The sections of ``path`` that differ from what their functions write now."""
    text = Path(path).read_text(encoding="utf-8")
    return [n for n in names or SECTIONS if section(text, n, str(path)) != generate(n)]


def write(path: Path = README, names=None) -> list[str]:
    """Rewrite the stale sections of ``path``; the names rewritten."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    changed = [n for n in names or SECTIONS if section(text, n, str(path)) != generate(n)]
    for n in changed:
        text = replace(text, n, generate(n), where=str(path))
    if changed:
        path.write_text(text, encoding="utf-8")
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poslens.readme", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME", help=f"sections (default: all of {', '.join(SECTIONS)})")
    p.add_argument("--write", action="store_true", help="rewrite the stale sections (default: print them)")
    p.add_argument("--readme", type=Path, default=README, help="the file (default: the checkout's README.md)")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in SECTIONS]
    if unknown:
        p.error(f"no section {unknown[0]!r} (sections: {', '.join(SECTIONS)})")
    if args.write:
        changed = write(args.readme, args.names or None)
        print(f"rewrote {', '.join(changed)}" if changed else "every section is current")
    else:
        for n in args.names or SECTIONS:
            print(f"<!-- {n} -->\n{generate(n)}<!-- /{n} -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
