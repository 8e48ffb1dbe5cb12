"""README.md's generated sections: the text between two markers (``<!-- NAME -->`` and ``<!-- /NAME -->``) is
written by a function of the tree (the hook tables, the interventions, the analyses, the deprecated names), and a test
keeps each equal to what its function writes now. ``python -m MODULE [--write README.md]`` prints a section or
rewrites it (``command``)."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """``("<!-- NAME -->\\n", "<!-- /NAME -->")``."""
    return f"<!-- {name} -->\n", f"<!-- /{name} -->"


def section(text: str, start: str, end: str) -> str:
    """The text between the markers ``start`` and ``end``."""
    return text[text.index(start) + len(start) : text.index(end)]


def sync(path, body: str, start: str, end: str) -> bool:
    """Rewrite the README section between ``start`` and ``end`` with ``body``; True if it changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = text.replace(start + section(text, start, end) + end, start + body + "\n" + end)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def command(argv: list[str], render, sync_path) -> None:
    """``python -m <module of a generated README section> [--write README.md]``: print ``render()``, or rewrite the
    README's section with ``sync_path(path)``."""
    if len(argv) == 2 and argv[0] == "--write":
        print("updated" if sync_path(argv[1]) else "unchanged")
    else:
        print(render())
