"""posenc.analysis.bias: the bias against distance per head, and the comparison table's rows for the
relative and bias schemes since 2022.

Formulas pinned: KERPLE's ``-r1·log(1 + r2·d)`` (Chi et al. 2022, §4.2); Sandwich's
``(Σ_{k=1}^{d'/2} cos(d / base^(2k/d')) - d'/2)·H/(8h)`` (Chi et al. 2023, §5); ALiBi's ``-m_h·d``;
FIRE's ``f(ψ(d)/ψ(max(L, i)))``, ``ψ(x) = log(c·x + 1)`` (Li et al. 2024, §3.2); forgetting
attention's ``Σ_{j<t≤i} log σ(w·x_t + b)`` (Lin et al. 2025, §2).
"""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc import analysis as A
from posenc.analysis.bias import bias_against_distance, random_input_bias


def test_kerple_at_init_is_its_formula() -> None:
    data = bias_against_distance("kerple", length=40, seed=3)
    module = A.build_scheme("kerple", seed=3)
    r1 = module.bias_p.detach().double().clamp(min=1e-2)  # log variant: bias_p is r1, bias_a is r2 (NeoX)
    r2 = module.bias_a.detach().double().clamp(min=1e-2)
    d = torch.arange(40, dtype=torch.float64)
    assert data["queries"] == [39] and not data["depends_on_query"] and data["heads"] == 8
    expected = -r1[:, None] * torch.log1p(r2[:, None] * d)  # [h, D]
    assert torch.allclose(data["values"][0], expected, rtol=1e-6, atol=1e-6)


def test_sandwich_and_alibi_curves_are_their_formulas() -> None:
    sandwich = bias_against_distance("sandwich", length=201)["values"][0]  # [8, 201]
    for d in (0, 1, 7, 100, 200):
        inner = sum(math.cos(d / 10000 ** (2 * k / 128)) for k in range(1, 65)) - 64
        for h in (1, 4, 8):
            assert sandwich[h - 1, d].item() == pytest.approx(inner * 8 / (8 * h), abs=1e-4)
    assert sandwich[:, 0].abs().max() == 0
    alibi = bias_against_distance("alibi", length=50)["values"][0]
    slopes = torch.tensor([2.0 ** -(h + 1) for h in range(8)], dtype=torch.float64)
    assert torch.allclose(alibi, -slopes[:, None] * torch.arange(50, dtype=torch.float64), atol=1e-5)


def test_fire_follows_the_query_past_its_threshold() -> None:
    """Below L = 512 FIRE's bias is a function of the distance; past it the normaliser is ψ(i)."""
    assert not bias_against_distance("fire", length=64)["depends_on_query"]  # queries 63 and 255: below L
    data = bias_against_distance("fire", length=200)
    assert data["depends_on_query"] and data["queries"] == [199, 799, 3199]
    module = A.build_scheme("fire")
    c = module.c.detach().double()

    def by_hand(query: int) -> torch.Tensor:
        d = torch.arange(query + 1, dtype=torch.float64)
        x = torch.log(c * d + 1) / (torch.log(c * max(512.0, query) + 1) + 1e-6)  # ψ(d) / ψ(max(L, i))
        with torch.no_grad():
            return module.mlp(x[:, None].float()).double().T  # [h, query + 1]

    for query, values in zip(data["queries"], data["values"]):
        assert torch.allclose(values, by_hand(query), atol=1e-5)


def test_dpb_is_a_function_of_the_distance() -> None:
    data = bias_against_distance("dpb", length=30, seed=1)
    module = A.build_scheme("dpb", seed=1)
    x = torch.arange(30, dtype=torch.float32)[:, None]
    with torch.no_grad():
        for layer in module.mlp:
            x = layer(x)
    assert not data["depends_on_query"] and torch.allclose(data["values"][0], x.double().T, atol=1e-5)


def test_forgetting_with_constant_gates_is_a_line() -> None:
    """Gates that ignore the input (w = 0): the bias is d·log σ(b) at every input, the band is the line."""
    module = posenc.create("forgetting", dim=8, num_heads=2, bias_init=2.0)
    with torch.no_grad():
        module.forget_gates.weight.zero_()
    data = bias_against_distance(module, length=20, num_samples=3)
    line = torch.arange(20, dtype=torch.float64) * torch.nn.functional.logsigmoid(torch.tensor(2.0)).double()
    assert data["data_dependent"] and data["heads"] == 2
    for key in ("mean", "low", "high"):
        assert torch.allclose(data[key], line.expand(2, 20), atol=1e-5)


def test_forgetting_mean_is_over_samples_and_queries() -> None:
    """The mean at distance d averages c_i - c_{i-d} over every sample and query i >= d, for the
    seeded N(0, 1) input the module docstring names."""
    module = posenc.create("forgetting", dim=8, num_heads=2)
    data = bias_against_distance(module, length=12, num_samples=4, seed=5)
    x = torch.randn(4, 12, 8, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        c = torch.nn.functional.logsigmoid(module.forget_gates(x)).double().cumsum(1)  # [S, n, h]
    for d in (0, 1, 5, 11):
        by_hand = (c[:, d:] - c[:, : 12 - d]).mean(dim=(0, 1))  # [h]
        assert torch.allclose(data["mean"][:, d], by_hand, atol=1e-5)
    assert (data["low"] <= data["mean"] + 1e-12).all() and (data["mean"] <= data["high"] + 1e-12).all()


def test_cope_is_zero_at_init_and_gathered_by_distance() -> None:
    data = bias_against_distance("cope", length=16)
    assert data["heads"] == 1 and data["mean"].abs().max() == 0 and data["high"].abs().max() == 0
    module = posenc.create("cope", dim=8, init_std=0.5)
    term = random_input_bias(module, 10, num_samples=3, seed=2)  # [3, 1, 10, 10]
    data = bias_against_distance(module, length=10, num_samples=3, seed=2)
    for d in (0, 3, 9):
        assert data["mean"][0, d] == pytest.approx(float(term.diagonal(offset=-d, dim1=-2, dim2=-1).mean()))
    assert data["mean"][0].abs().max() > 0


def test_bias_against_distance_refuses_other_families() -> None:
    with pytest.raises(ValueError, match="bias and data-dependent schemes"):
        bias_against_distance("rope")
    with pytest.raises(ValueError, match="at least 2"):
        bias_against_distance("alibi", length=1)


def _rows(names: list[str]) -> dict[str, dict]:
    return {row["scheme"]: row for row in A.verdict_table(names)}


def test_comparison_rows_of_kerple_and_sandwich() -> None:
    rows = _rows(["kerple", "sandwich"])
    v = {name: row["verdict"] for name, row in rows.items()}
    # a bias of the distance alone: the score between p + k and p does not move with p
    assert v["kerple"]["offset_similarity"] == v["sandwich"]["offset_similarity"] == "pass"
    assert rows["kerple"]["results"]["offset_similarity"].value == 0.0
    # −r1·log(1 + r2·t) with r1, r2 > 0 falls at every seed; Sandwich's cosines fall
    assert v["kerple"]["decays_with_distance"] == v["sandwich"]["decays_with_distance"] == "pass"
    assert "whatever they are" in rows["kerple"]["reasons"]["decays_with_distance"]
    # KERPLE's r1, r2 are random draws at initialisation; Sandwich has no parameters
    assert v["sandwich"]["deterministic"] == "pass" and v["kerple"]["deterministic"] == "fail"
    assert v["kerple"]["bounded"] == v["sandwich"]["bounded"] == "fail"
    assert all(v[name]["extrapolates"] == "pass" and v[name]["linear_offset_map"] == "n/a" for name in v)


def test_comparison_rows_of_fire_and_dpb() -> None:
    rows = _rows(["fire", "dpb"])
    v = {name: row["verdict"] for name, row in rows.items()}
    assert v["dpb"]["offset_similarity"] == "pass"
    # FIRE's normaliser follows the query past L = 512: measured, not assumed
    assert v["fire"]["offset_similarity"] == "fail" and "ψ(max(L, i))" in rows["fire"]["reasons"]["offset_similarity"]
    assert "p = 488" in rows["fire"]["reasons"]["offset_similarity"]  # query 513 = 488 + 25, the first past L
    # a random MLP rises or falls with the draw: no decay verdict from luck (FIRE falls at seeds 0-4)
    assert v["fire"]["decays_with_distance"] == v["dpb"]["decays_with_distance"] == "fail"
    assert v["fire"]["deterministic"] == v["dpb"]["deterministic"] == "fail"
    assert v["fire"]["bounded"] == "pass" and v["dpb"]["bounded"] == "fail"
    assert all(v[name]["extrapolates"] == "pass" and v[name]["linear_offset_map"] == "n/a" for name in v)
    assert "function of the distance by construction" not in rows["fire"]["reasons"]["length_invariant"]


def test_comparison_rows_of_the_data_dependent_schemes() -> None:
    rows = _rows(["cope", "forgetting"])
    for name in ("cope", "forgetting"):
        verdict, reasons = rows[name]["verdict"], rows[name]["reasons"]
        assert {verdict[c] for c in ("unique", "bounded", "offset_similarity")} == {A.verdict.INPUT}
        assert reasons["bounded"].startswith("depends on the input") and "N(0" in reasons["bounded"]
        assert verdict["extrapolates"] == "pass" and verdict["length_invariant"] == "n/a"
    assert rows["cope"]["verdict"]["deterministic"] == "pass"  # its table starts at zeros
    assert rows["cope"]["verdict"]["decays_with_distance"] == A.verdict.INPUT
    assert rows["forgetting"]["verdict"]["deterministic"] == "fail"  # random forget-gate weights
    assert rows["forgetting"]["verdict"]["decays_with_distance"] == "pass"  # log f < 0 for any input
    assert "whatever the input" in rows["forgetting"]["reasons"]["decays_with_distance"]
    assert {"cope", "forgetting"} <= set(A.default_schemes())
    built = A.verdict_table([posenc.create("forgetting", dim=16, num_heads=2)])[0]  # rebuilt per seed, as names are
    assert built["verdict"]["deterministic"] == "fail" and built["verdict"]["extrapolates"] == "pass"
