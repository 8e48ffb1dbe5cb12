"""Markdown tables of every model family's hooks, generated from the ``hook_table()`` declarations
(the shared ``interp.base.BLOCK_HOOKS`` and each family's own ``HOOKS``).

Families are found, not listed: every ``PosLensModel`` subclass with a ``family`` defined in a module of
``interp.models`` gets a table, so a new family cannot be left out.

``python -m interp.hook_docs`` prints them; README.md carries the same tables (a test keeps them equal,
``python -m interp.hook_docs --write README.md`` rewrites the section).
"""

from __future__ import annotations

import sys
from pathlib import Path

START, END = "<!-- hooks -->\n", "<!-- /hooks -->"


ORDER = ("increments", "repo", "encoder", "llama", "bert")  # the seed families first; others after, by name


def families():
    """Every model family class in ``interp.models``, in ``ORDER`` then by family name."""
    import importlib
    import pkgutil

    import interp.models
    from interp.base import PosLensModel

    for info in pkgutil.iter_modules(interp.models.__path__):
        importlib.import_module(f"interp.models.{info.name}")
    found, stack = [], list(PosLensModel.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("interp.models.") and "family" in vars(cls) and cls not in found:
            found.append(cls)
    return sorted(found, key=lambda c: (ORDER.index(c.family) if c.family in ORDER else len(ORDER), c.family))


def table(cls) -> str:
    lines = [f"**{cls.family}** (`{cls.__module__}.{cls.__name__}`)", "", "| hook | shape | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{h.pattern}` | `{h.shape}` | {h.meaning} |" for h in cls.hook_table()]
    return "\n".join(lines)


def markdown() -> str:
    return "\n\n".join(table(cls) for cls in families())


def readme_section(text: str) -> str:
    return text[text.index(START) + len(START) : text.index(END)]


def sync_readme(path) -> bool:
    """Rewrite the README section between the hook markers; True if it changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = text.replace(START + readme_section(text) + END, START + markdown() + "\n" + END)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        print("updated" if sync_readme(sys.argv[2]) else "unchanged")
    else:
        print(markdown())
