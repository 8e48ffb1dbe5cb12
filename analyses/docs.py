"""The Markdown table of every registered analysis, read off its ``@analysis`` declaration: its name, the capabilities
it ``needs`` and the first paragraph of its docstring (``about``). An analysis registered is an analysis documented.

``python -m analyses.docs`` prints the table; README.md carries the same (a test keeps them equal,
``python -m analyses.docs --write README.md`` rewrites the section between its markers).
"""

from __future__ import annotations

import sys

from interp import readme

START, END = readme.markers("analyses")


def _cell(text: str) -> str:
    return " ".join(text.replace("``", "`").split()).replace("|", "\\|")


def row(spec) -> str:
    needs = ", ".join(c.value for c in spec.needs) or "any model"
    return f"| `{spec.name}` | {needs} | {_cell(spec.about)} |"


def markdown() -> str:
    from analyses import all_analyses

    lines = ["| name | needs a model with | what it computes |", "| --- | --- | --- |"]
    return "\n".join(lines + [row(spec) for spec in all_analyses()])


def readme_section(text: str) -> str:
    return readme.section(text, START, END)


def sync_readme(path) -> bool:
    """Rewrite the README section between the analysis markers; True if it changed."""
    return readme.sync(path, markdown(), START, END)


if __name__ == "__main__":
    readme.command(sys.argv[1:], markdown, sync_readme)
