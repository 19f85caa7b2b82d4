"""Caches are an optimisation only (docs/design.md, "Precision policy" and "Caches"), and forwards compile.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width.

Caches: equal to the uncached functional result bit for bit over offsets and lengths, regrown on
demand, absent from ``state_dict``, never mutated inside a compiled forward. Compilation:
``torch.compile(fullgraph=True)`` of ``posenc.Attention`` with ``rope``, ``alibi``, ``t5`` and
``sinusoidal`` (which runs each scheme's hooks inside the graph) gives the eager result.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional as F

SCHEMES = {
    "sinusoidal": {"dim": 16},
    "learned": {"dim": 16},
    "rope": {"dim": 16},
    "xpos": {"dim": 16},
    "alibi": {"num_heads": 4},
    "t5": {"num_heads": 4},
    "shaw": {"dim": 16},
    "none": {},
}


def _buffer_rows(module: torch.nn.Module, name: str) -> int:
    table = getattr(module, name)
    return 0 if table is None else table.shape[0]


# -- sinusoidal row cache ------------------------------------------------------------------------

SIN = posenc.create("sinusoidal", dim=16, layout="half")  # shared across examples: the cache accumulates


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(0, 3000), length=st.integers(1, 70))
def test_sinusoidal_cache_equals_uncached(offset: int, length: int) -> None:
    """Rows served by the cache equal F.sinusoidal at the same positions, bit for bit."""
    positions = torch.arange(offset, offset + length)
    expected = F.sinusoidal(positions, 16, layout="half")
    assert torch.equal(SIN.encode(positions), expected)
    x = torch.zeros(2, length, 16)
    assert torch.equal(SIN.embed(x, positions), expected.expand(2, -1, -1))
    assert _buffer_rows(SIN, "_table") > offset + length - 1


def test_sinusoidal_cache_regrows_and_serves_float_positions_uncached() -> None:
    enc = posenc.create("sinusoidal", dim=8)
    assert _buffer_rows(enc, "_table") == 0
    enc.encode(10)
    assert _buffer_rows(enc, "_table") == 64
    enc.encode(torch.tensor([1000]))
    assert _buffer_rows(enc, "_table") == 1024  # next power of two above 1000
    assert torch.equal(enc.encode(torch.tensor([999])), F.sinusoidal(torch.tensor([999]), 8))
    assert torch.equal(enc.encode(torch.tensor([2.5])), F.sinusoidal(torch.tensor([2.5]), 8))
    assert torch.equal(enc.encode(torch.tensor([-3])), F.sinusoidal(torch.tensor([-3]), 8))  # negative: uncached
    assert _buffer_rows(enc, "_table") == 1024


def test_row_cache_grows_for_a_position_equal_to_its_size():
    """The sinusoid's row cache starts at 64 rows (positions 0..63). Position 64 is one past it, so
    the cache must grow: the code equals the uncached build exactly (an off-by-one reads past the
    table)."""
    enc = posenc.create("sinusoidal", dim=8)
    enc.encode(torch.tensor([3, 5]))
    assert enc._table.shape[0] == 64
    got = enc.encode(torch.tensor([64]))
    assert torch.equal(got, enc._build(torch.tensor([64])))
    assert torch.equal(got, F.sinusoidal(torch.tensor([64]), 8))


# -- RoPE cos/sin cache -------------------------------------------------------------------------

ROPE = posenc.create("rope", dim=16, layout="interleaved")


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(0, 5000), length=st.integers(1, 40), explicit=st.booleans())
def test_rope_cache_equals_uncached(offset: int, length: int, explicit: bool) -> None:
    """Tables served from the cache equal freshly built ones bit for bit; rotations through the cache
    (default positions with a decoding offset, or explicit positions) equal each other bit for bit and
    F.apply_rope with fresh tables to 1e-6 (the scheme may rotate with a faster, reordered kernel)."""
    x = torch.randn(1, 2, length, 16)
    keys = torch.randn(1, 2, offset + length, 16)
    positions = torch.arange(offset, offset + length)
    cos, sin = F.rope_cos_sin(positions, ROPE.inv_freq, layout="interleaved")
    cached_cos, cached_sin = ROPE.cos_sin(positions)
    assert torch.equal(cached_cos, cos) and torch.equal(cached_sin, sin)
    by_default, _ = ROPE.rotate(x, keys)  # queries default to the last `length` key positions
    explicit_positions, _ = ROPE.rotate(x, x, positions, positions)
    assert torch.equal(by_default, explicit_positions)
    got = explicit_positions if explicit else by_default
    torch.testing.assert_close(got, F.apply_rope(x, cos, sin, layout="interleaved"), atol=1e-6, rtol=0)


def test_rope_cache_regrows() -> None:
    rope = posenc.create("rope", dim=8)
    q = torch.randn(1, 1, 5, 8)
    rope.rotate(q, q)
    first = _buffer_rows(rope, "_cos_sin")
    assert first >= 5
    rope.rotate(q, q, torch.arange(3000, 3005), torch.arange(3000, 3005))
    assert _buffer_rows(rope, "_cos_sin") >= 3005 > first


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_a_bias_written_to_in_place_is_not_served_again(name: str) -> None:
    """``bias()`` hands out the cached bias; a caller that masks it in place (a common way to add a
    causal mask) must not change the next call's bias, nor an Attention layer's output. It used
    to: the cache served the edited tensor (ALiBi off by 0.01 in attention)."""
    enc = posenc.create(name, num_heads=2, bidirectional=True).eval()
    p = torch.arange(6)
    with torch.no_grad():
        want = enc.bias(p, p).clone()
        enc.bias(p, p).masked_fill_(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(enc.bias(p, p), want, rtol=0, atol=0)
        enc.bias(p, p).zero_()
        attn = posenc.Attention(8, 2, encoding=enc)
        fresh = posenc.Attention(8, 2, encoding=posenc.create(name, num_heads=2, bidirectional=True))
        fresh.load_state_dict(attn.state_dict())
        x = torch.randn(1, 6, 8)
        torch.testing.assert_close(attn(x), fresh(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["rope", "sinusoidal"])
def test_a_table_slice_written_to_in_place_is_not_served_again(name: str) -> None:
    """Tables for a range of positions (the default positions, a KV cache's) are slices of the row
    cache: writing to one in place must not reach the next call (it did: attention off by 0.15)."""
    enc = posenc.create(name, dim=8)
    p = posenc.schemes.base.default_positions(None, 5, torch.device("cpu"))  # a marked range: served as a slice
    read = (lambda: enc.cos_sin(p)[0]) if name == "rope" else (lambda: enc.encode(p))
    want = read().clone()
    read().mul_(0)
    torch.testing.assert_close(read(), want, rtol=0, atol=0)


def test_frequencies_edited_through_data_rebuild_the_rope_cache() -> None:
    """An edit through ``.data`` leaves the version counter alone (HF-style initialisation writes
    so); on the CPU the cache compares the frequencies' values and rebuilds (it used to serve a
    table for the old frequencies: off by 4.4)."""
    rope = posenc.create("rope", dim=8)
    q = torch.randn(1, 1, 5, 8)

    def reference():  # the rotation by the frequencies the module holds now, no cache
        cos, sin = F.rope_cos_sin(5, rope.inv_freq)
        return F.apply_rope(q, cos, sin)

    first, _ = rope.rotate(q, q)
    rope.inv_freq.mul_(2)
    doubled, _ = rope.rotate(q, q)
    torch.testing.assert_close(doubled, reference(), rtol=0, atol=1e-6)
    assert (doubled - first).abs().max() > 0.1
    rope.inv_freq.data.mul_(0.5)  # the original frequencies again, the version counter unmoved
    again, _ = rope.rotate(q, q)
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    with torch.no_grad():
        rope.inv_freq.mul_(3)  # an in-place edit under no_grad, as an initialiser might make
    torch.testing.assert_close(rope.rotate(q, q)[0], reference(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["alibi", "t5"])
@pytest.mark.parametrize("grad", [False, True])  # T5 under grad takes the bucket cache, without it the bias cache
def test_cached_biases_follow_the_query_offset(name: str, grad: bool) -> None:
    """Two calls with the same lengths and key positions but queries further on (a chunked
    prefill) must not share a cached bias: each equals the uncached build (batched positions)."""
    torch.manual_seed(0)
    enc = posenc.create(name, num_heads=4)
    keys = torch.arange(8)
    with torch.set_grad_enabled(grad):
        for start in (0, 4, 2, 4):
            queries = torch.arange(start, start + 4)
            got = enc.bias(queries, keys)
            want = enc.bias(queries[None], keys[None])[0]  # batched positions skip every cache
            torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_rope_rotates_default_queries_at_the_last_key_positions() -> None:
    """Without positions, ``sq`` queries sit at the last ``sq`` of the ``sk`` key positions (one
    decoding step: position sk - 1), not at 0."""
    torch.manual_seed(0)
    rope = posenc.create("rope", dim=8)
    q, k = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    whole, _ = rope.rotate(q, k)
    last, _ = rope.rotate(q[..., -1:, :], k)
    torch.testing.assert_close(last, whole[..., -1:, :], rtol=0, atol=0)
    tail, _ = rope.rotate(q[..., 2:, :], k)
    torch.testing.assert_close(tail, whole[..., 2:, :], rtol=0, atol=0)


def test_rope_axial_default_query_positions_are_the_last_keys():
    """With default positions, rope_axial places sq queries at the last sq of the sk key positions
    (its docstring), as a decoder's new queries after the cached keys: rotating the last 3 queries
    alone equals the last 3 rows of rotating all 10. Exact comparison."""
    enc = posenc.create("rope_axial", dim=16)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 10, 16, generator=g)
    k = torch.randn(1, 2, 10, 16, generator=g)
    q_all, k_all = enc.rotate(q, k)
    q_last, k_last = enc.rotate(q[:, :, -3:], k)
    assert torch.equal(q_last, q_all[:, :, -3:])
    assert torch.equal(k_last, k_all)


# -- state_dict and dtype/device hygiene --------------------------------------------------------


@pytest.mark.parametrize("name", list(SCHEMES))
def test_caches_stay_out_of_state_dict(name: str) -> None:
    """After forwards that fill every cache, state_dict holds learned parameters only."""
    enc = posenc.create(name, **SCHEMES[name])
    params = {n for n, _ in enc.named_parameters()}
    q = torch.randn(1, 4, 20, 16)
    pos = torch.arange(100, 120)
    enc.embed(torch.randn(1, 20, 16), pos) if enc.family == "absolute" else None
    enc.rotate(q, q, pos, pos)
    enc.bias(pos, pos)
    assert set(enc.state_dict()) == params
    fresh = posenc.create(name, **SCHEMES[name])
    fresh.load_state_dict(enc.state_dict())  # strict: nothing missing, nothing unexpected


def test_attention_state_dict_has_no_position_buffers() -> None:
    attn = posenc.Attention(32, 4, encoding="rope", causal=True)
    attn(torch.randn(1, 10, 32))
    assert set(attn.state_dict()) == {"qkv.weight", "proj.weight", "proj.bias"}


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


# -- compilation ----------------------------------------------------------------------------------

COMPILED = [("rope", True), ("alibi", True), ("t5", False), ("sinusoidal", True)]


def _hook(enc: posenc.PositionalEncoding, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The scheme's own hook on its own: rotate q/k [b, h, s, hd], a bias [b, h, s, s], or embed x [b, s, d]."""
    if enc.family == "rotary":
        q = x.view(*x.shape[:2], 4, 8).transpose(1, 2)  # [b, s, d] -> [b, h, s, hd]
        return enc.rotate(q, q.flip(-1), positions, positions)
    if enc.family == "bias":
        return (enc.bias(positions, positions),)
    return (enc.embed(x, positions),)


@pytest.mark.slow
@pytest.mark.parametrize("name, causal", COMPILED)
def test_compiled_forward_equals_eager(name: str, causal: bool) -> None:
    """torch.compile(fullgraph=True, dynamic=False) of one function running the scheme's hook and
    Attention.forward with it, at positions [b, s] (offset rows), gives the eager result to 1e-5 and
    mutates no buffer while compiled (caches stay as they were)."""
    torch._dynamo.reset()
    attn = posenc.Attention(32, 4, encoding=name, causal=causal).eval()
    x = torch.randn(2, 8, 32)
    positions = torch.stack((torch.arange(8), torch.arange(50, 58)))  # [b, s]

    def forward(x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (attn(x, positions), *_hook(attn.encoding, x, positions))

    buffers = {n: b for n, b in attn.named_buffers()}
    compiled = torch.compile(forward, fullgraph=True, dynamic=False)
    with torch.no_grad():
        got = compiled(x, positions)
        after = {n: b for n, b in attn.named_buffers()}
        assert set(after) == set(buffers) and all(after[n] is buffers[n] for n in buffers)
        expected = forward(x, positions)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


@pytest.mark.slow
def test_compiled_with_dynamic_shapes_serves_every_length() -> None:
    """dynamic=True: one compiled sinusoidal Attention (the scheme that validated ``base`` inside its forward
    before, which broke the graph) serves lengths 8, 12 and 20 with the eager result (atol 1e-5)."""
    torch._dynamo.reset()
    attn = posenc.Attention(32, 4, encoding="sinusoidal", causal=True).eval()
    compiled = torch.compile(attn, fullgraph=True, dynamic=True)
    with torch.no_grad():
        for s in (8, 12, 20):
            x = torch.randn(2, s, 32)
            torch.testing.assert_close(compiled(x), attn(x), atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


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
