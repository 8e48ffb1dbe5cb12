"""The code a maintainer reads is the code that runs: nothing poslens imports rewrites another module.

- ``import poslens`` (and every entry point it exports, and every module under it) changes no name of a module of
  ``interp``, ``corpora``, ``probes``, ``analyses`` or ``figures`` imported before it, and adds nothing to
  ``sys.meta_path`` or ``sys.path_hooks``;
- a module ``__getattr__`` exists only for lazy exports (``LAZY``), and each serves exactly its ``_EXPORTS``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ("interp", "corpora", "probes", "analyses", "figures")
LAZY = {"interp/__init__.py", "poslens/__init__.py"}

_PROBE = r"""
import importlib, json, pkgutil, sys
CORE = %r

def walk(package):
    names = [package]
    mod = importlib.import_module(package)
    for info in pkgutil.walk_packages(mod.__path__, package + "."):
        if ".checkpoints." in info.name or info.name.endswith(".__main__"):
            continue
        names.append(info.name)
    return names

def snapshot():
    out = {}
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] in CORE and mod is not None:
            out[name] = {k: id(v) for k, v in vars(mod).items()}
    return out

for package in CORE:
    for name in walk(package):
        importlib.import_module(name)
before, hooks = snapshot(), (list(map(repr, sys.meta_path)), list(map(repr, sys.path_hooks)))
import poslens
for name in poslens.__all__:
    getattr(poslens, name)
for name in walk("poslens"):
    importlib.import_module(name)
after = snapshot()
changed = sorted(f"{m}.{k}" for m, names in before.items() for k, v in names.items()
                 if k not in ("__warningregistry__",) and after.get(m, {}).get(k) != v)
added = sorted(f"{m}.{k}" for m, names in before.items() for k in after.get(m, {}) if k not in names
               and not k.startswith("__") and not isinstance(getattr(sys.modules[m], k), type(sys)))
print(json.dumps(dict(changed=changed, added=added,
                      hooks=[list(map(repr, sys.meta_path)) != hooks[0], list(map(repr, sys.path_hooks)) != hooks[1]],
                      getattrs=sorted(m for m, mod in sys.modules.items() if m.split(".")[0] in CORE + ("poslens",)
                                      and mod is not None and "__getattr__" in vars(mod)))))
"""


def _probe() -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE % (CORE,)], cwd=ROOT, capture_output=True, text=True,
                          env={"POSLENS_PROGRESS": "0", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_poslens_changes_no_core_name_and_installs_no_import_hook():
    found = _probe()
    assert found["changed"] == [], f"import poslens replaced: {found['changed']}"
    assert found["added"] == [], f"import poslens added names to core modules: {found['added']}"
    assert found["hooks"] == [False, False], "import poslens changed sys.meta_path or sys.path_hooks"
    assert set(found["getattrs"]) <= {"interp", "poslens"}, found["getattrs"]


def test_a_module_getattr_is_a_lazy_export_and_nothing_else():
    packages = CORE + ("poslens", "bench")
    defined = sorted(str(p.relative_to(ROOT)) for package in packages for p in (ROOT / package).rglob("*.py")
                     if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__"
                            for n in ast.parse(p.read_text(encoding="utf-8")).body))
    assert set(defined) <= LAZY, f"a module __getattr__ outside the lazy exports: {sorted(set(defined) - LAZY)}"
    import importlib

    for path in sorted(LAZY):
        module = importlib.import_module(path.removesuffix("/__init__.py").replace("/", "."))
        exports = set(module._EXPORTS)
        assert set(module.__all__) <= exports
        for name in ("docs", "PLAN", "deprecated", "models"):  # names an old-names table would serve
            assert name not in exports
            try:
                getattr(module, name)
            except AttributeError:
                continue
            assert name in vars(module), f"{module.__name__}.{name} is served by __getattr__"


def test_nothing_in_the_tree_touches_the_import_system():
    hits = []
    for package in CORE + ("poslens",):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            hits += [f"{path.relative_to(ROOT)}: {w}" for w in ("sys.meta_path", "sys.path_hooks", "MetaPathFinder",
                                                                "importlib.abc") if w in text]
    assert not hits, hits
