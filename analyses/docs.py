"""The Markdown table of every registered analysis, read off its ``@analysis`` declaration: its name, the capabilities
it ``needs`` and the first paragraph of its docstring (``about``). An analysis registered is an analysis documented.

README.md's section is generated from it (``python -m poslens.readme``; one test keeps every section current).
"""

from __future__ import annotations


def _cell(text: str) -> str:
    return " ".join(text.replace("``", "`").split()).replace("|", "\\|")


def row(spec) -> str:
    needs = ", ".join(c.value for c in spec.needs) or "any model"
    return f"| `{spec.name}` | {needs} | {_cell(spec.about)} |"


def markdown() -> str:
    from analyses import all_analyses

    lines = ["| name | needs a model with | what it computes |", "| --- | --- | --- |"]
    return "\n".join(lines + [row(spec) for spec in all_analyses()])
