"""Build the API reference from the docstrings with pdoc, then check every link in it.

    python docs/api_reference.py [--out build/api]        # `make docs`; `make test` runs it too

The reference covers the seven packages (``poslens``, ``interp``, ``analyses``, ``figures``, ``probes``, ``corpora``,
``stats``) minus the entry points that are not an API (every ``__main__``: ``python -m`` runs it on import). pdoc's
links are relative: ``check`` reads every ``href`` and ``src`` of every page written and fails, naming the page and the
link, where a relative one points at no file or an ``#anchor`` at no ``id`` of its page (links to other sites are left
alone: the build runs offline). A link pdoc writes to a member inherited from a private base class, which it does not
render, becomes plain text
(``_unlink_private``)."""

from __future__ import annotations

import argparse
import html.parser
import re
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("poslens", "interp", "analyses", "figures", "probes", "corpora", "stats")
ENTRY = "__main__"  # a ``python -m`` entry point runs its command on import: not an API, never imported here


def build(out: Path) -> list[Path]:
    """Write the reference into ``out`` (replacing what was there); the pages written."""
    import shutil

    import pdoc
    import pdoc.render

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    shutil.rmtree(out, ignore_errors=True)
    pdoc.render.configure(docformat="markdown", show_source=False, search=True,
                          footer_text="poslens API reference (generated from the docstrings by pdoc)")
    # pdoc reads "!" + a regular expression matched at the start
    modules = module_names() + [rf"!.*\.{ENTRY}$"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the libraries' import-time warnings are not the reference's business
        pdoc.pdoc(*modules, output_directory=out)
    pages = sorted(out.rglob("*.html"))
    ids: dict = {}
    for page in pages:
        _unlink_private(page, ids)
    return pages


_PRIVATE_LINK = re.compile(r'<a href="([^"#:]*)#(_[^"]*)">(.*?)</a>', re.S)


def _unlink_private(page: Path, ids: dict) -> None:
    """A subclass' page links the members it inherits from a private base class (``_Bands.layers``), which pdoc does
    not render: such a link (to an id its page lacks) becomes its text."""
    def keep(m) -> str:
        target = (page.parent / m.group(1)).resolve() if m.group(1) else page.resolve()
        if target not in ids:
            ids[target] = _parse(target).ids if target.exists() else set()
        return m.group(0) if m.group(2) in ids[target] else m.group(3)

    text = page.read_text(encoding="utf-8")
    fixed = _PRIVATE_LINK.sub(keep, text)
    if fixed != text:
        page.write_text(fixed, encoding="utf-8")


def module_names() -> list[str]:
    """Every module of ``PACKAGES``, by its file (pdoc alone would follow a package's ``__all__``, which names its
    public objects, not its submodules), minus the ``__main__`` entry points."""
    names = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            parts = file.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if parts[-1] != ENTRY:
                names.append(name)
    return names


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.links.append(value)
            if key in ("id", "name") and value:
                self.ids.add(value)


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def check(out: Path) -> list[str]:
    """Every broken relative link under ``out``, as ``page: link (why)``."""
    pages = {p.resolve(): None for p in out.rglob("*.html")}
    broken = []
    for page in list(pages):
        parsed = pages[page] = pages[page] or _parse(page)
        for link in parsed.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("javascript:", "data:", "mailto:")):
                continue  # another site: not checked offline
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(out.resolve())}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                if pages.get(target) is None:
                    pages[target] = _parse(target)
                fragment = unquote(parts.fragment)
                owner = fragment.rsplit(".", 1)[0]
                # pdoc links a name in a docstring to a member the class inherits from another package (torch's
                # forward), which the page lists under the class without an id of its own: the class' id is the target
                if fragment not in pages[target].ids and not ("." in fragment and owner in pages[target].ids):
                    broken.append(f"{page.relative_to(out.resolve())}: {link} (no id {parts.fragment!r} there)")
    return broken


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python docs/api_reference.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "api", help="output folder (default: build/api)")
    p.add_argument("--check-only", action="store_true", help="check the links of an existing build")
    args = p.parse_args(argv)
    start = time.perf_counter()
    pages = sorted(args.out.rglob("*.html")) if args.check_only else build(args.out)
    broken = check(args.out)
    written = {".".join(p.relative_to(args.out).with_suffix("").parts) for p in pages}
    broken += [f"{name}: no page (the module failed to import?)" for name in module_names() if name not in written]
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    print(f"API reference: {len(pages)} pages in {args.out}, {len(broken)} broken links "
          f"({time.perf_counter() - start:.1f} s)")
    return 1 if broken or not pages else 0


if __name__ == "__main__":
    sys.exit(main())
