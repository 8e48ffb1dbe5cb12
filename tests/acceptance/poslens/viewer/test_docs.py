"""README's viewer section shows the three levels from a real run: its screenshots exist, are small, and are named
in the section."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def test_readme_shows_the_three_levels():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## The head viewer")
    section = text[start:text.index("\n## ", start + 1)]
    for name in ("grid", "head", "tokens"):
        png = ROOT / "docs" / "viewer" / f"{name}.png"
        assert f"(docs/viewer/{name}.png)" in section and png.is_file(), name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 400_000, name
    assert "poslens view" in section and "--serve" in section
