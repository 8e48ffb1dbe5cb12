"""Markdown tables of every model family's hooks, generated from the ``HOOKS`` declarations.

``python -m interp.hook_docs`` prints them; README.md carries the same tables (a test keeps them equal,
``python -m interp.hook_docs --write README.md`` rewrites the section).
"""

from __future__ import annotations

import sys
from pathlib import Path

START, END = "<!-- hooks -->\n", "<!-- /hooks -->"


def families():
    from interp.models.bert import BertEncoder
    from interp.models.encoder import EncoderModel
    from interp.models.hf import HFModel
    from interp.models.increments import IncrementTransformer
    from interp.models.llama import LlamaTransformer
    from interp.models.repo import RepoTransformer

    return [IncrementTransformer, RepoTransformer, EncoderModel, LlamaTransformer, BertEncoder, HFModel]


def table(cls) -> str:
    lines = [f"**{cls.family}** (`{cls.__module__}.{cls.__name__}`)", "", "| hook | shape | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{h.pattern}` | `{h.shape}` | {h.meaning} |" for h in cls.HOOKS]
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
