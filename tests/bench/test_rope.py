"""posenc.bench.rope: the cases the RoPE benchmark times."""

from __future__ import annotations

import torch

from posenc.bench import rope as bench_rope


def test_rope_floor_cases_return_q_and_k() -> None:
    """Every floor case moves both q and k, as every posenc case does: a floor of q alone would
    halve the denominator of every ratio in the table."""
    q, k = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    cos, sin = torch.ones(8, 16), torch.zeros(8, 16)  # the identity rotation
    cases, _ = bench_rope._posenc_cases(q, k, cos, sin, "half")
    for name in ("floor", "floor, new tensors"):
        got = cases[name]()
        assert len(got) == 2, name
        assert torch.equal(got[0], q) and torch.equal(got[1], k), name
    got = cases["floor, in place"]()
    assert len(got) == 2
    assert torch.equal(got[0], -q) and torch.equal(got[1], -k)


def test_rope_cases_force_each_backend_and_return_q_and_k() -> None:
    """out= and in place are timed once per forced backend; every posenc case rotates both q and k
    (under the identity rotation each returns them unchanged; the inverse too)."""
    q, k = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    cos, sin = torch.ones(8, 16), torch.zeros(8, 16)
    cases, reset = bench_rope._posenc_cases(q, k, cos, sin, "half", backends=("eager", "reference"))
    assert {f"posenc {kind} ({b})" for kind in ("out=", "in-place") for b in ("eager", "reference")} <= set(cases)
    assert not any("compiled" in name for name in cases)
    for name, fn in cases.items():
        if name.startswith("floor") or name == "posenc Rope.rotate":  # the scheme reads its own tables
            continue
        reset()
        got = fn()
        assert len(got) == 2 and torch.equal(got[0], q) and torch.equal(got[1], k), name
    assert bench_rope._backend_of("posenc out= (eager)", "compiled") == "eager"
    assert bench_rope._backend_of("posenc Rope.rotate", "compiled") == "compiled"
    assert bench_rope._backend_of("floor", "compiled") is None


def test_forced_backends_are_those_that_take_the_input() -> None:
    """The complex multiply is forced only for interleaved pairs it can take (float32 here), the
    Triton kernel only where it serves the input (not on the CPU): no backend is timed under the
    name of another it would hand the work to."""
    q, cos = torch.randn(1, 2, 8, 16), torch.ones(8, 16)
    assert bench_rope.forced_backends(q, cos, "half") == ("compiled", "eager", "reference")
    assert bench_rope.forced_backends(q, cos, "interleaved") == ("compiled", "complex", "eager", "reference")
    assert bench_rope.forced_backends(q.bfloat16(), cos, "interleaved") == ("compiled", "eager", "reference")
