"""Markdown tables of every model family's hooks, generated from the ``HOOKS`` declarations.

``python -m interp.hook_docs`` prints them; README.md carries the same tables (a test keeps them equal).
"""

from __future__ import annotations


def families():
    from interp.models.increments import IncrementTransformer

    return [IncrementTransformer]


def table(cls) -> str:
    lines = [f"**{cls.family}** (`{cls.__module__}.{cls.__name__}`)", "", "| hook | shape | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{h.pattern}` | `{h.shape}` | {h.meaning} |" for h in cls.HOOKS]
    return "\n".join(lines)


def markdown() -> str:
    return "\n\n".join(table(cls) for cls in families())


if __name__ == "__main__":
    print(markdown())
