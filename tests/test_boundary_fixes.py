"""Silently wrong results and internal errors at the public boundary, each pinned: mixed position
dtypes, ``out=`` overlapping any input, a size-1 sequence axis against a longer table, non-bool
flags, and strings, lists, meta tensors and huge sizes where checks belong."""

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels as K


# -- mixed position dtypes: int64 against float positions subtracted in float64 ---------------------
def test_relative_positions_mixed_dtypes_exact():
    rel = F.relative_positions(torch.tensor([16_777_217]), torch.tensor([16_777_216.0]))
    assert rel.dtype == torch.float64
    assert rel.tolist() == [[-1.0]]


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("kerple", {"num_heads": 2, "variant": "log"}),
        ("kerple", {"num_heads": 2, "variant": "power"}),
        ("sandwich", {"num_heads": 2, "dim": 8}),
        ("dpb", {"num_heads": 2}),
    ],
)
def test_relative_bias_mixed_dtypes_keep_distance(name, kwargs):
    torch.manual_seed(0)
    module = posenc.create(name, **kwargs)
    mixed = module.bias(torch.tensor([16_777_217]), torch.tensor([16_777_216.0]))  # distance -1
    want = module.bias(torch.tensor([1]), torch.tensor([0]))  # distance -1 with small integers
    zero = module.bias(torch.tensor([0]), torch.tensor([0]))
    assert not torch.equal(want, zero)  # distance -1 and 0 differ, so the check below can fail
    torch.testing.assert_close(mixed.float(), want.float(), rtol=1e-6, atol=1e-7)


# -- out= (or an in-place target) overlapping any input is refused, not computed wrong ------------
def _tables(n, dim=8):
    inv_freq, _ = F.rope_inv_freq(dim)
    return F.rope_cos_sin(n, inv_freq)


def test_rope_out_overlapping_sin_refused():
    cos, _ = _tables(3)
    buf = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="out shares memory with sin"):
        K.rope(buf.clone(), cos, buf[0, 0], out=buf)


def test_rope_out_overlapping_cos_refused():
    _, sin = _tables(3)
    buf = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="out shares memory with cos"):
        K.rope(buf.clone(), buf[0, 1], sin, out=buf)


def test_rope_in_place_with_sin_a_view_of_x_refused():
    cos, _ = _tables(3)
    storage = torch.randn(3, 16)
    with pytest.raises(ValueError, match="x shares memory with sin"):
        K.rope_(storage[:, :8], cos, storage[:, 8:])


def test_rope_out_separate_from_inputs_still_exact():
    cos, sin = _tables(3)
    x = torch.randn(1, 2, 3, 8)
    out = torch.empty_like(x)
    K.rope(x, cos, sin, out=out)
    torch.testing.assert_close(out, F.apply_rope(x, cos, sin), rtol=0, atol=1e-6)


def test_toeplitz_out_overlapping_values_refused():
    buf = torch.zeros(2, 4, 4)
    values = buf.view(-1)[:14].view(2, 7)
    with pytest.raises(ValueError, match="out shares memory with values"):
        F.toeplitz(values, 4, 4, out=buf)


def test_toeplitz_out_separate_matches_formula():
    values = torch.randn(2, 7, dtype=torch.float64)
    out = F.toeplitz(values, 4, 4, out=torch.empty(2, 4, 4, dtype=torch.float64))
    i, j = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    assert torch.equal(out, values[:, j - i + 3])


# -- a size-1 axis of x against a longer table is refused (it broadcast x to the table's length) -----
@pytest.mark.parametrize(
    ("shape", "seq_dim"),
    [((1, 2, 1, 8), -2), ((1, 1, 2, 8), -3), ((1, 2, 1, 8), 2), ((1, 1, 1, 2, 8), -4)],
)
@pytest.mark.parametrize("fn", [F.apply_rope, K.rope], ids=["apply_rope", "kernels.rope"])
def test_size_one_sequence_against_longer_table_refused(fn, shape, seq_dim):
    cos, sin = _tables(5)
    with pytest.raises(ValueError, match="broadcast x to a larger result"):
        fn(torch.randn(shape), cos, sin, seq_dim=seq_dim)


def test_partial_rotary_one_query_five_rows_refused():
    cos, sin = _tables(5, dim=4)
    with pytest.raises(ValueError, match="cos/sin of shape"):
        F.apply_rope(torch.randn(1, 2, 1, 8), cos, sin)


def test_one_query_with_its_own_row_matches_full_rotation():
    cos, sin = _tables(5)
    x = torch.randn(1, 2, 5, 8)
    last = F.apply_rope(x[:, :, 4:], cos[4:], sin[4:])
    torch.testing.assert_close(last, F.apply_rope(x, cos, sin)[:, :, 4:], rtol=0, atol=0)


# -- inverse must be a bool: "no" was read as True -------------------------------------------------
@pytest.mark.parametrize("bad", ["no", 0, 1, None, "False"])
def test_inverse_must_be_bool(bad):
    cos, sin = _tables(3)
    x = torch.randn(1, 2, 3, 8)
    rope = posenc.create("rope", dim=8)
    for call in (
        lambda: F.apply_rope(x, cos, sin, inverse=bad),
        lambda: K.rope(x, cos, sin, inverse=bad),
        lambda: K.rope_(x.clone(), cos, sin, inverse=bad),
        lambda: rope.rotate(x, x, inverse=bad),
        lambda: rope.rotate_one(x, inverse=bad),
    ):
        with pytest.raises(TypeError, match="inverse must be True or False"):
            call()


@pytest.mark.parametrize(("seq_dim", "error"), [(5, ValueError), (-1, ValueError), ("1", TypeError), (1.0, TypeError)])
def test_rotate_one_seq_dim_checked(seq_dim, error):
    rope = posenc.create("rope", dim=8)
    with pytest.raises(error, match="seq_dim"):
        rope.rotate_one(torch.randn(1, 2, 3, 8), seq_dim=seq_dim)


# -- strings, huge sizes and meta tensors where packed-sequence checks belong ----------------------
def _packed():
    cu = torch.tensor([0, 2, 5])
    return cu, torch.randn(5, 2, 8), torch.randn(8, 2), torch.randn(8, 2)


@pytest.mark.parametrize("fn", [F.apply_rotary_emb, K.apply_rotary_emb], ids=["functional", "kernels"])
@pytest.mark.parametrize(("max_seqlen", "error"), [("7", TypeError), (2.5, TypeError), (-1, ValueError)])
def test_max_seqlen_checked(fn, max_seqlen, error):
    cu, x, cos, sin = _packed()
    with pytest.raises(error, match="max_seqlen"):
        fn(x, cos, sin, cu_seqlens=cu, max_seqlen=max_seqlen)


@pytest.mark.parametrize("fn", [F.positions_from_cu_seqlens, F.document_ids_from_cu_seqlens])
def test_total_as_string_names_total(fn):
    with pytest.raises(TypeError, match="total must be an integer"):
        fn(torch.tensor([0, 2, 5]), total="5")


def test_total_whole_float_read_as_int():
    assert F.positions_from_cu_seqlens(torch.tensor([0, 2, 5]), total=5.0).tolist() == [0, 1, 0, 1, 2]
    assert F.document_ids_from_cu_seqlens(torch.tensor([0, 2, 5]), total=5.0).tolist() == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("fn", [F.positions_from_cu_seqlens, F.document_ids_from_cu_seqlens])
def test_huge_cu_seqlens_refused_before_allocating(fn):
    with pytest.raises(ValueError, match="cu_seqlens ends at the token count"):
        fn(torch.tensor([0, 2**44]))


@pytest.mark.parametrize("fn", [F.apply_rotary_emb, K.apply_rotary_emb], ids=["functional", "kernels"])
@pytest.mark.parametrize("which", ["cu_seqlens", "cos", "sin"])
def test_meta_inputs_with_cpu_x_refused(fn, which):
    cu, x, cos, sin = _packed()
    args = {"cu_seqlens": cu, "cos": cos, "sin": sin}
    args[which] = args[which].to("meta")
    with pytest.raises(ValueError, match=f"{which} is on the meta device"):
        fn(x, args["cos"], args["sin"], cu_seqlens=args["cu_seqlens"])


@pytest.mark.parametrize("which", ["cu_seqlens", "document_ids"])
def test_attention_meta_documents_refused(which):
    attention = posenc.Attention(16, 2, encoding="rope")
    given = torch.tensor([0, 2, 3]) if which == "cu_seqlens" else torch.tensor([0, 0, 1])
    with pytest.raises(ValueError, match=f"{which} is on the meta device"):
        attention(torch.randn(1, 3, 16), **{which: given.to("meta")})


def test_attention_dtype_mismatch_named():
    attention = posenc.Attention(16, 2, encoding="rope")
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match="x is torch.float64 but this Attention's weights are torch.float32"):
        attention(x)
    torch.manual_seed(0)
    attention.double()
    assert attention(x).dtype == torch.float64  # cast as the message says, it runs


def test_register_refuses_non_class():
    with pytest.raises(TypeError, match="register takes a subclass"):
        posenc.register(5)


def test_alibi_slopes_2d_tensor_named():
    with pytest.raises(ValueError, match="slopes must be 1-D"):
        posenc.create("alibi", num_heads=2, slopes=torch.ones(1, 2))
    alibi = posenc.create("alibi", num_heads=2, slopes=torch.tensor([0.5, 0.25]))
    assert alibi.bias(torch.tensor([2]), torch.tensor([0])).flatten().tolist() == [-1.0, -0.5]
