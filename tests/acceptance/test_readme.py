"""The README is the entry point: it must open with the two commands and document every hook, every intervention and
every analysis that exists."""

from pathlib import Path

from analyses import docs as analysis_docs
from interp import intervention_docs
from interp.hook_docs import markdown, readme_section

ROOT = Path(__file__).resolve().parents[2]


def test_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text[:400]
    assert "make demo" in head and "make test" in head
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_hook_tables_in_the_readme_equal_the_models_declarations():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_section(text).strip() == markdown().strip(), "run: python -m interp.hook_docs --write README.md"


def test_intervention_table_in_the_readme_equals_the_registry():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = intervention_docs.readme_section(text).strip()
    assert section == intervention_docs.markdown().strip(), "run: python -m interp.intervention_docs --write README.md"
    assert "| `KeyWindow(window, sinks=0, layers=None)` | `key-window` |" in section  # a row of the registry, not empty


def test_analysis_table_in_the_readme_equals_the_registry():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = analysis_docs.readme_section(text).strip()
    assert section == analysis_docs.markdown().strip(), "run: python -m analyses.docs --write README.md"
    assert "| `along-context` | attention patterns, next-token logits | Each head's first-token" in section
