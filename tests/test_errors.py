"""Bad input gets a ValueError or TypeError naming the value received and what is accepted (issue 2, item 7).

Every case asserts both halves of the message: the offending value, and the accepted choices or range.
"""

from __future__ import annotations

import re

import pytest
import torch

import posenc
from posenc import functional as F

INV8, _ = F.rope_inv_freq(8)


def _raises(exc: type[Exception], *fragments: str):
    """pytest.raises whose message must contain every fragment (matched literally)."""
    return pytest.raises(exc, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


# -- dims that must be positive and even -------------------------------------------------------


@pytest.mark.parametrize("dim", [7, 1, 0, -4])
@pytest.mark.parametrize(
    "call",
    [
        lambda d: F.sinusoidal(4, d),
        lambda d: F.sinusoidal_inv_freq(d),
        lambda d: F.rope_inv_freq(d),
        lambda d: posenc.create("sinusoidal", dim=d),
        lambda d: posenc.create("rope", dim=d),
        lambda d: posenc.create("xpos", dim=d),
    ],
    ids=["sinusoidal", "sinusoidal_inv_freq", "rope_inv_freq", "create-sinusoidal", "create-rope", "create-xpos"],
)
def test_odd_or_non_positive_dims(request, call, dim: int) -> None:
    if dim > 0 and request.node.callspec.id.startswith("rope_inv_freq"):
        assert F.rope_inv_freq(dim)[0].shape == ((dim + 1) // 2,)  # an odd width is HF's GPT-NeoX reading
        return
    accepted = "positive even number" if dim > 0 else "positive"
    with _raises(ValueError, f"got {dim}", accepted):
        call(dim)


def test_non_integer_dim() -> None:
    with _raises(TypeError, "got 7.5", "positive integer"):
        F.rope_inv_freq(7.5)
    with _raises(TypeError, "got '8'", "positive integer"):
        F.sinusoidal(4, "8")


def test_rotary_dim_odd_or_too_wide() -> None:
    rope = posenc.create("rope", dim=16, rotary_dim=5)  # HF GPT-NeoX's odd width: 3 pairs over base^(-2i/5)
    assert rope.config.rotary_width == 6
    torch.testing.assert_close(rope.inv_freq, 10000.0 ** (-torch.arange(0, 5, 2, dtype=torch.float64) / 5))
    with _raises(ValueError, "rotary_dim", "got 32", "at most dim=16"):
        posenc.create("rope", dim=16, rotary_dim=32)
    with _raises(ValueError, "rotary_dim", "got 17", "at most dim=16", "rounded up to even"):
        posenc.create("rope", dim=16, rotary_dim=17)
    with _raises(ValueError, "rotary_dim", "got 0", "positive"):
        posenc.create("rope", dim=16, rotary_dim=0)


def test_odd_table_width_in_apply_rope() -> None:
    x = torch.randn(1, 1, 2, 8)
    with _raises(ValueError, "got 3", "positive even"):
        F.apply_rope(x, torch.ones(2, 3), torch.ones(2, 3))


# -- unknown names ----------------------------------------------------------------------------


def test_unknown_scheme_lists_available() -> None:
    with _raises(ValueError, "'rotary'", *posenc.available()):
        posenc.create("rotary")
    with _raises(ValueError, "'rotary'", "alibi", "rope"):
        posenc.Attention(32, 4, encoding="rotary")


def test_unknown_config_key_lists_accepted() -> None:
    with _raises(ValueError, "theta", "base", "layout", "scaling"):
        posenc.create("rope", dim=8, theta=10000.0)
    with _raises(ValueError, "needs ['num_heads']", "num_heads"):
        posenc.create("alibi")


def test_wrong_encoding_type() -> None:
    with _raises(TypeError, "int", "scheme name", "PositionalEncoding"):
        posenc.Attention(32, 4, encoding=3)


@pytest.mark.parametrize(
    "scaling, fragments",
    [
        ({"rope_type": "yarnn", "factor": 4.0}, ["'yarnn'", "'linear'", "'default'"]),
        ("magic", ["'magic'", "'linear'"]),
        ({"rope_type": "linear", "factor": 4.0, "alpha": 1}, ["'alpha'", "factor"]),
        ({"rope_type": "linear"}, ["needs ['factor']", "factor"]),
        ({"rope_type": "linear", "factor": -2.0}, ["-2.0", "positive number"]),
    ],
)
def test_bad_rope_scaling(scaling, fragments: list[str]) -> None:
    with _raises(ValueError, *fragments):
        F.rope_inv_freq(8, scaling=scaling)
    with _raises(ValueError, *fragments):
        posenc.create("rope", dim=8, scaling=scaling)


def test_scaling_of_wrong_type() -> None:
    with _raises(TypeError, "list", "rope_scaling dict"):
        F.rope_inv_freq(8, scaling=["linear"])


@pytest.mark.parametrize(
    "call, fragments",
    [
        (lambda: F.sinusoidal(4, 8, layout="split"), ["'split'", "'interleaved'", "'half'"]),
        (lambda: F.sinusoidal(4, 8, frequencies="fairseq"), ["'fairseq'", "'paper'", "'tensor2tensor'"]),
        (lambda: F.rope_cos_sin(4, INV8, layout="neox"), ["'neox'", "'half'", "'interleaved'"]),
        (
            lambda: F.apply_rope(torch.ones(2, 8), torch.ones(2, 8), torch.ones(2, 8), layout="gptj"),
            ["'gptj'", "'half'", "'interleaved'"],
        ),
        (lambda: posenc.create("rope", dim=8, layout="gptj"), ["'gptj'", "'half'", "'interleaved'"]),
        (lambda: posenc.create("sinusoidal", dim=8, combine="sum"), ["'sum'", "'add'", "'concat'"]),
        (lambda: posenc.create("learned", dim=8, combine="mul"), ["'mul'", "'add'", "'concat'"]),
    ],
)
def test_unknown_choices(call, fragments: list[str]) -> None:
    with _raises(ValueError, *fragments):
        call()


def test_bad_base() -> None:
    with _raises(ValueError, "got 1.0", "greater than 1"):
        F.rope_inv_freq(8, base=1.0)
    with _raises(ValueError, "got nan", "finite number greater than 1"):
        F.sinusoidal(4, 8, base=float("nan"))


# -- learned table bounds and integer positions -----------------------------------------------


def test_position_past_learned_table() -> None:
    learned = posenc.create("learned", dim=8, max_len=16)
    with _raises(ValueError, "position 16", "max_len=16", "0..15"):
        learned.encode(torch.tensor([3, 16]))
    with _raises(ValueError, "position -1", "0..15"):
        learned.encode(torch.tensor([-1, 2]))
    attn = posenc.Attention(8, 2, encoding=posenc.create("learned", dim=8, max_len=4))
    with _raises(ValueError, "position 4", "max_len=4"):
        attn(torch.randn(1, 5, 8))


@pytest.mark.parametrize(
    "call",
    [
        lambda: F.t5_relative_bucket(torch.tensor([0.0, 1.5])),
        lambda: posenc.create("t5", num_heads=2).bias(torch.tensor([0.0, 1.5]), torch.arange(2)),
        lambda: posenc.create("learned", dim=8).encode(torch.tensor([0.0, 1.5])),
        lambda: F.clipped_relative_index(torch.tensor([0.0, 1.5]), torch.arange(2), 4),
        lambda: posenc.Attention(8, 2, encoding="shaw")(torch.randn(1, 2, 8), torch.tensor([0.0, 1.5])),
    ],
    ids=["t5_relative_bucket", "t5-bias", "learned", "clipped_relative_index", "attention-shaw"],
)
def test_float_positions_where_integers_are_needed(call) -> None:
    with _raises(TypeError, "1.5", "integer"):
        call()


def test_whole_float_positions_are_accepted_where_integers_are_needed() -> None:
    """Float tensors that hold whole numbers are values, not types: accepted and equal to the ints."""
    rel = torch.arange(-40, 40)
    assert torch.equal(F.t5_relative_bucket(rel.double()), F.t5_relative_bucket(rel))


# -- NaN and infinite positions --------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize(
    "call",
    [
        lambda p: F.sinusoidal(p, 8),
        lambda p: F.rope_cos_sin(p, INV8),
        lambda p: F.t5_relative_bucket(p),
        lambda p: posenc.create("rope", dim=8).rotate(torch.ones(1, 1, 2, 8), torch.ones(1, 1, 2, 8), p, p),
        lambda p: posenc.create("alibi", num_heads=2).bias(p, p),
        lambda p: posenc.Attention(8, 2, encoding="rope")(torch.randn(1, 2, 8), p),
    ],
    ids=["sinusoidal", "rope_cos_sin", "t5_relative_bucket", "rope-rotate", "alibi-bias", "attention-rope"],
)
def test_non_finite_positions(call, bad: float) -> None:
    with _raises(ValueError, repr(bad), "finite"):
        call(torch.tensor([0.0, bad]))


def test_half_precision_positions() -> None:
    with _raises(TypeError, "torch.float16", "int64"):
        F.sinusoidal(torch.tensor([1.0], dtype=torch.float16), 8)


def test_bad_positions_type() -> None:
    with _raises(TypeError, "float 3.5", "int (a length) or a tensor"):
        F.sinusoidal(3.5, 8)
    with _raises(ValueError, "got -3", ">= 0"):
        F.sinusoidal(-3, 8)


# -- head counts --------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [0, -2])
@pytest.mark.parametrize(
    "call",
    [
        lambda n: F.alibi_slopes(n),
        lambda n: posenc.create("alibi", num_heads=n),
        lambda n: posenc.create("t5", num_heads=n),
        lambda n: posenc.Attention(32, n),
    ],
    ids=["alibi_slopes", "alibi", "t5", "Attention"],
)
def test_non_positive_head_counts(call, heads: int) -> None:
    with _raises(ValueError, "num_heads", f"got {heads}", "positive integer"):
        call(heads)


def test_heads_must_divide_dim() -> None:
    with _raises(ValueError, "dim=30", "num_heads=4", "divisible"):
        posenc.Attention(30, 4)


def test_mismatched_scheme_and_attention() -> None:
    with _raises(ValueError, "num_heads=8", "4"):
        posenc.Attention(32, 4, encoding=posenc.create("alibi", num_heads=8, bidirectional=True))
    with _raises(ValueError, "head width 8", "got 16"):
        posenc.Attention(32, 4, encoding=posenc.create("rope", dim=16))
    with _raises(ValueError, "dim=16", "32"):
        posenc.Attention(32, 4, encoding=posenc.create("sinusoidal", dim=16))
    with _raises(ValueError, "bidirectional=False", "causal=True"):
        posenc.Attention(32, 4, encoding=posenc.create("alibi", num_heads=4))


def test_t5_bucket_settings() -> None:
    with _raises(ValueError, "got 2", "at least 4"):
        F.t5_relative_bucket(torch.arange(3), num_buckets=2)
    with _raises(ValueError, "got 8", "exceed the 8 exact buckets"):
        F.t5_relative_bucket(torch.arange(3), num_buckets=32, max_distance=8)
    with _raises(ValueError, "num_buckets=31, bidirectional=True", "exceed the 7 exact buckets"):  # the value given
        F.t5_relative_bucket(torch.arange(3), num_buckets=31, max_distance=7)


# -- shapes that do not broadcast -----------------------------------------------------------------


def test_cos_sin_that_do_not_broadcast_with_x() -> None:
    x = torch.randn(1, 2, 3, 8)
    cos, sin = F.rope_cos_sin(4, INV8)  # [4, 8] for a sequence of 3
    with _raises(ValueError, "(4, 8)", "(1, 2, 3, 8)", "expected tables"):
        F.apply_rope(x, cos, sin)
    with _raises(ValueError, "(3, 8)", "(3, 6)", "same shape"):
        F.apply_rope(x, torch.ones(3, 8), torch.ones(3, 6))
    with _raises(ValueError, "rotate 16", "only 8"):
        F.apply_rope(x, torch.ones(3, 16), torch.ones(3, 16))
    # HF's unsqueeze_dim=2 tables [s, 1, r] for x [b, s, h, hd]: a 3-D table reads as [b, s, r], and
    # the message shows the shape as given (it showed the head axis posenc had inserted) and the fix
    seq_first = torch.randn(2, 3, 5, 8)  # [b, s, h, hd]
    cos3, sin3 = F.rope_cos_sin(3, INV8)
    with _raises(ValueError, "of shape (3, 1, 8)", "[1, s, 1, r] or [b, s, 1, r] for x [b, s, h, hd]"):
        F.apply_rope(seq_first, cos3[:, None], sin3[:, None])
    torch.testing.assert_close(
        F.apply_rope(seq_first, cos3[None, :, None], sin3[None, :, None]),
        F.apply_rope(seq_first.transpose(1, 2), cos3, sin3).transpose(1, 2),
    )


def test_q_positions_that_do_not_match_q() -> None:
    rope = posenc.create("rope", dim=8)
    q = torch.randn(1, 2, 3, 8)
    with _raises(ValueError, "query positions of shape (4,)", "(1, 2, 3, 8)"):
        rope.rotate(q, q, torch.arange(4), torch.arange(3))


def test_attention_input_shapes() -> None:
    attn = posenc.Attention(32, 4, encoding="rope")
    with _raises(ValueError, "[b, s, 32]", "(2, 5, 16)"):
        attn(torch.randn(2, 5, 16))
    with _raises(ValueError, "s=5", "(4,)"):
        attn(torch.randn(2, 5, 32), torch.arange(4))
    with _raises(ValueError, "[b, sk] = [2, 5]", "(2, 4)"):
        attn(torch.randn(2, 5, 32), key_mask=torch.ones(2, 4, dtype=torch.bool))


def test_whole_numbers_of_any_type_are_accepted() -> None:
    """Values, not Python types (docs/design.md, "Adding a scheme"): 8.0, a numpy integer and a 0-d tensor are all 8."""
    np = pytest.importorskip("numpy")
    expected = F.rope_inv_freq(8)[0]
    for dim in (8.0, np.int64(8), torch.tensor(8)):
        torch.testing.assert_close(F.rope_inv_freq(dim)[0], expected, atol=0, rtol=0)
    assert F.alibi_slopes(np.int32(4)).tolist() == [0.25, 0.0625, 0.015625, 0.00390625]
    torch.testing.assert_close(F.sinusoidal(3, 8, base=np.float32(100.0)), F.sinusoidal(3, 8, base=100.0))
    with _raises(TypeError, "got 8.5", "positive integer"):
        F.alibi_slopes(8.5)
    with _raises(TypeError, "got inf", "positive integer"):
        F.alibi_slopes(float("inf"))


def test_scheme_configs_normalise_whole_numbers() -> None:
    """Scheme configs take 8.0 for 8 and store the int, so every scheme builds and runs."""
    cases = {
        "learned": {"dim": 8.0, "max_len": 16.0},
        "sinusoidal": {"dim": 8.0},
        "shaw": {"dim": 4.0, "max_relative_position": 2.0},
        "t5": {"num_heads": 2.0, "num_buckets": 8.0, "max_distance": 20.0},
        "alibi": {"num_heads": 2.0, "bidirectional": True},
    }
    for name, config in cases.items():
        enc = posenc.create(name, **config)
        for key in config:
            value = getattr(enc.config, key)
            assert isinstance(value, bool) or type(value) is int, (name, key, value)
        out = posenc.Attention(8, 2, encoding=enc)(torch.randn(1, 3, 8))
        assert out.shape == (1, 3, 8)


def test_attention_key_mask_must_be_bool():
    """An additive float mask (0 attend, -inf masked) read through .bool() masked exactly the wrong keys."""
    attn = posenc.Attention(16, 2, encoding="rope")
    x = torch.randn(1, 4, 16)
    with _raises(
        TypeError,
        "key_mask must be a bool (or 0/1 integer) tensor [b, sk], True or 1 where a key is attended",
        "torch.float32",
        "key_mask = mask == 0",
    ):
        attn(x, key_mask=torch.tensor([[0.0, 0.0, float("-inf"), float("-inf")]]))
    with _raises(TypeError, "key_mask must be a bool", "list"):
        attn(x, key_mask=[[True] * 4])
    assert attn(x, key_mask=torch.ones(1, 4, dtype=torch.bool)).shape == (1, 4, 16)
    ones_zeros = torch.tensor([[1, 1, 0, 1]])  # HF's attention_mask convention: 1 attend, 0 padding
    assert torch.equal(attn(x, key_mask=ones_zeros), attn(x, key_mask=ones_zeros.bool()))


@pytest.mark.parametrize(
    "config, fragments",
    [
        (
            {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "rope_theta": "abc"},
            ("config field 'rope_theta' must be a finite number, got 'abc'",),
        ),
        (
            {"model_type": "llama", "head_dim": "x"},
            ("config field 'head_dim' must be a positive whole number, got 'x'",),
        ),
        (
            {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "rope_scaling": "linear"},
            ("config field 'rope_scaling' must be an object like", "got 'linear'"),
        ),
    ],
)
def test_rope_from_config_names_the_bad_field(config, fragments):
    with _raises(ValueError, *fragments):
        posenc.rope_from_config(config)


def test_rope_from_config_names_a_malformed_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{bad")
    with _raises(ValueError, f"{str(path)!r} is not readable JSON"):
        posenc.rope_from_config(path)


def test_nd_coordinates_of_the_wrong_width_are_named():
    pe = posenc.create("sinusoidal_nd", dim=12, n_axes=2)
    with _raises(ValueError, "coordinates [s, 2] or [b, s, 2], with s=12; got shape (12, 3)"):
        pe.embed(torch.randn(1, 12, 12), torch.zeros(12, 3, dtype=torch.long))


# -- found by the 2026-11-23 API audit ----------------------------------------------------------


def test_base_and_rotated_share_inside_scaling_must_agree() -> None:
    """transformers 5 keeps ``rope_theta`` and ``partial_rotary_factor`` inside ``rope_parameters``;
    given in ``scaling`` they were ignored without a word (base 1e4 where 5e5 was written)."""
    with _raises(ValueError, "rope_theta=500000.0", "base=10000.0", "pass base=500000.0"):
        posenc.create("rope", dim=8, scaling={"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0})
    with _raises(ValueError, "partial_rotary_factor=0.25", "rotary_dim is 64", "pass rotary_dim=16"):
        posenc.create("rope", dim=64, scaling={"rope_type": "default", "partial_rotary_factor": 0.25})
    agreeing = posenc.create(
        "rope",
        dim=64,
        base=5e5,
        rotary_dim=16,
        scaling={"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5, "partial_rotary_factor": 0.25},
    )
    assert (agreeing.config.base, agreeing.config.rotary_width) == (5e5, 16)
    torch.testing.assert_close(
        agreeing.inv_freq, F.rope_inv_freq(16, base=5e5, scaling={"rope_type": "linear", "factor": 2.0})[0]
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: F.rope_cos_sin(5, INV8, dtype=torch.int32),
        lambda: F.sinusoidal(3, 4, dtype=torch.int64),
        lambda: F.sinusoidal_nd(F.grid_positions(2, 2), 4, dtype=torch.int64),
        lambda: F.axial_rope_cos_sin(F.grid_positions(2, 2), F.axial_rope_inv_freq(8, 2), dtype=torch.int16),
    ],
    ids=["rope_cos_sin", "sinusoidal", "sinusoidal_nd", "axial_rope_cos_sin"],
)
def test_integer_table_dtypes(call) -> None:
    """An integer dtype truncated every cosine to 0 or 1 without a word."""
    with _raises(TypeError, "dtype must be a floating-point torch dtype", "torch.int"):
        call()


@pytest.mark.parametrize("name", ["learned", "sinusoidal"])
@pytest.mark.parametrize("combine", ["add", "concat"])
def test_absolute_positions_of_another_batch(name: str, combine: str) -> None:
    with _raises(ValueError, "positions of shape (3, 5)", "embeddings of shape (2, 5, 4)", "[b, s] = [2, 5]"):
        posenc.create(name, dim=4, combine=combine).embed(torch.zeros(2, 5, 4), torch.arange(5).expand(3, 5))


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotation_positions_that_do_not_fit(name: str) -> None:
    """The message used to speak of "cos/sin of shape (4, 8)", tables the caller never made."""
    rope, q = posenc.create(name, dim=8), torch.randn(2, 2, 5, 8)
    with _raises(ValueError, "key positions of shape (4,)", "keys of shape (2, 2, 5, 8)", "with s = 5"):
        rope.rotate(q, q, torch.arange(5), torch.arange(4))
    with _raises(ValueError, "query positions of shape (3, 5)", "queries of shape (2, 2, 5, 8)"):
        rope.rotate(q, q, torch.arange(5).expand(3, 5), torch.arange(5))


def test_tables_that_are_not_tensors() -> None:
    x = torch.randn(1, 2, 3, 8)
    for call in (F.apply_rope, F.fast_apply_rope, F.fast_apply_rope_):
        with _raises(TypeError, "cos and sin must be tensors", "got float and float"):
            call(x, 1.0, 0.0)


def test_flex_helpers_name_what_they_take() -> None:
    from posenc import flex

    assert flex.alibi_score_mod([0.5, 0.25]) is not None  # a list of slopes is fine
    with _raises(ValueError, "slopes must be 1-D", "(2, 2)"):
        flex.alibi_score_mod(torch.ones(2, 2))
    with _raises(ValueError, "sq must be a positive integer", "got -1"):
        flex.block_mask(-1, 4, causal=True)
    with _raises(ValueError, "q_offset must be a non-negative int", "got -2"):
        flex.block_mask(4, 4, causal=True, q_offset=-2)
    with _raises(ValueError, "bias scheme", "'rope' has no score mod"):
        flex.warmup(posenc.create("rope", dim=8))
    with _raises(ValueError, "table must be a tensor [num_buckets=32, heads]", "shape (3,)"):
        flex.t5_score_mod(torch.ones(3))


def test_meta_inputs_for_a_module_on_another_device() -> None:
    q = torch.randn(1, 2, 5, 8, device="meta")
    with _raises(ValueError, "on the meta device", "tables are on cpu", ".to('meta')"):
        posenc.create("rope", dim=8).rotate(q, q)
    assert posenc.create("rope", dim=8).to("meta").rotate(q, q)[0].shape == (1, 2, 5, 8)


def test_counts_accept_numpy_and_0d_integers() -> None:
    np = pytest.importorskip("numpy")
    assert F.rope_inv_freq(
        8, scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}, seq_len=np.int64(10)
    )[0].shape == (4,)
    assert F.randomized_positions(torch.tensor(2), np.int64(5), 10).shape == (2, 5)
    with _raises(TypeError, "seq_len must be a non-negative integer", "2.5"):
        F.randomized_positions(2, 2.5, 10)


def test_rope_axial_rotary_dim_not_a_multiple_of_the_axes_is_named() -> None:
    """Was a bug: ``create("rope_axial", dim=16, rotary_dim=6)`` complained about ``dim=6``."""
    with _raises(ValueError, "rotary_dim must be a multiple of 2 * n_axes = 4", "got rotary_dim=6", "dim=16"):
        posenc.create("rope_axial", dim=16, rotary_dim=6)
    with _raises(ValueError, "dim must be a multiple of 2 * n_axes = 6, got dim=16"):
        posenc.create("rope_axial", dim=16, n_axes=3)
    assert posenc.create("rope_axial", dim=16, rotary_dim=8).config.rotary_width == 8
