"""posenc reaches torch through its public APIs only (issue 24): no private modules, no ctypes, no
code-object rewriting, no monkeypatches of torch, no kernel chosen by timing at run time."""

from __future__ import annotations

import ast
import pathlib
import re

import posenc

SRC = pathlib.Path(posenc.__file__).parent
#: Names under ``torch._`` that PyTorch's own user documentation tells users to call.
DOCUMENTED = {"torch._dynamo.mark_dynamic", "torch._dynamo.maybe_mark_dynamic"}
FORBIDDEN = [
    (re.compile(r"\bimport ctypes\b|\bctypes\."), "ctypes"),
    (re.compile(r"__code__|\bCodeType\b|\.co_code\b"), "code-object rewriting"),
    (re.compile(r"^\s*torch(\.\w+)+\s*=[^=]|setattr\(\s*torch\b", re.M), "a monkeypatch of torch"),
]


def _sources() -> list[pathlib.Path]:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 40  # the whole package, not an empty glob
    return files


def test_no_private_torch_names_in_src():
    bad = []
    for path in _sources():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for name in re.findall(r"torch\._[A-Za-z][\w.]*", line):
                if name not in DOCUMENTED:
                    bad.append(f"{path.relative_to(SRC)}:{lineno}: {name}")
    assert not bad, "private torch names in src/posenc:\n" + "\n".join(bad)


def test_no_ctypes_code_rewriting_or_monkeypatches_in_src():
    bad = [
        f"{path.relative_to(SRC)}: {what}"
        for path in _sources()
        for pattern, what in FORBIDDEN
        if pattern.search(path.read_text())
    ]
    assert not bad, "\n".join(bad)


def test_no_kernel_is_chosen_by_timing():
    """In posenc.kernels only warmup() reads a clock (it reports how long compiling took)."""
    clocks = []
    for path in sorted((SRC / "kernels").glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != "warmup":
                calls = {ast.unparse(node.func) for node in ast.walk(fn) if isinstance(node, ast.Call)}
                clocks += [
                    f"{path.name}:{fn.name}" for call in calls if re.search(r"perf_counter|monotonic|time\.time", call)
                ]
    assert not clocks, clocks


def test_the_checks_find_what_they_look_for():
    """The patterns match the constructs the old fast paths used (so the tests above can fail)."""
    assert re.findall(r"torch\._[A-Za-z][\w.]*", "from torch._inductor.codecache import CppCodeCache") == [
        "torch._inductor.codecache"
    ]
    assert re.findall(r"torch\._[A-Za-z][\w.]*", "with torch._dynamo.config.patch(x=1):") == [
        "torch._dynamo.config.patch"
    ]
    samples = {
        "ctypes": "import ctypes\n",
        "code-object rewriting": "f.__code__.replace(co_name='x')\n",
        "a monkeypatch of torch": "torch._inductor.codegen.cpp.CppVecOverrides.to_dtype_bitcast = mine\n",
    }
    for pattern, what in FORBIDDEN:
        assert pattern.search(samples[what]), what
    assert not FORBIDDEN[2][0].search("if torch.x == y:\n")
