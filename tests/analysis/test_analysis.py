"""posenc.analysis: encoding matrices, distance matrices, property checks, logit curves, 2-D data.

Formulas pinned here: the sinusoid's dot product Σ_i cos(k·ω_i) (Kazemnejad 2019); RoFormer's
relative upper bound (Su et al. 2021, section 3.4.3); ALiBi's slopes 2^(-8h/H) (Press et al. 2022,
section 3); T5's buckets (Raffel et al. 2020, section 2.1; HF ``T5Attention._relative_position_bucket``).
"""

import math
import sys

import numpy as np
import pytest
import torch

import posenc
from posenc import analysis as A
from posenc import functional as F
from posenc.analysis import default_schemes, encoding_matrix, project_2d, t5_bucket_map


def inv_freq(dim: int, base: float = 10000.0) -> torch.Tensor:
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


# --- encoding matrices -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in A.default_schemes() if not A.is_data_dependent(n)])
def test_every_default_scheme_gives_a_float64_matrix(name: str) -> None:
    E = A.encoding_matrix(name, 40)
    assert E.dtype == torch.float64 and E.dim() == 2 and E.shape[0] == 40 and torch.isfinite(E).all()


def test_none_is_zeros_and_learned_is_its_table() -> None:
    assert torch.equal(A.encoding_matrix("none", 5, dim=7), torch.zeros(5, 7, dtype=torch.float64))
    learned = posenc.create("learned", dim=16, max_len=32)
    assert torch.equal(A.encoding_matrix(learned, 32), learned.table.weight.detach().double())
    with pytest.raises(ValueError, match="position 32 is outside the learned table"):
        A.encoding_matrix(learned, 33)


def test_rope_matrix_is_cos_sin_of_the_angles_and_shares_the_sinusoid_dot_products() -> None:
    E = A.encoding_matrix("rope", 50, dim=32, layout="interleaved")
    angles = torch.arange(50, dtype=torch.float64)[:, None] * inv_freq(32)  # [50, 16]
    assert torch.allclose(E[:, 0::2], angles.cos(), atol=1e-12) and torch.allclose(E[:, 1::2], angles.sin(), atol=1e-12)
    half = A.encoding_matrix("rope", 50, dim=32)  # layout "half": cos block then sin block
    assert torch.allclose(half[:, :16], angles.cos(), atol=1e-12)
    sinusoid = A.encoding_matrix("sinusoidal", 50, dim=32)
    assert torch.allclose(A.dot_matrix(E), A.dot_matrix(sinusoid), atol=1e-11)


def test_bias_and_shaw_rows_are_the_key_p_tokens_back() -> None:
    alibi = A.encoding_matrix("alibi", 10, num_heads=8)  # causal: -m_h * (query - key) with the key at 0
    slopes = torch.tensor([2.0 ** -(h + 1) for h in range(8)], dtype=torch.float64)
    assert torch.allclose(alibi, -torch.arange(10, dtype=torch.float64)[:, None] * slopes, atol=1e-7)
    t5 = posenc.create("t5", num_heads=4)
    buckets = F.t5_relative_bucket(-torch.arange(300))
    assert torch.equal(A.encoding_matrix(t5, 300), t5.relative_attention_bias.weight.detach().double()[buckets])
    shaw = A.encoding_matrix("shaw", 40, dim=8, max_relative_position=5)
    assert torch.equal(shaw[5:], shaw[5].expand(35, 8)) and not torch.equal(shaw[4], shaw[5])


def test_encoding_matrix_errors() -> None:
    with pytest.raises(ValueError, match="unknown scheme 'roap'.*sinusoidal.*sine_only"):
        A.encoding_matrix("roap", 4)
    with pytest.raises(ValueError, match="1-D tensor.*\\(2, 3\\)"):
        A.encoding_matrix("sinusoidal", torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="cannot be applied"):
        A.encoding_matrix(posenc.create("rope", dim=8), 4, dim=16)


def test_atlas_defaults_and_seeded_builds() -> None:
    assert A.atlas_config("rope", base=500.0) == {"dim": 64, "base": 500.0}
    state = torch.random.get_rng_state()
    a, b = A.encoding_matrix("learned", 8, seed=3), A.encoding_matrix("learned", 8, seed=3)
    assert torch.equal(a, b) and not torch.equal(a, A.encoding_matrix("learned", 8, seed=4))
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is untouched


# --- matrices ----------------------------------------------------------------------------------------


def test_distance_matrices_on_a_hand_example() -> None:
    E = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0], [3.0, 0.0]])
    assert A.dot_matrix(E)[0].tolist() == [1.0, 0.0, 0.0, 3.0]
    assert A.distance_matrix(E)[0].tolist() == pytest.approx([0.0, math.sqrt(5), 1.0, 2.0])
    cos = A.cosine_distance_matrix(E)
    assert cos[0, 1].item() == 1.0 and cos[0, 3].item() == 0.0 and cos[0, 2].isnan() and cos[2, 2].isnan()
    assert A.distance_from(E, 0, metric="euclidean").tolist() == pytest.approx([0.0, math.sqrt(5), 1.0, 2.0])
    assert A.distance_from(E, 0).tolist()[:2] == [0.0, 1.0]
    with pytest.raises(ValueError, match="row index in \\[0, 4\\), got 4"):
        A.distance_from(E, 4)
    with pytest.raises(ValueError, match="unknown metric 'manhattan'"):
        A.distance_from(E, 0, metric="manhattan")


def test_distance_vs_offset_is_a_function_of_the_offset_for_the_sinusoid() -> None:
    E = A.encoding_matrix("sinusoidal", 200, dim=64)
    result = A.distance_vs_offset(E, metric="dot")
    expected = torch.cos(torch.arange(200, dtype=torch.float64)[:, None] * inv_freq(64)).sum(-1)  # Σ_i cos(k ω_i)
    assert torch.allclose(result["min"], expected, atol=1e-10) and torch.allclose(result["max"], expected, atol=1e-10)
    learned = A.distance_vs_offset(A.encoding_matrix("learned", 200), metric="cosine")
    assert (learned["max"][1:50] - learned["min"][1:50]).min() > 0.1


# --- checks ------------------------------------------------------------------------------------------


def test_sinusoid_passes_every_check() -> None:
    results = {r.name: r for r in A.run_checks("sinusoidal")}
    assert list(results) == list(A.CRITERIA)
    assert all(r.passed for r in results.values()), [r.detail for r in results.values() if not r.passed]
    assert results["linear_offset_map"].value < 1e-12
    assert results["unique"].data["min_distance_float32"] > 1.9 and results["unique"].data["collision_float32"] is None
    assert results["bounded"].value == 1.0 and not results["bounded"].data["grows"]
    assert results["distance_monotone"].value == pytest.approx(0.88, abs=0.01)  # d = 128: rank trend from position 1
    assert results["decays_with_distance"].value == pytest.approx(-0.88, abs=0.01)  # Σ cos(tω_i), same trend
    assert results["extrapolates"].value == 4095


def test_learned_table_fails_the_structural_checks() -> None:
    linear = A.check_linear_offset_map("learned")
    assert not linear.passed and linear.value > 1.0  # ~1.44: random rows, the fitted map does worse than zero
    assert not A.check_offset_similarity("learned").passed
    deterministic = A.check_deterministic("learned")  # Pim 2023: codes must not change between initialisations
    assert (
        not deterministic.passed
        and deterministic.data["seed_dependent"]
        and "seeds 0 and 1 give codes differing" in deterministic.detail
    )
    assert not A.check_deterministic("sinusoidal").data["seed_dependent"]
    extrapolates = A.check_extrapolates(
        "learned"
    )  # "A Brief Summary on Positional Encoding Methods": nothing past max_len
    assert not extrapolates.passed and extrapolates.data["furthest"] == 1023
    assert not A.check_decays_with_distance("learned").passed


def test_rotary_checks_use_the_actual_query_key_logit() -> None:
    """xPos's query code alone decays, but the query·key logit depends on the offset alone."""
    xpos = A.check_offset_similarity("xpos", dim=32)
    assert xpos.passed and xpos.value < 1e-12
    q = A.encoding_matrix("xpos", 256, dim=32)
    assert (q[200] * q[205]).sum() < (q[0] * q[5]).sum()  # the query code alone is not offset-only


def test_length_invariance_catches_dynamic_rope_scaling() -> None:
    """HF's dynamic NTK rescales the frequencies once the sequence passes the original length (64 here)."""
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}
    result = A.check_length_invariant("rope", lengths=(32, 256), scaling=dynamic)
    assert not result.passed and result.value > 0.5
    # lengths that stay below the switch are widened to straddle it (they used to pass at 2048)
    long_context = {**dynamic, "original_max_position_embeddings": 2048}
    straddled = A.check_length_invariant("rope", lengths=(32, 256), scaling=long_context)
    assert not straddled.passed and straddled.data["lengths"] == (32, 4096)
    assert A.check_length_invariant("rope", scaling={"rope_type": "linear", "factor": 2.0}).passed


def test_rotary_checks_catch_a_broken_rotation(monkeypatch) -> None:
    """A rotation with the wrong sign on the second feature of each pair (x·cos + [x2, x1]·sin) is not
    orthogonal: q·k then depends on absolute position. The unit query (1, 0 per pair) cannot see it;
    the random query and key of offset_similarity must."""
    from posenc.schemes import rope as rope_module

    assert A.check_offset_similarity("rope").passed

    def broken(q, k, cos, sin, layout="half"):
        n = cos.shape[-1] // 2
        turn = lambda x: x * cos + torch.cat((x[..., n:], x[..., :n]), -1) * sin  # noqa: E731
        return turn(q), turn(k)

    monkeypatch.setattr(rope_module, "rope", lambda x, cos, sin, **kw: broken(x, x, cos, sin)[0])
    monkeypatch.setattr(rope_module, "rope_pair", lambda q, k, cos, sin, **kw: broken(q, k, cos, sin))
    result = A.check_offset_similarity("rope")
    assert not result.passed and result.value > 0.1


def test_constant_attention_factor_is_not_unboundedness() -> None:
    """YaRN multiplies cos and sin by 0.1 ln s + 1 at every position: not growth with the length."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    result = A.check_bounded("rope", scaling=yarn)
    assert result.passed and result.value == pytest.approx(1.0) and result.data["attention_scale"] > 1.13


def test_distance_trend_does_not_flip_with_the_ripple() -> None:
    """The first dip of the distance used to decide: the paper's sinusoid failed at d = 32 and RoPE at
    base 500000. A rank trend over all offsets passes both and still fails learned rows and bits."""
    assert A.check_distance_monotone("sinusoidal", dim=32).passed
    assert A.check_distance_monotone("rope", base=500000.0).passed
    assert not A.check_distance_monotone("learned").passed and not A.check_distance_monotone("binary").passed


def test_ties_share_their_rank() -> None:
    """A fall to a plateau is a fall (distances past a clipping point tie); it used to read as a rise."""
    from posenc.analysis.checks import _rank_correlation

    plateau = torch.cat((-torch.arange(32.0), torch.full((224,), -31.0)))
    assert _rank_correlation(plateau) < -0.5  # -0.57; ties broken by order made it +0.36
    assert _rank_correlation(torch.ones(10)) == 0.0


def test_explanations_stand_only_beside_the_verdict_they_explain() -> None:
    """RoPE at d = 8 does not decay over 255 positions: the row must not quote RoFormer's decay."""
    row = A.verdict_table([posenc.create("rope", dim=8)])[0]
    assert row["verdict"]["decays_with_distance"] == "fail"
    assert "long-term decay" not in row["reasons"]["decays_with_distance"]
    long_table = A.verdict_table([posenc.create("learned", dim=8, max_len=4096)])[0]
    assert long_table["verdict"]["extrapolates"] == "pass"
    assert "no position embeddings beyond" not in long_table["reasons"]["extrapolates"]


def test_biases_decay_where_their_formula_does() -> None:
    alibi = A.check_decays_with_distance("alibi")
    assert alibi.passed and alibi.value == pytest.approx(-1.0)
    t5 = A.check_decays_with_distance("t5")  # learned buckets: random at initialisation, one draw may fall
    assert not t5.passed and len(t5.data["per_seed"]) == 8
    assert A.applicable_checks("t5") == (
        "unique",
        "bounded",
        "deterministic",
        "offset_similarity",
        "decays_with_distance",
        "extrapolates",
    )


def test_checks_accept_a_built_module() -> None:
    module = posenc.create("learned", dim=32, max_len=100)
    results = {r.name: r for r in A.run_checks(module)}
    assert results["unique"].data["n"] == 100 and not results["deterministic"].passed  # random rows
    assert not results["linear_offset_map"].passed
    with pytest.raises(ValueError, match="cannot be applied"):
        A.run_checks(module, dim=8)


def test_unique_finds_the_first_collision_and_bias_schemes_are_relative() -> None:
    shaw = A.check_unique("shaw", max_relative_position=16)
    assert not shaw.passed and shaw.data["collision_float64"] == (16, 17)
    t5 = A.check_unique("t5")
    assert not t5.passed and t5.data["collision_float64"] == (8, 9)  # T5: distances 8 and 9 share a bucket
    assert A.check_unique("t5").detail.startswith("distances 8 and 9")
    alibi = A.check_bounded("alibi", n=1024, num_heads=8)
    assert not alibi.passed and alibi.value == 511.5 and alibi.data["grows"]


def test_bounded_measures_both_sides_of_a_rotation() -> None:
    """xPos scales the query by ζ^(m/B) and the key by ζ^(−n/B): the key grows along the sequence,
    so xPos is not bounded (the check used to look at the shrinking query only and passed it).
    Plain RoPE rotates unit vectors on both sides: bounded by 1."""
    xpos = A.check_bounded("xpos", n=1024, dim=64)
    ref = posenc.create("xpos", dim=64)
    u = torch.zeros(1, 1, 1024, 64)
    u[..., 0] = 1.0
    _, k = ref.rotate(u, u, torch.arange(1024), torch.arange(1024))
    assert not xpos.passed and xpos.data["grows"] and xpos.value > 10
    assert xpos.value == pytest.approx(float(k.abs().max()), rel=1e-5)  # the largest key entry
    rope = A.check_bounded("rope", n=1024, dim=64)
    assert rope.passed and rope.value == pytest.approx(1.0, abs=1e-12)


def test_check_result_fields() -> None:
    r = A.check_linear_offset_map("sinusoidal", offsets=(1, 3))
    d = r.as_dict()
    assert set(d) == {"name", "value", "threshold", "passed", "detail", "comparison", "scheme", "data"}
    assert d["scheme"] == "sinusoidal" and d["threshold"] == 1e-6 and d["comparison"] == "<"
    assert set(r.data["residuals"]) == {1, 3}


def test_verdict_table_rows_and_reasons() -> None:
    rows = {
        row["scheme"]: row for row in A.verdict_table(["sinusoidal", "sine_only", "index", "fraction", "alibi", "none"])
    }
    assert set(rows["sinusoidal"]["verdict"].values()) == {"pass"}
    assert rows["sine_only"]["verdict"]["linear_offset_map"] == "fail"
    assert "cos(ωp)" in rows["sine_only"]["reasons"]["linear_offset_map"]
    assert rows["index"]["verdict"]["bounded"] == "fail" and rows["fraction"]["verdict"]["length_invariant"] == "fail"
    assert rows["alibi"]["verdict"]["linear_offset_map"] == "n/a" and rows["alibi"]["verdict"]["bounded"] == "fail"
    assert rows["none"]["verdict"]["unique"] == "fail" and rows["index"]["reference"]


@pytest.mark.slow
def test_default_verdict_table_has_a_row_per_default_scheme() -> None:
    """The report's comparison table: one row per default scheme, in their order (how long it
    takes is the report's business, measured by ``posenc report``, not asserted here)."""
    rows = A.verdict_table()
    assert [row["scheme"] for row in rows] == A.default_schemes()


def test_default_schemes_leave_out_grid_schemes():
    """default_schemes lists the schemes for positions on a line: the grid ones (n_axes > 1,
    sinusoidal_nd and rope_axial) are left out, while the line schemes are kept."""
    names = default_schemes()
    assert "sinusoidal_nd" not in names and "rope_axial" not in names
    assert "sinusoidal" in names and "rope" in names


# --- logits against distance -------------------------------------------------------------------------


def test_rope_bound_is_roformer_eq_and_decays() -> None:
    t = torch.tensor([0, 7, 100])
    bound = A.rope_decay_bound(inv_freq(64), t)
    for i, ti in enumerate(t.tolist()):  # the sum written out: (1/32) Σ_j |Σ_{k<j} e^{i t θ_k}|
        partial = [
            sum(complex(math.cos(ti * w), math.sin(ti * w)) for w in inv_freq(64)[:j].tolist()) for j in range(1, 33)
        ]
        assert bound[i].item() == pytest.approx(sum(abs(s) for s in partial) / 32, rel=1e-12)
    assert bound[0].item() == 16.5


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotary_logit_curve_matches_the_closed_form(name: str) -> None:
    """R(t)v·v = Σ_i (v_a² + v_b²) cos(t θ_i), times ζ_i^(t/B) for xPos; the same seeded draws."""
    out = A.logits_vs_distance(name, max_distance=64, num_samples=32, dim=16)
    v = torch.randn(32, 1, 1, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)[:, 0, 0]
    energy = v[:, :8] ** 2 + v[:, 8:] ** 2  # [S, 8]: layout "half" pairs (i, i + 8)
    t = torch.arange(64, dtype=torch.float64)[:, None]
    per_pair = torch.cos(t * inv_freq(16))  # [64, 8]
    if name == "xpos":
        zeta = (torch.arange(0, 16, 2, dtype=torch.float64) + 0.4 * 16) / (1.4 * 16)
        per_pair = per_pair * zeta ** (t / 512.0)
    expected = (energy @ per_pair.T / 16).mean(0)  # [64]
    assert torch.allclose(out["mean"], expected, atol=1e-12) and torch.equal(out["logits"][0], out["mean"])
    assert out["bound"][63] < 0.85 * out["bound"][0]  # 8 pairs: 4.5 -> 3.63 (rope), 3.30 (xpos)


def test_bias_and_shaw_logit_curves() -> None:
    alibi = A.logits_vs_distance("alibi", max_distance=20, num_heads=8)
    assert alibi["slopes"][0].item() == 0.5 and alibi["logits"][0, 10].item() == -5.0 and len(alibi["labels"]) == 8
    shaw = A.logits_vs_distance("shaw", max_distance=30, dim=8, max_relative_position=4)
    assert torch.allclose(shaw["logits"][:, 4:], shaw["logits"][:, 4:5].expand(4, 26), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="rotary, bias or relative.*'sinusoidal'"):
        A.logits_vs_distance("sinusoidal")


def test_t5_bucket_map_pins_hf_buckets() -> None:
    """Values of HF ``T5Attention._relative_position_bucket`` (bidirectional, 32 buckets, max_distance 128)."""
    m = A.t5_bucket_map(max_relative=300)
    bucket = dict(zip(m["relative_positions"].tolist(), m["buckets"].tolist()))
    assert [bucket[r] for r in (0, 1, -1, -7, -8, -20, -127, -128, -300, 200)] == [0, 17, 1, 7, 8, 10, 15, 15, 15, 31]
    assert m["max_exact"] == 8


def test_t5_bucket_map_defaults_to_twice_max_distance():
    """t5_bucket_map's relative positions run over [-2·max_distance, 2·max_distance] by default (its
    docstring), so the picture shows the log buckets saturating: -32..32 for max_distance 16."""
    rel = t5_bucket_map(max_distance=16)["relative_positions"]
    assert torch.equal(rel, torch.arange(-32, 33))


def test_shaw_embeddings() -> None:
    out = A.shaw_embeddings(dim=8, max_relative_position=3)
    assert out["relative_positions"].tolist() == [-3, -2, -1, 0, 1, 2, 3]
    assert out["key"].shape == (7, 8) and out["value"].shape == (7, 8)


# --- 2-D pictures ------------------------------------------------------------------------------------


def test_pca_recovers_a_circle_and_umap_names_its_extra() -> None:
    angle = torch.linspace(0, 2 * math.pi, 100, dtype=torch.float64)[:-1]
    E = torch.zeros(99, 5, dtype=torch.float64)
    E[:, 1], E[:, 3] = 2 * angle.cos(), 2 * angle.sin()
    points = A.project_2d(E)
    assert points.shape == (99, 2) and torch.allclose(
        points.norm(dim=-1), torch.full((99,), 2.0, dtype=torch.float64), atol=1e-12
    )
    assert torch.equal(points, A.project_2d(E))
    try:
        import umap  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="posenc\\[umap\\]"):
            A.project_2d(E, method="umap")


def test_pca_projection_matches_the_covariance_eigenvectors():
    """project_2d(E, "pca") is E centred, on the two leading eigenvectors of its covariance, each
    oriented so that its largest-magnitude loading is positive (the documented convention). The
    reference here uses numpy's eigh of the covariance rather than an SVD; the projected columns
    have mean 0. atol 1e-10."""
    E = encoding_matrix("sinusoidal", 64, dim=16)  # [64, 16] float64
    got = project_2d(E)
    X = E.numpy()
    C = X - X.mean(axis=0, keepdims=True)
    evals, evecs = np.linalg.eigh(C.T @ C)
    order = np.argsort(evals)[::-1][:2]
    assert evals[order[0]] - evals[order[1]] > 1e-6 * evals[order[0]]  # distinct axes: the reference is unique
    assert evals[order[1]] - evals[np.argsort(evals)[::-1][2]] > 1e-6 * evals[order[0]]
    axes = evecs[:, order]  # [16, 2]
    axes = axes * np.sign(axes[np.abs(axes).argmax(axis=0), [0, 1]])
    expected = torch.tensor(C @ axes)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(got.mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-10, rtol=0)


def test_word_plus_position_lies_on_the_unit_circle() -> None:
    out = A.word_plus_position(6)
    assert out["points"].shape == (2, 6, 2)
    radius = (out["points"] - out["words"][:, None]).norm(dim=-1)
    assert torch.allclose(radius, torch.ones(2, 6, dtype=torch.float64), atol=1e-15)
    assert out["codes"][1].tolist() == pytest.approx([math.sin(1.0), math.cos(1.0)])


def test_binary_bits_beside_sinusoid_bands() -> None:
    bits = A.binary_bits(8, 3)
    assert bits[:, 0].tolist() == [0, 1] * 4 and bits[:, 2].tolist() == [0] * 4 + [1] * 4


def test_analysis_imports_torch_and_the_standard_library_only() -> None:
    """Module-level imports of posenc.analysis (read with ast, so other tests' imports cannot mask one)."""
    import ast
    import pathlib

    allowed = {"torch", "__future__", *sys.stdlib_module_names}
    for path in pathlib.Path(A.__file__).parent.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            assert all(name.split(".")[0] in allowed for name in names), (path.name, names)


def test_a_code_of_one_direction_draws_as_zeros_not_round_off() -> None:
    """``index`` and ``fraction`` codes are one vector scaled: every cosine distance is 0 and the
    second principal axis is empty. Round-off used to show as a pattern (distances of ±6e-15 on
    the colour scale, a PCA axis of 1e-12 drawn as structure)."""
    from posenc.analysis import cosine_distance_matrix, project_2d

    code = torch.arange(1, 301, dtype=torch.float64)[:, None] * torch.randn(1, 64, dtype=torch.float64)  # [300, 64]
    assert torch.equal(cosine_distance_matrix(code), torch.zeros(300, 300, dtype=torch.float64))
    assert torch.equal(A.distance_from(code, 1), torch.zeros(300, dtype=torch.float64))  # the "cosine" figure
    points = project_2d(code)
    assert torch.equal(points[:, 1], torch.zeros(300, dtype=torch.float64)) and points[:, 0].std() > 1
    spread = project_2d(torch.randn(300, 64, dtype=torch.float64))  # a full-rank code keeps both axes
    assert spread[:, 1].abs().min() >= 0 and spread[:, 1].std() > 0.5
    close = torch.tensor([[1.0, 0.0], [1.0, 1e-5]], dtype=torch.float64)  # a real small distance stays
    assert cosine_distance_matrix(close)[0, 1] == pytest.approx(5e-11, rel=1e-3)
