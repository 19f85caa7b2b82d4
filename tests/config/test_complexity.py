"""No function of :mod:`posenc.config` (and the MRoPE and scaling modules beside it) above cyclomatic
complexity 15, counted as radon counts it: 1, plus 1 per ``if``/``elif``, loop, ``except``,
conditional expression, ``assert``, comprehension and comprehension ``if``, ``match`` case, and
1 per extra operand of ``and`` / ``or`` (ruff's C901, also configured, leaves out the boolean
operators and so counts lower)."""

from __future__ import annotations

import ast
from pathlib import Path

import posenc

LIMIT = 15
ROOT = Path(posenc.__file__).parent
FILES = [
    *sorted((ROOT / "config").glob("*.py")),
    ROOT / "functional" / "rope_scaling.py",
    ROOT / "functional" / "mrope.py",
    ROOT / "schemes" / "mrope.py",
    ROOT / "integrations" / "transformers.py",
]
_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp, ast.Assert, ast.match_case)


def complexity(function: ast.AST) -> int:
    """Cyclomatic complexity of ``function``, nested functions counted on their own."""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        stack.extend(ast.iter_child_nodes(node))
    return count


def functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}", complexity(node))
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_the_counter_counts_branches_and_boolean_operands():
    code = "def f(a, b):\n    if a and b or a:\n        return [x for x in a if x]\n    return 1 if b else 2\n"
    assert complexity(ast.parse(code).body[0]) == 1 + 1 + 2 + 2 + 1


def test_no_function_above_the_limit():
    over = [f"{name} ({value})" for path in FILES for name, value in functions(path) if value > LIMIT]
    assert not over, f"functions above cyclomatic complexity {LIMIT}: {', '.join(over)}"
