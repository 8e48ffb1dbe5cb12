"""No function of poslens' packages is longer than ``LIMIT`` lines (its body, docstring excluded): a longer one is cut
where it has seams into named steps that read top to bottom (issue 37). No allow-list."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("interp", "corpora", "probes", "analyses", "figures", "poslens", "bench")
LIMIT = 60


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after any docstring to the end of the last."""
    body, first = node.body, node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def long_functions(limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` of every function of the packages whose body runs past ``limit`` lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n := body_lines(node)) > limit:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_body_is_longer_than_the_limit():
    found = long_functions()
    assert not found, f"function bodies over {LIMIT} lines (docstring excluded):\n" + "\n".join(found)


def test_the_count_starts_after_the_docstring_and_includes_nested_functions():
    source = 'def f():\n    """Doc\n    string."""\n    x = 1\n\n    def g():\n        return x\n    return g\n'
    f = ast.parse(source).body[0]
    assert body_lines(f) == 5
    assert body_lines(f.body[2]) == 1
    assert body_lines(ast.parse('def h():\n    """Only a docstring."""\n').body[0]) == 0
