"""A new user's robustness review of the public API: parameter sets and call patterns nobody tested.

Every test pins a number or an error. The ones marked "was a bug" failed before the fix named in
their docstring (a crash with an internal traceback, or a silently wrong number).
"""

from __future__ import annotations

import copy
import io
import math
import pickle

import pytest
import torch

import posenc
from posenc import functional as F

SCHEMES = ["none", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "xpos", "sinusoidal_nd", "rope_axial"]
ROTARY = ["rope", "xpos", "rope_axial"]
DIM, HEADS = 12, 3  # head width 4: the smallest that every scheme (rope_axial: 2 axes) accepts


def attention(name: str, *, causal: bool = True, dim: int = DIM, heads: int = HEADS) -> posenc.Attention:
    return posenc.Attention(dim, heads, encoding=name, causal=causal)


def test_every_registered_scheme_is_reviewed() -> None:
    """The review covers the whole registry: a new scheme must be added to SCHEMES."""
    assert sorted(posenc.available()) == sorted(SCHEMES)


# -- positions of every integer dtype --------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_small_integer_position_dtypes_equal_int64(name: str, dtype: torch.dtype) -> None:
    """Positions ``[s]`` and ``[b, s]`` as int32/int16/int8/uint8 give the int64 result exactly.

    Was a bug: the row caches of sinusoidal/rope/xpos indexed with the positions themselves
    (IndexError for int8/int16; uint8 was read as a boolean mask), fixed in ``schemes/_cache.py``;
    ALiBi subtracted uint8 positions in uint8 (``3 - 5`` = 254: a silently wrong bias for batched
    positions), fixed in ``F.relative_positions``.
    """
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    for positions in (torch.arange(5), torch.tensor([[0, 1, 2, 3, 4], [9, 7, 5, 3, 1]])):
        expected = a(x, positions)
        assert torch.equal(a(x, positions.to(dtype)), expected)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16], ids=str)
def test_relative_positions_never_wrap(dtype: torch.dtype) -> None:
    """``k - q`` in int64 whatever the integer dtype: uint8 ``3 - 5`` is -2 (not 254) and int16
    ``20000 - (-20000)`` is 40000 (not -25536); the ALiBi bias follows (slope 1/16 for 2 heads).
    Was a bug (silently wrong ALiBi biases), fixed in ``F.relative_positions``."""
    if dtype == torch.uint8:
        q, k, distance = torch.tensor([5], dtype=dtype), torch.tensor([3], dtype=dtype), -2
    else:
        q, k, distance = torch.tensor([-20000], dtype=dtype), torch.tensor([20000], dtype=dtype), 40000
    assert F.relative_positions(q, k).item() == distance
    bias = F.alibi_bias(F.alibi_slopes(2), q, k, bidirectional=True)  # [h, 1, 1]
    assert bias[0, 0, 0].item() == -abs(distance) / 16


@pytest.mark.parametrize("name", SCHEMES)
def test_half_precision_and_bool_positions_refused(name: str) -> None:
    """float16/bfloat16 positions (bf16 cannot hold 257) and bool positions are TypeErrors naming the dtype."""
    a = attention(name)
    x = torch.randn(1, 3, DIM)
    for dtype in (torch.float16, torch.bfloat16, torch.bool):
        with pytest.raises(TypeError, match=str(dtype)):
            a(x, torch.arange(3).to(dtype))


# -- inference_mode, no_grad, training in one process ----------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
def test_inference_mode_then_no_grad_then_training(name: str) -> None:
    """A module first run under ``torch.inference_mode`` (generation) must then work under ``no_grad``
    and in training, with the same outputs (atol 0) and gradients reaching the input.

    Was a bug for rope: the cos/sin cache and the eager rotation's scratch buffer were made as
    inference tensors, then written or saved for backward outside inference mode (RuntimeError);
    fixed in ``schemes/_cache.py`` (stale inference tables are rebuilt) and
    ``functional/_rope_eager.py`` (the scratch is keyed by the mode)."""
    a = attention(name).eval()
    x = torch.randn(2, 6, DIM)
    with torch.inference_mode():
        first = a(x)
    with torch.no_grad():
        assert torch.equal(a(x), first)
    xx = x.clone().requires_grad_()
    out = a(xx)
    torch.testing.assert_close(out.detach(), first, atol=1e-6, rtol=0)
    out.square().sum().backward()
    assert xx.grad is not None and bool(torch.isfinite(xx.grad).all()) and float(xx.grad.abs().sum()) > 0


@pytest.mark.parametrize("name", ["alibi", "t5", "t5-frozen"])
def test_bias_cached_under_inference_mode_then_training_without_a_causal_mask(name: str) -> None:
    """Without a causal mask or key mask the cached bias is SDPA's mask as it is: one made under
    inference mode must not reach autograd later ("Inference tensors cannot be saved for
    backward"). Was a bug: the bias cache ignored the mode (found by fuzzing)."""
    a = attention(name.removesuffix("-frozen"), causal=False).eval()
    if name.endswith("-frozen"):
        a.encoding.requires_grad_(False)  # a frozen table: its bias is cached in training too
    x = torch.randn(2, 6, DIM)
    with torch.inference_mode():
        first = a(x)
    xx = x.clone().requires_grad_()
    out = a(xx)
    torch.testing.assert_close(out.detach(), first, atol=1e-6, rtol=0)
    out.square().sum().backward()
    assert xx.grad is not None and float(xx.grad.abs().sum()) > 0


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_bias_cache_follows_edits_through_data(name: str) -> None:
    """``param.data.add_(...)`` (Hugging Face-style initialisation) leaves the version counter alone;
    the cached bias must still follow the new values (it is compared by value). Was a bug."""
    enc = posenc.create(name, num_heads=2)
    p = enc.slopes if name == "alibi" else enc.relative_attention_bias.weight
    q = torch.arange(4)
    with torch.no_grad():
        before = enc.bias(q, q).clone()
        p.data.mul_(2.0)
        after = enc.bias(q, q)
    if name == "alibi":
        want = F.alibi_bias(p.detach().float(), q, q)
    else:
        want = p.detach()[enc.buckets(q, q)].movedim(-1, -3)
    torch.testing.assert_close(after, want, atol=0, rtol=0)
    assert not torch.equal(after, before)


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "shaw"])
def test_kv_cache_takes_positions_of_any_accepted_shape_in_turn(name: str) -> None:
    """Positions [s], [1, s] and [b, s] may follow each other while decoding, as Attention accepts
    each; the result equals one forward over the whole sequence. Mixing [1, s] with [b, s] was a
    bug (a bare cat error); so was reusing a cache for another batch size (now a clear error)."""
    torch.manual_seed(0)
    a = attention(name).eval()
    x = torch.randn(2, 6, DIM)
    with torch.no_grad():
        full = a(x)
        cache = posenc.KVCache()
        parts = [a(x[:, :3], torch.arange(3).expand(2, 3), cache=cache),  # [b, s]
                 a(x[:, 3:4], torch.tensor([[3]]), cache=cache),  # [1, s]
                 a(x[:, 4:5], torch.tensor([4]), cache=cache),  # [s]
                 a(x[:, 5:], torch.tensor([[5], [5]]), cache=cache)]  # [b, s]
        torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=0)
        assert cache.positions.shape == (2, 6)
        other = posenc.KVCache()
        a(x[:, :2], torch.tensor([[0, 1]]), cache=other)  # [1, s] then [1, s]: stays unbatched
        # the first keys and values are stored as tensors of their own, not views that would keep
        # the whole qkv projection alive (and give compiled decoding a second layout)
        assert other.k._base is None and other.v._base is None and other.k.is_contiguous()
        a(x[:, 2:3], torch.tensor([[2]]), cache=other)
        assert other.positions.shape == (2, 3)
        with pytest.raises(ValueError, match=r"this KVCache holds keys \[b, h, sk, hd\] = \[2, 3, 6, 4\].*use a new KVCache"):
            a(x[:1, :1], cache=cache)  # another batch size
        with pytest.raises(TypeError, match="cache must be a posenc.KVCache or None, got int"):
            a(x, cache=3)


def test_alibi_bias_puts_heads_where_t5_does_for_more_leading_dims() -> None:
    """Positions [..., s] give [..., h, sq, sk] for ALiBi as for T5 (ALiBi used to drop the head
    axis for 3-D positions, mixing heads with a batch dim)."""
    alibi, t5 = posenc.create("alibi", num_heads=3), posenc.create("t5", num_heads=3)
    p = torch.randint(0, 50, (4, 2, 5))
    got = alibi.bias(p, p)
    assert got.shape == t5.bias(p, p).shape == (4, 2, 3, 5, 5)
    for i, j in ((0, 0), (3, 1)):
        torch.testing.assert_close(got[i, j], alibi.bias(p[i, j], p[i, j]), atol=0, rtol=0)


def test_bias_functions_name_bad_arguments() -> None:
    slopes, table = F.alibi_slopes(4), torch.randn(32, 4)
    assert F.alibi_bias_range(slopes, 0, 0).shape == (4, 0, 0) == F.alibi_bias(slopes, torch.arange(0), torch.arange(0)).shape
    assert F.t5_bias_range(table, 0, 3).shape == (4, 0, 3) and F.toeplitz(torch.zeros(4, 0), 2, 0).shape == (4, 2, 0)
    torch.testing.assert_close(F.alibi_bias(slopes, [0, 1, 2], [0, 1, 2]), F.alibi_bias_range(slopes, 3, 3))  # lists
    for call, error, message in (
            (lambda: F.alibi_bias_range(slopes, -1, 3), ValueError, "sq and sk must be non-negative integers, got sq=-1"),
            (lambda: F.toeplitz(torch.zeros(4, 3), 2, 2.0), ValueError, "sq and sk must be non-negative integers"),
            (lambda: F.t5_bias_range(torch.randn(8, 4), 3, 3), ValueError, r"weight must be the table \[num_buckets, h\] "
                                                                           r"with num_buckets=32 rows, got \(8, 4\)"),
            (lambda: F.alibi_bias_range(slopes[:, None], 3, 3), ValueError, r"slopes must be a 1-D tensor \[h\], got \(4, 1\)"),
            (lambda: F.alibi_bias(slopes[None], torch.arange(3), torch.arange(3)), ValueError, "slopes must be a 1-D tensor"),
            (lambda: F.relative_positions(torch.tensor(3), torch.arange(3)), ValueError,
             r"query positions must be \[s\] or \[b, s\], got a 0-d tensor \(3\)"),
            (lambda: posenc.create("alibi", num_heads=2).bias(torch.arange(3), torch.tensor(1)), ValueError,
             "key positions must be"),
            (lambda: posenc.create("shaw", dim=4).index(torch.tensor(0), torch.arange(2)), ValueError, "0-d tensor")):
        with pytest.raises(error, match=message):
            call()


# -- empty sequences and batches -------------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
def test_empty_sequence_and_empty_batch(name: str) -> None:
    """``s = 0`` and ``b = 0`` give empty outputs of the right shape, with and without gradients and
    through a KV cache (an empty prompt, then one token at position 0).

    Was a bug for rope: the eager rotation indexed row 0 of an empty sequence (IndexError), fixed in
    ``functional/_rope_eager.py``."""
    a = attention(name)
    assert a(torch.randn(2, 0, DIM)).shape == (2, 0, DIM)
    assert a(torch.randn(0, 3, DIM)).shape == (0, 3, DIM)
    x = torch.randn(2, 0, DIM, requires_grad=True)
    a(x).sum().backward()
    assert x.grad is not None and x.grad.shape == (2, 0, DIM)
    if a.encoding.family != "absolute":
        cache = posenc.KVCache()
        a(torch.randn(1, 0, DIM), cache=cache)
        token = torch.randn(1, 1, DIM)
        assert torch.equal(a(token, cache=cache), a(token))
        assert cache.length == 1


# -- clear errors for wrong inputs -----------------------------------------------------------------

def test_attention_rejects_non_float_inputs_with_a_type_error() -> None:
    """Integer token ids or a Python list passed as ``x`` raise a TypeError naming what was received.
    Was a bug: ``RuntimeError: expected m1 and m2 to have the same dtype`` from the projection, and an
    AttributeError for a list; fixed in ``Attention.forward``."""
    a = attention("rope")
    with pytest.raises(TypeError, match=r"floating-point embeddings x \[b, s, 12\].*torch.int64"):
        a(torch.ones(1, 5, DIM, dtype=torch.long))
    with pytest.raises(TypeError, match="got list"):
        a([[0.0] * DIM])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SCHEMES)
def test_batched_positions_of_another_batch_size_rejected(name: str) -> None:
    """Positions ``[3, s]`` for a batch of 2 raise a ValueError naming b and s; ``[1, s]`` broadcasts
    (to 1e-6: batched positions take the reference bias formula instead of the cached Toeplitz build).
    Was a bug: broadcasting errors from deep inside each scheme; fixed in ``Attention.forward``."""
    a = attention(name)
    x = torch.randn(2, 4, DIM)
    with pytest.raises(ValueError, match=r"\[s\], \[1, s\] or \[b, s\] with b=2, s=4, got shape \(3, 4"):
        a(x, torch.zeros(3, 4, dtype=torch.long))  # N-D schemes read it as coordinates (3, 4, 2)
    torch.testing.assert_close(a(x, torch.arange(4)[None]), a(x, torch.arange(4)), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ROTARY + ["shaw"])
@pytest.mark.parametrize("width", [4, 12])
def test_heads_of_another_width_than_the_scheme_rejected(name: str, width: int) -> None:
    """A scheme built for head width 8 given heads of width 4 or 12 raises a ValueError naming both.
    Was a bug: wider heads were silently rotated on their first 8 features only (a partial rotary the
    user never asked for), narrower ones failed inside the table code, and Shaw raised a matmul
    RuntimeError; fixed by ``check_head_width`` in ``Rope``/``XPos``/``RopeAxial.rotate`` and
    ``Shaw.query_scores``."""
    enc = posenc.create(name, dim=8)
    q = torch.randn(1, 2, 5, width)
    with pytest.raises(ValueError, match=rf"{name} was built for heads of width dim=8, got queries/keys of shape \(1, 2, 5, {width}\)"):
        if name == "shaw":
            enc.query_scores(q, torch.arange(5), torch.arange(5))
        else:
            enc.rotate(q, q)


def test_integer_inputs_to_rotations_and_embeddings_rejected() -> None:
    """Integer tensors (token ids passed by mistake) raise TypeErrors naming the dtype. Was a bug:
    ``F.apply_rope`` and ``embed`` returned the rotated / encoded values truncated to integers (e.g. a
    sinusoid added to ones gave ``[1, 2, 1, 2, ...]``); fixed in ``F.apply_rope`` and
    ``AbsoluteEncoding.embed``."""
    cos, sin = F.rope_cos_sin(3, F.rope_inv_freq(4)[0])
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        F.apply_rope(torch.ones(1, 1, 3, 4, dtype=torch.long), cos, sin)
    for name in ("sinusoidal", "learned"):
        with pytest.raises(TypeError, match="floating-point token embeddings.*torch.int64"):
            posenc.create(name, dim=8).embed(torch.ones(1, 3, 8, dtype=torch.long))


def test_bias_with_mismatched_batched_positions_rejected() -> None:
    """``bias(q [2, s], k [3, s])`` raises a ValueError naming both shapes (was a broadcasting
    RuntimeError); fixed in ``F.relative_positions``."""
    q, k = torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long)
    for enc in (posenc.create("alibi", num_heads=2), posenc.create("t5", num_heads=2)):
        with pytest.raises(ValueError, match=r"query positions \(2, 3\) and key positions \(3, 3\)"):
            enc.bias(q, k)


@pytest.mark.parametrize("dropout", [-0.1, 1.5, float("nan")])
def test_dropout_outside_a_probability_rejected_at_construction(dropout: float) -> None:
    """Was a bug: accepted, then ``nnf.dropout`` failed at the first training step; fixed in ``Attention.__init__``."""
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\], got"):
        posenc.Attention(DIM, HEADS, dropout=dropout)


def test_rope_axial_by_name_on_two_feature_heads() -> None:
    """``Attention(6, 3, encoding="rope_axial")`` (head width 2, two axes need 4 features) raises a
    ValueError naming the head width and the fix. Was a bug: "rotary_dim must be a positive integer,
    got 0" for a rotary_dim the user never passed; fixed in ``RopeAxial.attention_defaults``."""
    with pytest.raises(ValueError, match=r"head width of at least 4.*got head width 2 \(dim=6, num_heads=3\)"):
        posenc.Attention(6, 3, encoding="rope_axial")


@pytest.mark.parametrize("base", [1.0, 0.5, -1, float("inf"), float("nan"), True, "10000"])
def test_bad_bases_name_the_value(base: object) -> None:
    """Bases must be finite and > 1: the error repeats the value received, for functions and schemes."""
    for build in (lambda: F.rope_inv_freq(8, base=base), lambda: F.sinusoidal(3, 8, base=base),
                  lambda: posenc.create("rope", dim=8, base=base), lambda: posenc.create("xpos", dim=8, base=base)):
        with pytest.raises(ValueError, match=rf"base must be a finite number greater than 1, got {re_escape(base)}"):
            build()


def re_escape(value: object) -> str:
    import re

    return re.escape(repr(value))


@pytest.mark.parametrize(("dim", "error"), [(0, ValueError), (3, ValueError), (-2, ValueError), ("8", TypeError), (None, TypeError), (2.5, TypeError)])
def test_bad_head_widths_name_the_value(dim: object, error: type) -> None:
    with pytest.raises(error, match=rf"got {re_escape(dim)}"):
        posenc.create("rope", dim=dim)


def test_numpy_and_whole_float_sizes_accepted() -> None:
    """Values, not types: ``numpy.int64(5)`` heads and ``12.0`` widths are 5 and 12."""
    np = pytest.importorskip("numpy")
    assert posenc.create("alibi", num_heads=np.int64(5)).slopes.shape == (5,)
    assert posenc.Attention(12.0, 3.0).head_dim == 4  # type: ignore[arg-type]
    assert torch.equal(F.rope_inv_freq(np.int64(6))[0], F.rope_inv_freq(6)[0])


# -- extreme but valid parameters ------------------------------------------------------------------

@pytest.mark.parametrize("base", [1.0001, 2.0, 1e9, 1e30])
def test_tiny_and_huge_bases_follow_the_formula(base: float) -> None:
    """``inv_freq_i = base^(-2i/d)`` in float64 for bases from 1.0001 to 1e30 (rtol 1e-12), and the
    rotation stays a rotation (norms kept to 1e-5)."""
    inv_freq, _ = F.rope_inv_freq(16, base=base)
    expected = torch.tensor([base ** (-2 * i / 16) for i in range(8)], dtype=torch.float64)
    torch.testing.assert_close(inv_freq, expected, atol=0, rtol=1e-12)
    x = torch.randn(1, 2, 50, 16)
    rotated, _ = posenc.create("rope", dim=16, base=base).rotate(x, x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("head_dim", [2, 6, 96, 256])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_head_widths_keep_norms_and_relative_scores(head_dim: int, layout: str) -> None:
    """For head widths 2, 6, 96 and 256: rotation keeps norms, and the score of a query at m with a
    key at n depends on m - n only (positions shifted by 1000 give the same scores, atol 1e-4)."""
    rope = posenc.create("rope", dim=head_dim, layout=layout)
    q, k = torch.randn(2, 1, 2, 8, head_dim).unbind(0)
    positions = torch.arange(8)
    rq, rk = rope.rotate(q, k, positions, positions)
    sq, sk = rope.rotate(q, k, positions + 1000, positions + 1000)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rq @ rk.transpose(-1, -2), sq @ sk.transpose(-1, -2), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["t5", "alibi", "rope", "xpos", "shaw"])
@pytest.mark.parametrize(("dim", "heads"), [(15, 5), (21, 7), (6, 1)])
def test_odd_head_counts_decode_token_by_token_like_the_full_forward(name: str, dim: int, heads: int) -> None:
    """Odd head counts (5 and 7 heads of odd width 3, or one head of 6; rope/xpos need even widths,
    so they get width 6 heads), batch size 1: decoding one token at a time through a KVCache gives the
    causal full-sequence output (atol 1e-5)."""
    if name in ("rope", "xpos", "shaw") and (dim // heads) % 2:
        dim = heads * 6
    a = attention(name, dim=dim, heads=heads)
    x = torch.randn(1, 7, dim)
    full = a(x)
    cache = posenc.KVCache()
    steps = torch.cat([a(x[:, i : i + 1], cache=cache) for i in range(7)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["none", "shaw", "t5", "alibi", "rope", "xpos"])
def test_left_padded_batch_decodes_with_default_positions(name: str) -> None:
    """Prefill a left-padded batch with explicit positions ``[b, s]`` (row 1: two pads, then 0, 1, ...),
    then decode with default positions: each row continues after its own last position, so the
    output equals the full forward at the explicit positions (atol 1e-5). Was a bug (silently wrong):
    every row continued at the stream index 3, so the padded row's new tokens sat 2 positions too far
    from its prompt; fixed in ``Attention.forward``."""
    a = attention(name)
    x = torch.randn(2, 6, DIM)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
    key_mask = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    full = a(x, positions, key_mask=key_mask)
    cache = posenc.KVCache()
    steps = [a(x[:, :3], positions[:, :3], cache=cache, key_mask=key_mask[:, :3])]
    steps += [a(x[:, i : i + 1], cache=cache, key_mask=key_mask[:, : i + 1]) for i in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert torch.equal(cache.positions, positions)


# -- dtypes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize(("dtype", "atol"), [(torch.float16, 3e-3), (torch.bfloat16, 2e-2), (torch.float64, 1e-6)], ids=str)
def test_module_cast_runs_in_that_dtype_close_to_float64(name: str, dtype: torch.dtype, atol: float) -> None:
    """``Attention(...).to(dtype)`` on inputs of that dtype returns that dtype, within ``atol`` of the
    same module in float64 (float16 3e-3, bfloat16 2e-2 on unit-scale inputs); float64 frequency,
    slope and decay buffers stay float64 after the cast."""
    a = attention(name)
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    reference = copy.deepcopy(a).double()(x)
    cast = copy.deepcopy(a).to(dtype)
    out = cast(x.to(dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), reference, atol=atol, rtol=0)
    for buf_name in ("inv_freq", "slopes", "zeta"):
        buf = getattr(cast.encoding, buf_name, None)
        if isinstance(buf, torch.Tensor):
            assert buf.dtype == torch.float64, buf_name


def test_double_inputs_rotate_exactly_at_four_million() -> None:
    """float64 q at positions near 4e6 are rotated with float64 tables: equal to the float64 formula
    to 1e-9 (float32 tables would be ~1e-7 off, float32 angles ~0.05 rad)."""
    rope = posenc.create("rope", dim=8, layout="interleaved")
    positions = torch.arange(4_000_000, 4_000_004)
    q = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    got, _ = rope.rotate(q, q, positions, positions)
    inv = [10000 ** (-2 * i / 8) for i in range(4)]
    expected = torch.empty_like(q)
    for s, p in enumerate(positions.tolist()):
        for i, f in enumerate(inv):
            c, sn = math.cos(p * f), math.sin(p * f)
            a, b = q[0, 0, s, 2 * i].item(), q[0, 0, s, 2 * i + 1].item()
            expected[0, 0, s, 2 * i], expected[0, 0, s, 2 * i + 1] = a * c - b * sn, a * sn + b * c
    torch.testing.assert_close(got, expected, atol=1e-9, rtol=0)


# -- layouts of q and k ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ROTARY)
def test_non_contiguous_q_k_equal_contiguous(name: str) -> None:
    """Transposed views (``[b, s, h, hd].transpose(1, 2)``, the usual projection output) and sliced
    views rotate exactly as their contiguous copies."""
    enc = posenc.create(name, dim=8)
    q = torch.randn(2, 9, 3, 8).transpose(1, 2)  # [b, h, s, hd] view
    k = torch.randn(2, 3, 9, 16)[..., ::2]  # strided last dim
    got = enc.rotate(q, k)
    expected = enc.rotate(q.contiguous(), k.contiguous())
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    cos, sin = F.rope_cos_sin(9, F.rope_inv_freq(8)[0])
    assert torch.equal(F.apply_rope(q, cos, sin), F.apply_rope(q.contiguous(), cos, sin))


# -- serialisation and copies ----------------------------------------------------------------------

LEARNED_PARAMETERS = {
    "none": set(), "sinusoidal": set(), "alibi": set(), "rope": set(), "xpos": set(), "sinusoidal_nd": set(),
    "rope_axial": set(), "learned": {"table.weight"}, "t5": {"relative_attention_bias.weight"},
    "shaw": {"key_embeddings.weight", "value_embeddings.weight"},
}


@pytest.mark.parametrize("name", SCHEMES)
def test_state_dict_round_trip_with_weights_only(name: str) -> None:
    """``torch.save(state_dict)`` / ``torch.load(weights_only=True)`` into a freshly built module gives
    the same output exactly; the encoding contributes its learned parameters only (caches and
    frequencies are not persisted)."""
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    expected = a(x)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    fresh = attention(name)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(fresh(x), expected)
    keys = {k.removeprefix("encoding.") for k in a.state_dict() if k.startswith("encoding.")}
    assert keys == LEARNED_PARAMETERS[name]


@pytest.mark.parametrize("name", SCHEMES)
def test_deepcopy_pickle_and_repr(name: str) -> None:
    """``copy.deepcopy`` and ``pickle`` give modules with identical outputs (also after the original's
    caches were filled), and ``repr`` shows the scheme's config values."""
    a = attention(name)
    x = torch.randn(2, 5, DIM)
    expected = a(x)  # fills caches
    assert torch.equal(copy.deepcopy(a)(x), expected)
    assert torch.equal(pickle.loads(pickle.dumps(a))(x), expected)
    text = repr(a.encoding)
    assert text.startswith(type(a.encoding).__name__ + "(")
    if name in ("t5", "alibi"):
        assert f"num_heads={HEADS}" in text
    elif name != "none":
        assert "dim=" in text


@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_init_then_to_empty_then_load(name: str) -> None:
    """The low-memory loading path: build under ``torch.device("meta")``, ``to_empty(device="cpu")``,
    ``load_state_dict``: the same output as the module built normally, and the global RNG untouched.
    Was a bug (silently wrong): the frequency/slope/decay buffers, not in the ``state_dict``, were left
    uninitialised by ``to_empty`` (rope, xpos, alibi, sinusoidal and rope_axial gave wrong outputs, xpos
    NaN); fixed in ``PositionalEncoding._apply`` (buffers leaving the meta device are rebuilt from the
    config)."""
    reference = attention(name)
    with torch.device("meta"):
        a = attention(name)
    state = torch.get_rng_state()
    a.to_empty(device="cpu")
    assert torch.equal(torch.get_rng_state(), state)
    a.load_state_dict(reference.state_dict())
    x = torch.randn(2, 5, DIM)
    assert torch.equal(a(x), reference(x))


@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_init_then_load_with_assign(name: str) -> None:
    """The other low-memory path: build under ``torch.device("meta")``, then
    ``load_state_dict(..., assign=True)``, which swaps in the loaded tensors and leaves what the
    ``state_dict`` does not hold (frequencies, slopes) on the meta device: the forward failed deep in
    torch ("Tensor on device meta is not on the expected device cpu"). The encoding now follows the
    loaded weights, in a layer, in the experiments' model and alone (T5's table)."""
    import pickle

    from posenc.experiments.model import ModelConfig, TinyTransformer

    reference = attention(name)
    with torch.device("meta"):
        a = attention(name)
    a.load_state_dict(reference.state_dict(), assign=True)
    assert not [n for n, t in [*a.named_parameters(), *a.named_buffers()] if t.is_meta]
    x = torch.randn(2, 5, DIM)
    assert torch.equal(a(x), reference(x))
    pickle.loads(pickle.dumps(a))  # the load hooks are functions, not lambdas
    if name in ("sinusoidal", "t5"):
        config = ModelConfig(vocab_size=12, scheme=name, dim=16, num_heads=2, num_layers=1)
        model = TinyTransformer(config)
        with torch.device("meta"):
            built = TinyTransformer(config)
        built.load_state_dict(model.state_dict(), assign=True)
        tokens = torch.randint(12, (2, 6))
        assert torch.equal(built(tokens), model(tokens))
    if name == "t5":
        alone = posenc.create("t5", num_heads=HEADS)
        with torch.device("meta"):
            meta = posenc.create("t5", num_heads=HEADS)
        meta.load_state_dict(alone.state_dict(), assign=True)
        p = torch.arange(6)
        assert torch.equal(meta.bias(p, p), alone.bias(p, p))


# -- gradients -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
def test_gradients_reach_every_learned_parameter(name: str) -> None:
    """One backward pass gives a finite, non-zero gradient to every parameter of the encoding (the
    learned table, T5's bucket table, Shaw's key and value embeddings) and to the input."""
    a = attention(name, causal=name == "alibi")
    x = torch.randn(2, 6, DIM, requires_grad=True)
    a(x).square().sum().backward()
    names = {n for n, _ in a.encoding.named_parameters()}
    assert names == LEARNED_PARAMETERS[name]
    for n, p in a.encoding.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()) and float(p.grad.abs().sum()) > 0, n
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


@pytest.mark.parametrize(("name", "config"), [("rope", {"layout": "half"}), ("rope", {"layout": "interleaved"}),
                                               ("rope", {"rotary_dim": 4}), ("xpos", {}), ("rope_axial", {})])
def test_rotation_backward_passes_gradcheck(name: str, config: dict) -> None:
    """The fast rotation's hand-written backward (the inverse rotation) agrees with finite differences
    in float64 (``torch.autograd.gradcheck``), for both layouts, partial rotary, xPos and axial RoPE."""
    enc = posenc.create(name, dim=8, **config)
    q, k = torch.randn(2, 1, 2, 5, 8, dtype=torch.float64).unbind(0)
    assert torch.autograd.gradcheck(lambda a, b: enc.rotate(a, b), (q.requires_grad_(), k.requires_grad_()))


@pytest.mark.parametrize("name", ["learned", "t5", "shaw"])
def test_learned_tables_pass_gradcheck(name: str) -> None:
    """Gradients of the attention output with respect to each learned table of the encoding agree
    with finite differences in float64 (through ``torch.func.functional_call``); small tables (8 learned
    rows, Shaw's K = 3) keep the finite differences cheap."""
    small = {"learned": {"dim": DIM, "max_len": 8}, "shaw": {"dim": DIM // HEADS, "max_relative_position": 3}}
    encoding = posenc.create(name, **small[name]) if name in small else name
    a = posenc.Attention(DIM, HEADS, encoding=encoding, causal=True).double()
    x = torch.randn(1, 4, DIM, dtype=torch.float64)
    for pname, param in a.encoding.named_parameters():
        full = f"encoding.{pname}"
        table = param.detach().clone().requires_grad_()

        def run(t: torch.Tensor, full: str = full) -> torch.Tensor:
            return torch.func.functional_call(a, {full: t}, (x,))

        assert torch.autograd.gradcheck(run, (table,)), pname


def test_learned_scale_of_the_sinusoid_gets_its_gradient() -> None:
    """``sinusoidal`` with ``learned_scale=True``: d(sum of embed)/d(scale) is the sum of the table."""
    enc = posenc.create("sinusoidal", dim=8, learned_scale=True)
    enc.embed(torch.zeros(1, 10, 8)).sum().backward()
    expected = F.sinusoidal(10, 8).sum()
    torch.testing.assert_close(enc.scale.grad, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", SCHEMES)
def test_cuda_equals_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same module moved to CUDA gives the CPU output to 1e-5 (float32; TF32 off), positions
    given on the CPU or on the GPU, and after a ``to_empty`` from the meta device."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    a = attention(name)
    x = torch.randn(2, 7, DIM)
    expected = a(x)
    gpu = copy.deepcopy(a).to("cuda")
    torch.testing.assert_close(gpu(x.cuda()).cpu(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpu(x.cuda(), torch.arange(7)).cpu(), expected, atol=1e-5, rtol=1e-5)
    with torch.device("meta"):
        m = attention(name)
    m.to_empty(device="cuda")
    m.load_state_dict(a.state_dict())
    torch.testing.assert_close(m(x.cuda()).cpu(), expected, atol=1e-5, rtol=1e-5)


# -- found by an audit of the public API (this session) --------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
def test_meta_device_forward_gives_shapes(name: str) -> None:
    """On the meta device (shapes only) a forward must give the output's shape: the caches and range
    checks that read position values on the host are skipped there (5 schemes raised
    "Tensor.item() cannot be called on meta tensors")."""
    with torch.device("meta"):
        a = attention(name)
        y = a(torch.randn(2, 5, DIM))
    assert y.device.type == "meta" and y.shape == (2, 5, DIM)


@pytest.mark.slow
def test_sinusoids_compile_with_dynamic_shapes_in_one_graph() -> None:
    """torch.compile(dynamic=True, fullgraph=True) of the sinusoid and of an Attention with
    sinusoidal_nd: the base check used to run math.isfinite on a symbolic float (Unsupported)."""
    f = torch.compile(lambda p: F.sinusoidal(p, 16), fullgraph=True, dynamic=True)
    for n in (7, 9):
        torch.testing.assert_close(f(torch.arange(n)), F.sinusoidal(torch.arange(n), 16))
    a = posenc.Attention(32, 4, encoding="sinusoidal_nd").eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(a, fullgraph=True, dynamic=True)(x), a(x), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_compiled_learned_table_names_a_position_past_its_end() -> None:
    a = posenc.Attention(16, 2, encoding=posenc.create("learned", dim=16, max_len=8))
    compiled = torch.compile(a)
    x = torch.randn(1, 6, 16)
    torch.testing.assert_close(compiled(x), a(x), atol=1e-5, rtol=0)
    with pytest.raises(RuntimeError, match=r"a position is outside the learned table \(max_len=8"):
        compiled(torch.randn(1, 12, 16))  # used to be Inductor's "index out of bounds: tmp2 < 8L"


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: posenc.create("alibi", num_heads=2, bidirectional="false"), TypeError,
     "bidirectional must be True or False, got 'false'"),
    (lambda: posenc.create("t5", num_heads=2, bidirectional=1), TypeError, "bidirectional must be True or False"),
    (lambda: posenc.create("shaw", dim=4, values="no"), TypeError, "values must be True or False"),
    (lambda: posenc.create("sinusoidal", dim=4, learned_scale=None), TypeError, "learned_scale must be True or False"),
    (lambda: posenc.Attention(8, 2, causal="False"), TypeError, "causal must be True or False, got 'False'"),
    (lambda: posenc.Attention(8, 2, dropout=None), TypeError, r"dropout must be a probability in \[0, 1\], got None"),
    (lambda: posenc.create("t5", num_heads=2, init_std=-1), ValueError, "init_std must be a finite number >= 0, got -1"),
    (lambda: posenc.create("shaw", dim=4, init_std="0.02"), TypeError, "init_std must be a finite number"),
    (lambda: posenc.create("learned", dim=4, init_std=float("inf")), ValueError, "init_std must be a finite number >= 0"),
    (lambda: posenc.create("xpos", dim=8, scale_base=None), TypeError, "scale_base must be a finite number, got None"),
    (lambda: posenc.create("xpos", dim=8, gamma=float("inf")), ValueError, "gamma must be a positive finite number"),
    (lambda: posenc.create("xpos", dim=8, center=True), TypeError, "center must be a finite number, got True"),
    (lambda: posenc.create("learned", dim=1e30), ValueError, r"dim must be at most 2\*\*31 - 1, got 1e\+30"),
    (lambda: posenc.create("shaw", dim=8, max_relative_position=2**40), ValueError, "max_relative_position must be at most"),
    (lambda: posenc.Attention(30, 6, encoding="rope"), ValueError,
     r"encoding 'rope' cannot serve Attention\(dim=30, num_heads=6\), heads of width 5: dim must be a positive even"),
])
def test_config_values_of_the_wrong_kind_are_named(make, error, message) -> None:
    """A string "false" from a config file used to be read by truthiness (the other form, silently);
    None, strings or infinities for numbers failed inside torch or later, without the name."""
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(("name", "saved", "here", "shapes"), [
    ("learned", dict(dim=16, max_len=64), dict(dim=16, max_len=32), r"\(64, 16\) does not fit this learned scheme's \(32, 16\)"),
    ("t5", dict(num_heads=2, num_buckets=16), dict(num_heads=2), r"\(16, 2\) does not fit this t5 scheme's \(32, 2\)"),
    ("shaw", dict(dim=8, max_relative_position=4), dict(dim=8), r"\(9, 8\) does not fit this shaw scheme's \(33, 8\)"),
])
def test_state_dict_of_another_table_size_names_the_config(name, saved, here, shapes) -> None:
    """torch alone says "size mismatch"; the message now also names the scheme and its config."""
    with pytest.raises(RuntimeError, match=shapes + r"; it was saved from another configuration \(this one: "):
        posenc.create(name, **here).load_state_dict(posenc.create(name, **saved).state_dict())


@pytest.mark.parametrize("name", ["rope", "xpos", "sinusoidal"])
def test_row_caches_follow_casts_and_frequency_edits(name: str) -> None:
    """The cos/sin and sinusoid row caches equal a fresh module's rows after a cast down and back
    (``.bfloat16().float()`` used to leave them rounded to 16 bits: up to 1e-2 off) and after the
    frequencies are edited in place or replaced (they used to serve the old rows)."""
    torch.manual_seed(0)
    q = torch.randn(1, 2, 300, 16)

    def run(m):
        return m.rotate(q, q)[0] if name != "sinusoidal" else m.embed(torch.zeros(1, 300, 16))

    m = posenc.create(name, dim=16)
    run(m)
    m.bfloat16().float()
    assert torch.equal(run(m), run(posenc.create(name, dim=16)))
    edited = posenc.create(name, dim=16)
    with torch.no_grad():
        m.inv_freq.mul_(2)
        edited.inv_freq.mul_(2)
    torch.testing.assert_close(run(m), run(edited), atol=0, rtol=0)
    assert not torch.equal(run(m), run(posenc.create(name, dim=16)))
    m.inv_freq = m.inv_freq * 0.5
    assert torch.equal(run(m), run(posenc.create(name, dim=16)))


# -- found by the 2026-11-23 API audit -------------------------------------------------------------

def test_rope_second_order_gradients_equal_the_reference() -> None:
    """Gradient penalties differentiate the backward: RoPE's autograd functions were
    once-differentiable, so ``autograd.grad(..., create_graph=True)`` followed by a gradient
    through it gave a wrong weight gradient (off by ~1000 of ~1600) without an error."""
    torch.manual_seed(0)
    rope = posenc.create("rope", dim=8)
    cos, sin = rope.cos_sin(4)
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(1, 1, 4, 8, requires_grad=True)

    def penalty_grad(rotate):
        a = rotate(x @ w)
        (g,) = torch.autograd.grad((a * a.roll(1, -2)).sum(), x, create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), w)[0]

    want = penalty_grad(lambda t: F.apply_rope(t, cos, sin))
    torch.testing.assert_close(penalty_grad(lambda t: rope.rotate(t, t)[0]), want, rtol=1e-5, atol=1e-4)
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    assert torch.autograd.gradgradcheck(lambda t: rope.rotate(t, k)[0], (q,))
    qkv = torch.randn(1, 4, 3, 2, 8, dtype=torch.float64, requires_grad=True)  # q and k slices of one projection

    def pair(t):
        a, b = rope.rotate(*t.transpose(1, 3).unbind(2)[:2])
        return 2 * a + b
    assert torch.autograd.gradgradcheck(pair, (qkv,))
    # gradgradcheck differentiates whatever the backward returns: the create_graph gradient itself
    # must also be the inverse rotation (the reference's, in float64), for one tensor and for a pair
    cos64, sin64 = rope.cos_sin(4, dtype=torch.float64)
    g = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    (want,) = torch.autograd.grad(F.apply_rope(q, cos64, sin64), q, g)
    (got,) = torch.autograd.grad(rope.rotate(q, k)[0], q, g, create_graph=True)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    gq, gk = torch.randn(2, 1, 2, 4, 8, dtype=torch.float64).unbind(0)
    qq, kk = qkv.transpose(1, 3).unbind(2)[:2]
    want_pair = torch.autograd.grad((F.apply_rope(qq, cos64, sin64), F.apply_rope(kk, cos64, sin64)), qkv, (gq, gk))[0]
    got_pair = torch.autograd.grad(rope.rotate(qq, kk), qkv, (gq, gk), create_graph=True)[0]
    torch.testing.assert_close(got_pair, want_pair, rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # torch: vmap over SDPA runs per sample
@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "xpos"])
def test_torch_func_transforms_run_and_agree_with_autograd(name: str) -> None:
    """``torch.func.grad`` / ``vmap`` (per-sample gradients): the fast paths keyed their plans and
    caches on storages, which the transforms' tensors lack ("Cannot access data pointer"), and SDPA's
    fused CPU kernel takes no gradient for T5's learned mask under them."""
    torch.manual_seed(0)
    attn = posenc.Attention(16, 2, encoding=name, causal=True).double()
    xs = torch.randn(3, 5, 16, dtype=torch.float64)
    params = {n: p.detach() for n, p in attn.named_parameters()}

    def loss(p, x):
        return torch.func.functional_call(attn, p, (x[None],)).pow(2).sum()

    per_sample = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, xs)
    for i in range(xs.shape[0]):
        attn.zero_grad()
        attn(xs[i:i + 1]).pow(2).sum().backward()
        for n, p in attn.named_parameters():
            torch.testing.assert_close(per_sample[n][i], p.grad, rtol=1e-9, atol=1e-12)
    dx = torch.func.grad(lambda x: attn(x).pow(2).sum())(xs)
    ref = xs.clone().requires_grad_()
    attn(ref).pow(2).sum().backward()
    torch.testing.assert_close(dx, ref.grad, rtol=1e-9, atol=1e-12)


def test_a_kv_cache_keeps_copies_of_what_it_is_given() -> None:
    """The first append kept the caller's positions tensor (and contiguous k / v) itself: a
    positions buffer stepped with ``+=`` between decoding calls, or edited prefill positions,
    changed the cache (outputs off by 0.006-0.07)."""
    torch.manual_seed(0)
    x = torch.randn(1, 6, 32)
    for name in ("alibi", "rope", "learned"):
        attn = posenc.Attention(32, 4, encoding=name, causal=True).eval()
        with torch.no_grad():
            full = attn(x)
            cache, pos, outs = posenc.KVCache(), torch.tensor([0]), []
            for i in range(6):
                outs.append(attn(x[:, i:i + 1], pos, cache=cache))
                pos += 1
            torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-6)
            cache, prefill = posenc.KVCache(), torch.arange(3)
            first = attn(x[:, :3], prefill, cache=cache)
            prefill.zero_()
            torch.testing.assert_close(torch.cat((first, attn(x[:, 3:], cache=cache)), 1), full, rtol=0, atol=1e-6)
    cache, k = posenc.KVCache(), torch.randn(1, 2, 3, 8)
    cache.append(k, k.clone(), torch.arange(3))
    k.zero_()
    assert cache.k.abs().sum() > 0


def test_narrow_integer_positions_continue_past_their_dtype() -> None:
    """A cache of uint8 positions 252..255 continued at 0..3 (int8 wraps at 127)."""
    torch.manual_seed(0)
    attn = posenc.Attention(32, 4, encoding="rope", causal=True).eval()
    x = torch.randn(1, 8, 32)
    with torch.no_grad():
        cache = posenc.KVCache()
        first = attn(x[:, :4], torch.arange(252, 256, dtype=torch.uint8), cache=cache)
        rest = attn(x[:, 4:], cache=cache)
        want = attn(x, torch.arange(252, 260))
    assert cache.positions.tolist() == list(range(252, 260))
    torch.testing.assert_close(torch.cat((first, rest), 1), want, rtol=0, atol=1e-6)


def test_rope_config_keeps_its_own_copy_of_the_scaling() -> None:
    """Editing the dict passed as ``scaling`` changed ``config.scaling`` (and what a meta-built
    module rebuilt from it) but not the frequencies already made."""
    scaling = {"rope_type": "linear", "factor": 2.0}
    rope = posenc.create("rope", dim=8, scaling=scaling)
    scaling["factor"] = 8.0
    assert rope.config.scaling["factor"] == 2.0
    torch.testing.assert_close(rope.inv_freq, F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": 2.0})[0])


def test_sinusoidal_nd_embeds_float64_in_float64() -> None:
    """It built float32 codes for float64 embeddings (3e-8 off, and gradcheck on coordinates failed)."""
    enc = posenc.create("sinusoidal_nd", dim=8).double()
    x = torch.zeros(1, 5, 8, dtype=torch.float64)
    coords = (torch.rand(5, 2, dtype=torch.float64) * 10).requires_grad_()
    assert torch.equal(enc.embed(x, coords)[0], F.sinusoidal_nd(coords, 8, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda c: enc.embed(x, c), (coords,))


def test_more_bad_inputs_get_clear_errors() -> None:
    """Each of these ended in an internal error (IndexError, torch.finfo, a meta copy, tables the
    caller never made, torch's overlap check)."""
    x = torch.zeros(1, 5, 8)
    for name in ("sinusoidal", "learned"):
        with pytest.raises(ValueError, match="must have a sequence axis"):
            posenc.create(name, dim=8).embed(x, torch.tensor(2))
    ints = torch.ones(1, 1, 3, 8, dtype=torch.long)
    with pytest.raises(TypeError, match="xpos: queries and keys must be floating-point tensors"):
        posenc.create("xpos", dim=8).rotate(ints, ints)
    axial, q = posenc.create("rope_axial", dim=16), torch.randn(2, 2, 5, 16)
    meta = torch.zeros(5, 2, device="meta")
    with pytest.raises(ValueError, match="on the meta device"):
        axial.rotate(q, q, meta, meta)
    with pytest.raises(ValueError, match=r"key positions of shape \(3, 5\) do not fit keys"):
        axial.rotate(q, q, torch.zeros(3, 5, 2), torch.zeros(3, 5, 2))
    cos, sin = F.rope_cos_sin(5, F.rope_inv_freq(16)[0])
    with pytest.raises(ValueError, match="share memory"):
        F.fast_apply_rope_(torch.randn(1, 1, 1, 16).expand(2, 2, 5, 16), cos, sin)
    with pytest.raises(ValueError, match="share memory"):
        F.fast_apply_rope(q, cos, sin, out=torch.empty(1, 1, 1, 16).expand(2, 2, 5, 16))
