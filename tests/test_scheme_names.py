"""Nothing outside a scheme's own module and the registry names a scheme (docs/design.md, "Capabilities
and hooks"): the functional core, the kernels, attention, FlexAttention, the scheme protocol and
the row caches reach schemes through their hooks only. In those files no string constant equals a
registered scheme name, no ``isinstance``/``issubclass`` tests a scheme class, and no scheme's
module is imported."""

from __future__ import annotations

import ast
import pathlib

import pytest

import posenc

SRC = pathlib.Path(posenc.__file__).parent
FILES = sorted(
    [
        *(SRC / "functional").rglob("*.py"),
        *(SRC / "kernels").rglob("*.py"),
        SRC / "attention.py",
        SRC / "flex.py",
        SRC / "schemes" / "base.py",
        SRC / "schemes" / "_cache.py",
    ]
)

#: String constants that spell a scheme's name but mean something else, per file.
NOT_SCHEME_NAMES = {
    ("functional/multidim.py", "rope"): "an axial frequency spacing (frequencies='rope', RoFormer's), a value of "
    "F.axial_rope_inv_freq",
    ("schemes/base.py", "none"): "the family 'none' (FAMILIES), which the scheme protocol declares",
}


def _schemes() -> dict[str, type]:
    return {name: posenc.scheme_class(name) for name in posenc.available()}


def _all_entries(tree: ast.Module) -> set[int]:
    """ids of the string constants in ``__all__ = [...]``: names of this module's own functions."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                ids.update(id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return ids


def _names_in(node: ast.expr) -> set[str]:
    """Identifiers a type argument of isinstance refers to: ``Rope``, ``schemes.Rope``, tuples of them."""
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    }


def _mentions(source: str, rel: str, package: str) -> list[str]:
    """Where ``source`` (file ``rel`` of package ``package``) names a scheme."""
    tree = ast.parse(source, filename=rel)
    schemes = _schemes()
    exports = _all_entries(tree)
    classes = {cls.__name__ for cls in schemes.values()}
    modules = {cls.__module__ for cls in schemes.values()}
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in schemes
            and id(node) not in exports
            and (rel, node.value) not in NOT_SCHEME_NAMES
        ):
            found.append(f"line {node.lineno}: the string {node.value!r}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and _names_in(node.args[1]) & classes
        ):
            found.append(f"line {node.lineno}: {node.func.id} against {sorted(_names_in(node.args[1]) & classes)}")
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            imported = {module, *(f"{module}.{alias.name}" for alias in node.names)}
            if imported & modules:
                found.append(f"line {node.lineno}: imports {sorted(imported & modules)}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_scheme_is_named(path: pathlib.Path) -> None:
    rel = str(path.relative_to(SRC))
    package = ".".join(path.relative_to(SRC.parent).parent.parts)  # posenc, posenc.kernels, ...
    found = _mentions(path.read_text(), rel, package)
    assert not found, f"{rel} names schemes; ask them through their hooks instead: {found}"


def test_the_check_finds_each_kind_of_mention() -> None:
    sample = (
        "from .schemes.rope import Rope\n__all__ = ['alibi']\n"
        "def f(enc):\n    return enc.name == 'alibi' or isinstance(enc, (Rope, int))\n"
    )
    assert sorted(_mentions(sample, "attention.py", "posenc")) == [
        "line 1: imports ['posenc.schemes.rope']",
        "line 4: isinstance against ['Rope']",
        "line 4: the string 'alibi'",
    ]
