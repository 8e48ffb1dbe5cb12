"""The tree's import graph, read off the source (every import, at module level or inside a function): no circle
between modules, and no package importing from a layer above its own.

The layers, lowest first (a package imports only from its own layer and those below):

0. ``stats``: intervals over unit-level values (numpy and scipy only);
1. ``interp``: hooked models, their loaders, hooks, interventions, the run infrastructure (``interp.runtime``);
2. ``corpora``: documents, windows and prompts (tokenised by ``interp``'s tokenizers);
3. ``probes``: probes over ``interp`` activations of ``corpora`` windows;
4. ``analyses``: the analyses (``@analysis``), over the three below;
5. ``figures``: a figure per analysis, drawn from its tables alone (no analysis code is imported: the tables are
   enough);
6. ``poslens``: the application (command line, runs and their outputs, the main job, known results, the viewer,
   training);
7. ``bench``: benchmarks of all of the above.

A package's ``__init__`` that imports its own submodules (a registry whose entries import it back, as
``interp.interventions`` does) is one unit, not a circle.
"""

from __future__ import annotations

import ast
import collections
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("stats", "interp", "corpora", "probes", "analyses", "figures", "poslens", "bench")


def _modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _same_unit(a: str, b: str) -> bool:
    """A package and its own submodules."""
    return a.startswith(b + ".") or b.startswith(a + ".")


@functools.cache
def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = _resolve(name)
                if target is not None and target != module and not _same_unit(module, target):
                    edges[module].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return out


def test_the_modules_are_found():
    assert {"interp.base", "analyses.registry", "figures.render", "poslens.cli"} <= set(MODULES)


def test_no_import_circle():
    found = circles(graph())
    assert not found, f"import circles: {found}"


def test_no_package_imports_from_a_layer_above():
    rank = {package: i for i, package in enumerate(LAYERS)}
    upward = sorted(f"{a} imports {b}" for a, targets in graph().items() for b in targets
                    if rank[b.split(".")[0]] > rank[a.split(".")[0]])
    assert not upward, "\n".join(upward)

