"""``import poslens`` is light and exposes the entry points, its docstring's calls run as written; ``poslens.analyze``
is the command line's twin; the API reference's link checker finds a broken link."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_import_poslens_imports_no_torch_and_names_its_entry_points():
    code = "import sys, poslens; print(sorted(poslens.__all__)); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    names, torch_loaded = done.stdout.splitlines()
    assert torch_loaded == "False"
    for name in ("load", "analyze", "interventions", "analyses"):
        assert repr(name) in names


def test_the_package_docstring_runs_as_written(monkeypatch):
    import doctest

    import poslens

    monkeypatch.setenv("POSLENS_PROGRESS", "0")
    got = doctest.testmod(poslens, optionflags=doctest.ELLIPSIS, verbose=False)
    assert got.attempted == 7 and got.failed == 0


def test_the_entry_points_are_the_real_objects():
    import analyses
    import interp.interventions
    import interp.loading
    import poslens

    assert poslens.load is interp.loading.load and poslens.save is interp.loading.save
    assert poslens.interventions is interp.interventions and poslens.analyses is analyses
    for name in poslens.__all__:
        assert getattr(poslens, name) is not None
    if importlib.util.find_spec("poslens.viewer") is not None:  # the viewer lands in its own change
        assert "view" in poslens.__all__ and callable(poslens.view)
    else:
        assert "view" not in poslens.__all__
        with pytest.raises(AttributeError, match="poslens.viewer"):
            poslens.view
    with pytest.raises(AttributeError):
        poslens.no_such_name


def test_analyze_returns_the_table_or_writes_the_files(tmp_path):
    import poslens
    from analyses.registry import OptionError

    table = poslens.analyze("byte-increments", "increments-shared")
    assert len(table) and set(table["model"]) == {"increments-shared"}
    result = poslens.analyze("byte-increments", "increments-shared", out=tmp_path, formats=["html"])
    assert {p.name for p in result.files} == {"byte-increments.csv", "byte-increments.html",
                                              "byte-increments.provenance.json"}
    assert result.table.shape == table.shape
    with pytest.raises(OptionError, match="did you mean 'n_docs'"):  # before loading: the model does not exist
        poslens.analyze("sink-rate", tmp_path / "missing", n_dcos=2)
    with pytest.raises(KeyError, match="did you mean 'sink-rate'"):
        poslens.analyze("sinkrate", "increments-shared")


def _reference_module():
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "docs" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_link_checker_finds_missing_pages_and_anchors(tmp_path):
    reference = _reference_module()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg.html").write_text('<a href="pkg/mod.html#f">f</a> <a href="pkg/gone.html">x</a> '
                                       '<a href="#here">h</a><h1 id="here"></h1> <a href="https://example.org">e</a>'
                                       '<a href="pkg/mod.html#Cls.inherited">i</a>', encoding="utf-8")
    (tmp_path / "pkg" / "mod.html").write_text('<div id="f"></div><div id="Cls"></div><a href="../pkg.html#nope">n</a>',
                                               encoding="utf-8")
    assert sorted(reference.check(tmp_path)) == ["pkg.html: pkg/gone.html (no such file)",
                                                 "pkg/mod.html: ../pkg.html#nope (no id 'nope' there)"]


def test_links_to_members_of_private_bases_become_text(tmp_path):
    reference = _reference_module()
    page = tmp_path / "m.html"
    page.write_text('<a href="#_Base.x">x</a> <a href="#Kept">k</a><div id="Kept"></div>', encoding="utf-8")
    reference._unlink_private(page, {})
    assert page.read_text(encoding="utf-8") == 'x <a href="#Kept">k</a><div id="Kept"></div>'
    assert "poslens" in reference.module_names() and "interp.loading.converted" in reference.module_names()
    assert not any(name.startswith("interp.models") for name in reference.module_names())
