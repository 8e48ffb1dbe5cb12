"""The README is the entry point: it opens with the two commands, and every generated section (the hooks, the
interventions, the analyses, the known results: ``poslens.readme.SECTIONS``) is what its function writes now."""

from pathlib import Path

import pytest

from poslens import readme

ROOT = Path(__file__).resolve().parents[2]


def test_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text[:400]
    assert "make demo" in head and "make test" in head
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(readme.SECTIONS))
def test_every_generated_section_is_current(name):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.section(text, name) == readme.generate(name), \
        f"README.md's {name} section is stale: run `python -m poslens.readme --write`"


def test_each_section_holds_rows_of_its_registry():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "| `KeyWindow(window, sinks=0, layers=None)` | `key-window` |" in readme.section(text, "interventions")
    assert "| `along-context` | attention patterns, next-token logits | Each head's first-token" \
        in readme.section(text, "analyses")
    assert "**Every family x TransformerLens' hooks**" in readme.section(text, "hooks")


def test_write_rewrites_a_stale_section_and_nothing_else(tmp_path):
    path = tmp_path / "README.md"
    body = "".join(f"<!-- {n} -->\n{readme.generate(n)}<!-- /{n} -->\nbetween {n}\n" for n in readme.SECTIONS)
    path.write_text("# top\n" + body.replace(readme.generate("analyses"), "| stale |\n"), encoding="utf-8")
    assert readme.stale(path) == ["analyses"]
    assert readme.write(path) == ["analyses"]
    assert path.read_text(encoding="utf-8") == "# top\n" + body and readme.stale(path) == []
    with pytest.raises(readme.SectionMissing, match="no <!-- nothing --> "):
        readme.replace("text", "nothing", "x")
    assert readme.replace("text\n", "new", "x", append=True) == "text\n\n<!-- new -->\nx\n<!-- /new -->\n"
