"""A known-results row is its module and one line: every module under ``poslens/known_results/claims/GROUP/`` is named
once in ``claims.MODULES`` and defines one row, ``ROW``, from its own ``measure``, ``verdict`` and ``RULE``; a module
added to the registry lands in the table at its line."""

import importlib
import sys
import types
from pathlib import Path

from poslens.known_results import claims
from poslens.known_results.types import Claim, Observation, Results, Rule

FOLDER = Path(claims.__file__).parent


def _row_modules() -> list[str]:
    return sorted(".".join(p.relative_to(FOLDER).with_suffix("").parts) for p in FOLDER.rglob("*.py")
                  if p.name != "__init__.py")


def test_every_module_under_claims_is_registered_once():
    assert len(set(claims.MODULES)) == len(claims.MODULES), "a module registered twice"
    assert sorted(claims.MODULES) == _row_modules(), (
        f"unregistered: {sorted(set(_row_modules()) - set(claims.MODULES))}; "
        f"registered without a file: {sorted(set(claims.MODULES) - set(_row_modules()))}")


def test_each_row_module_defines_one_row_from_its_own_functions():
    for name in claims.MODULES:
        module = importlib.import_module(f"{claims.__name__}.{name}")
        rows = [k for k, v in vars(module).items() if isinstance(v, (Claim, Observation))]
        assert rows == ["ROW"], f"{name}: rows {rows}"
        assert module.ROW.measure is module.measure, name
        if isinstance(module.ROW, Claim):
            assert module.ROW.verdict is module.verdict and module.ROW.rule is module.RULE, name
    for group in {name.split(".")[0] for name in claims.MODULES}:  # what a group shares holds no row
        package = importlib.import_module(f"{claims.__name__}.{group}")
        assert not [k for k, v in vars(package).items() if isinstance(v, (Claim, Observation))], group


def test_the_table_lists_the_rows_in_the_registrys_order():
    rows = [importlib.import_module(f"{claims.__name__}.{name}").ROW for name in claims.MODULES]
    assert claims.CLAIMS == tuple(r for r in rows if isinstance(r, Claim))
    assert claims.OBSERVATIONS == tuple(r for r in rows if isinstance(r, Observation))
    assert [c.finding for c in claims.CLAIMS[:2]] == ["induction heads", "previous-token heads"]
    assert [o.finding for o in claims.OBSERVATIONS][1] == "rotary bands removed or unrotated in trained weights"


def test_a_registered_module_adds_its_row_at_its_line(monkeypatch, tmp_path):
    group, row = types.ModuleType(f"{claims.__name__}.toy"), types.ModuleType(f"{claims.__name__}.toy.first_token")
    group.__path__ = []
    row.RULE = Rule("agrees when the first token is first", written="today")
    row.measure = lambda r, m: f"{m}: first"
    row.verdict = lambda r: "agrees"
    row.ROW = Claim("a toy claim", "nobody", "the first token is first", "§1", "none", "none", ("smollm2",),
                    row.measure, row.verdict, row.RULE)
    monkeypatch.setitem(sys.modules, group.__name__, group)
    monkeypatch.setitem(sys.modules, row.__name__, row)
    got = claims.rows(claims.MODULES[:2] + ("toy.first_token",) + claims.MODULES[2:])
    assert got[:2] == claims.ROWS[:2] and got[3:] == claims.ROWS[2:]
    assert got[2].measure(Results(tmp_path), "smollm2") == "smollm2: first" and got[2].verdict(None) == "agrees"
