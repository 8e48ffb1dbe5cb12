"""The Markdown table of every registered intervention (``interp.interventions``), read off the declarations beside
each one: its name and fields, its docstring's first paragraph (what it edits), its ``needs`` and its ``example``. An
intervention registered is an intervention documented.

README.md's section is generated from it (``python -m poslens.readme``; one test keeps every section current).
"""

from __future__ import annotations

import dataclasses


def _fields(cls) -> str:
    return ", ".join(f.name if f.default is dataclasses.MISSING else f"{f.name}={f.default!r}"
                     for f in dataclasses.fields(cls))


def _cell(text: str) -> str:
    return " ".join(text.replace("``", "`").split()).replace("|", "\\|")


def row(cls) -> str:
    """One intervention's row: ``| `Class(fields)` | name | edit | needs | example |``."""
    from interp.interventions import written_doc

    edit = written_doc(cls).split("\n\n")[0]
    needs = ", ".join(c.value for c in cls.needs) or "any model"
    example = f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in cls.example.items())})"
    return f"| `{cls.__name__}({_fields(cls)})` | `{cls.name}` | {_cell(edit)} | {needs} | `{example}` |"


def markdown() -> str:
    from interp.interventions import registered

    lines = ["| intervention | name | edit | needs a model with | example |", "| --- | --- | --- | --- | --- |"]
    return "\n".join(lines + [row(cls) for cls in registered().values()])
