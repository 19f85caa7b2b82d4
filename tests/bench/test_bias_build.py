"""Issue 26: the uncached bias builds of posenc.kernels.bias (into a preallocated tensor) give the
schemes' own biases bit for bit, and the bias-build and bias-memory bench sections run on tiny
sizes and fill their fields (timings are benchmarks, not tests)."""

from __future__ import annotations

import pytest
import torch

from posenc.bench import bias as bench
from posenc.bench.report import SECTIONS, markdown, summary_columns
from posenc.functional.toeplitz import relative_range, toeplitz
from posenc.kernels.bias import build_bias, toeplitz_into
from posenc.schemes.fire import fire_bias

TOEPLITZ = [s for s in bench.PARAMETER_ONLY if s != "fire"]


def _scheme(name: str, bidirectional: bool, **options) -> torch.nn.Module:
    torch.manual_seed(0)
    module = bench._bias_scheme(name, 4, bidirectional, **options)
    with torch.no_grad():  # away from the initialisation: every parameter matters
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return module


def _fire(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, out=None):
    return fire_bias(module.mlp, module.c, module.threshold(), module.config.eps, q, k, out=out)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("name", TOEPLITZ)
@pytest.mark.parametrize(("sq", "sk", "q0", "k0"), [(37, 37, 0, 0), (5, 37, 32, 0), (1, 9, 8, 0), (12, 20, 3, 7)])
def test_build_into_out_is_the_schemes_bias_bit_for_bit(name, bidirectional, sq, sk, q0, k0) -> None:
    module = _scheme(name, bidirectional)
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    with torch.no_grad():
        expected = module.bias(q, k)
    out = torch.full((4, sq, sk), float("nan"))  # every element must be written
    assert build_bias(module, q, k, out=out) is out
    assert torch.equal(out, expected)
    assert torch.equal(build_bias(module, q, k), expected)  # a new tensor: the same numbers
    with torch.no_grad():  # the same as the per-head expansion of functional.toeplitz, and every pair's value
        values = module.relative_bias_values(relative_range(sq, sk, q_offset=q0, k_offset=k0))  # [4, w]
        assert torch.equal(out, toeplitz(values, sq, sk))
        assert torch.equal(out, module.bias(q[None], k[None])[0])  # batched positions: the per-pair formula


@pytest.mark.parametrize(("h", "sq", "sk"), [(3, 5, 7), (1, 1, 1), (2, 9, 1), (4, 1, 6), (32, 64, 64)])
def test_toeplitz_into_is_functional_toeplitz(h, sq, sk) -> None:
    values = torch.randn(h, sq + sk - 1)
    out = torch.full((h, sq, sk), float("nan"))
    assert toeplitz_into(values, sq, sk, out) is out
    assert torch.equal(out, toeplitz(values, sq, sk))
    assert out[0, 0, 0] == values[0, sq - 1] and out[-1, -1, 0] == values[-1, 0]  # the layout itself


@pytest.mark.parametrize(("h", "sq", "sk"), [(3, 5, 7), (1, 1, 1), (2, 9, 1), (4, 1, 6)])
def test_toeplitz_is_the_layout_into_any_view(h, sq, sk) -> None:
    """functional.toeplitz (one gather for every head) against the definition ``values[h, j - i +
    sq - 1]``, into a new tensor and into non-contiguous views (filled through a copy)."""
    values = torch.randn(h, sq + sk - 1)
    i, j = torch.arange(sq)[:, None], torch.arange(sk)
    want = values[:, j - i + sq - 1]  # [h, sq, sk]
    assert torch.equal(toeplitz(values, sq, sk), want)
    for big, view in [
        (b := torch.full((h, sq + 3, sk), float("nan")), b[:, 1 : sq + 1]),
        (b := torch.full((h, sq, sk + 2), float("nan")), b[:, :, 1 : sk + 1]),
        (b := torch.full((sk, sq, h), float("nan")), b.permute(2, 1, 0)),
    ]:
        assert toeplitz(values, sq, sk, out=view) is view
        assert torch.equal(view, want)
        assert big.isnan().sum() == big.numel() - want.numel()  # nothing outside the view written


@pytest.mark.parametrize(
    ("sq", "sk", "q0", "k0", "init_L"),
    [
        (40, 40, 0, 0, 8.0),  # rows 0..8 Toeplitz, 9..39 past the threshold
        (40, 43, 5, 0, 8.0),  # queries after the keys' start; keys after the queries (|i - j|)
        (70, 70, 100, 0, 16.0),  # every query past the threshold
        (33, 33, 0, 0, 1000.0),  # every query below it
        (2, 3, 0, 0, 1.0),  # fewer distances than the MLP's smallest batch
        (1, 1, 0, 0, 512.0),
    ],
)
def test_fire_build_into_out_is_fire_bias_bit_for_bit(sq, sk, q0, k0, init_L) -> None:
    module = _scheme("fire", False, init_L=init_L)
    q, k = torch.arange(q0, q0 + sq), torch.arange(k0, k0 + sk)
    with torch.no_grad():
        expected = module.bias(q, k)
    out = torch.full((4, sq, sk), float("nan"))
    assert _fire(module, q, k, out=out) is out
    assert torch.equal(out, expected)
    assert torch.equal(_fire(module, q, k), expected)


def test_fire_is_toeplitz_up_to_its_threshold_and_not_past_it() -> None:
    """Threshold 8 (init_L 8): the normaliser psi(max(8, i)) is one constant for queries 0..8, so
    those rows are shifts of each other; row 9 has its own."""
    module = _scheme("fire", False, init_L=8.0)
    with torch.no_grad():
        module.L_multiplier.fill_(1.0)  # threshold |1 * 8| = 8
        pos = torch.arange(40)
        bias = _fire(module, pos, pos)  # [4, 40, 40]
    below = 9  # queries 0..8
    assert torch.equal(bias[:, 1:below, 1:], bias[:, : below - 1, :-1])
    assert not torch.equal(bias[:, below, 1:], bias[:, below - 1, :-1])


def test_builds_decline_what_is_not_two_ranges_and_refuse_a_wrong_out() -> None:
    alibi, fire = _scheme("alibi", False), _scheme("fire", False)
    scattered, pos = torch.tensor([0, 2, 5]), torch.arange(3)
    assert build_bias(alibi, scattered, pos) is None
    assert build_bias(alibi, pos[None], pos[None]) is None  # batched positions
    assert _fire(fire, scattered, pos) is None
    with pytest.raises(ValueError, match="out must be"):
        build_bias(alibi, pos, pos, out=torch.empty(4, 3, 4))
    with pytest.raises(ValueError, match="out must be"):
        _fire(fire, pos, pos, out=torch.empty(4, 3, 3, dtype=torch.float64))


def test_bias_build_section_rows_and_fields() -> None:
    rows = bench.bench_bias_build((16,), heads=2, schemes=("alibi", "fire"), min_run_time=0.001)
    cases = [r["case"] for r in rows]
    assert cases == [
        "floor fill_ (preallocated)",
        "floor copy_ (preallocated)",
        "alibi out=",
        "alibi new tensor",
        "fire out=",
        "fire FIRE.bias (now)",
        "fire new tensor",
        "fire out= (threshold L)",
    ]
    for r in rows:
        assert {"L", "heads", "scheme", "build", "median_ms", "x_floor", "x_floor_best", "other_cpu"} <= set(r)
        assert r["L"] == 16 and r["heads"] == 2 and r["median_ms"] > 0 and r["x_floor"] > 0
    assert rows[0]["x_floor"] == 1.0 and rows[0]["scheme"] is None
    targets = {r["case"]: r["target_x_floor"] for r in rows}
    assert targets["alibi out="] == targets["fire out= (threshold L)"] == 2.0
    assert targets["alibi new tensor"] is None and targets["floor fill_ (preallocated)"] is None
    text = markdown({"meta": {"device": "cpu"}, "bias-build": rows})
    assert "| 16 | alibi out= |" in text and "x fill" in text
    assert set(summary_columns("bias-build")) <= set(rows[2]) | {"target_x_floor"}
    with pytest.raises(ValueError, match="parameter-only"):
        bench.bench_bias_build((16,), schemes=("forgetting",))


def test_bias_memory_section_runs_one_subprocess_per_scheme(monkeypatch) -> None:
    """The plumbing (the child itself is run by the slow test below)."""
    with pytest.raises(ValueError, match="sdpa"):  # SDPA's materialised bias is ALiBi's
        bench.bench_flex_memory(64, scheme="kerple", modes=("flex", "sdpa"))
    calls = []

    def fake(L, **kw):
        calls.append((L, kw["scheme"], kw["modes"]))
        return [
            {
                "L": L,
                "heads": kw["heads"],
                "mode": "flex",
                "scheme": kw["scheme"],
                "peak_rss_mib": 500.0,
                "baseline_rss_mib": 250.0,
                "peak_rss_over_baseline_mib": 250.0,
                "seconds": 1.0,
            }
        ]

    monkeypatch.setattr(bench, "bench_flex_memory", fake)
    rows = bench.bench_bias_memory(64, heads=2)
    assert calls == [(64, s, ("flex",)) for s in bench.FLEX_SCHEMES]
    assert [r["scheme"] for r in rows] == list(bench.FLEX_SCHEMES) and all(r["target_mib"] == 1024 for r in rows)
    text = markdown({"meta": {"device": "cpu"}, "bias-memory": rows})
    assert "| 64 | 2 | kerple | 500 | 250 | 250 | yes |" in text
    assert "bias-build" in SECTIONS and "bias-memory" in SECTIONS


@pytest.mark.slow
def test_flex_memory_child_runs_a_newer_scheme() -> None:
    (row,) = bench.bench_flex_memory(64, heads=2, head_dim=16, modes=("flex",), repeats=1, scheme="forgetting")
    assert "error" not in row, row
    assert row["scheme"] == "forgetting" and row["peak_rss_mib"] > 0
    assert row["peak_rss_over_baseline_mib"] == pytest.approx(row["peak_rss_mib"] - row["baseline_rss_mib"])
