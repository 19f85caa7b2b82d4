"""``posenc.Attention`` against explicit attention math, for every registered scheme.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``d`` model width, ``hd`` head width.

The reference below writes softmax(q kᵀ / √hd + bias + mask) v out by hand from the scheme's hooks;
Shaw et al. 2018 is checked against a naive O(s² · hd) loop over the paper's equations (section 3.1).
Tests run in float64 so that differences of 1e-10 mean a wrong formula, not rounding.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as nnf

import posenc

D, H = 32, 4
HD = D // H


def _build(name: str, causal: bool) -> posenc.Attention:
    try:
        attn = posenc.Attention(D, H, encoding=name, causal=causal)
    except (TypeError, ValueError) as err:  # e.g. a multi-dimensional scheme that needs a grid shape
        pytest.skip(f"{name!r} cannot be built by name for a 1-D sequence: {err}")
    torch.manual_seed(1)
    for p in attn.parameters():  # larger than the 0.02 inits, so position terms matter in the output
        torch.nn.init.normal_(p, std=0.3)
    return attn.double().eval()


def reference(
    attn: posenc.Attention, x: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Explicit attention through the scheme's hooks: no SDPA, masks built here."""
    enc = attn.encoding
    b, s, _ = x.shape
    if enc.n_axes > 1:  # N-D schemes read 1-D positions as axis 0 (MRoPE: t = h = w), as Attention does
        from posenc.functional.mrope import mrope_coordinates
        from posenc.functional.multidim import as_coordinates

        if enc.name == "mrope":
            positions = mrope_coordinates(positions, length=s)  # [s, 3] or [b, s, 3]
        else:
            positions = as_coordinates(positions, enc.n_axes, length=s)  # [s, n] or [b, s, n]
    if enc.family == "absolute":
        x = enc.embed(x, positions)
    q, k, v = attn.qkv(x).view(b, s, 3, H, HD).permute(2, 0, 3, 1, 4)  # 3 × [b, h, s, hd]
    q, k = enc.rotate(q, k, positions, positions)
    scores = q @ k.transpose(-2, -1)  # [b, h, s, s]
    extra = enc.query_scores(q, positions, positions)
    if extra is not None:
        scores = scores + extra
    scores = scores / math.sqrt(HD)
    bias = enc.input_bias(enc.input_terms(x), s) if enc.uses_input_terms else enc.bias(positions, positions)
    if bias is not None:
        scores = scores + (bias if bias.dim() == 4 else bias[None])
    if attn.causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    term = enc.logit_term(q, scores, positions, positions)  # CoPE: from the masked logits
    if term is not None:
        scores = scores + term
    probs = scores.softmax(-1)
    out = probs @ v  # [b, h, s, hd]
    value = enc.value_term(probs, positions, positions)
    if value is not None:
        out = out + value
    return attn.proj(out.transpose(1, 2).reshape(b, s, D))  # [b, h, s, hd] -> [b, s, d]


NAMES = posenc.available()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_matches_explicit_attention(name: str, causal: bool) -> None:
    """Attention equals the explicit reference for positions [s] (default and offset) to 1e-10."""
    attn = _build(name, causal)
    x = torch.randn(2, 9, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), reference(attn, x, torch.arange(9)), atol=1e-10, rtol=0)
        pos = torch.arange(30, 39)
        torch.testing.assert_close(attn(x, pos), reference(attn, x, pos), atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_batched_positions(name: str) -> None:
    """Positions [b, s]: each row equals that row run alone with its own positions [s]."""
    attn = _build(name, causal=True)
    x = torch.randn(2, 6, D, dtype=torch.float64)
    positions = torch.stack((torch.arange(6), torch.arange(100, 106)))  # [b, s]
    with torch.no_grad():
        out = attn(x, positions)
        for i in range(2):
            torch.testing.assert_close(out[i : i + 1], attn(x[i : i + 1], positions[i]), atol=1e-10, rtol=0)
        torch.testing.assert_close(out, reference(attn, x, positions), atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_incremental_decoding_equals_full_forward(name: str) -> None:
    """Causal decoding with a KVCache — a prompt of 4, then 1, 1 and 3 tokens — gives the outputs of one
    full forward pass (atol 1e-10), and the cache ends holding every key."""
    attn = _build(name, causal=True)
    x = torch.randn(2, 9, D, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        cache = posenc.KVCache()
        steps = [attn(x[:, a:b], cache=cache) for a, b in [(0, 4), (4, 5), (5, 6), (6, 9)]]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)
    assert cache.length == 9 and cache.k.shape == (2, H, 9, HD)
    key_positions = cache.positions if attn.encoding.n_axes == 1 else cache.positions[..., 0]  # [sk]
    assert key_positions.tolist() == list(range(9))


@pytest.mark.parametrize("name", NAMES)
def test_incremental_decoding_with_batched_positions(name: str) -> None:
    """Decoding with explicit positions [b, s] (rows at different offsets) equals the full pass."""
    attn = _build(name, causal=True)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    positions = torch.stack((torch.arange(5), torch.arange(7, 12)))  # [b, s]
    with torch.no_grad():
        full = attn(x, positions)
        cache = posenc.KVCache()
        steps = [attn(x[:, a:b], positions[:, a:b], cache=cache) for a, b in [(0, 3), (3, 4), (4, 5)]]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_key_mask_equals_unpadded(name: str) -> None:
    """Right padding masked with key_mask: the real tokens' outputs equal the unpadded sequence's."""
    attn = _build(name, causal=False)
    x = torch.randn(2, 7, D, dtype=torch.float64)
    key_mask = torch.ones(2, 7, dtype=torch.bool)
    key_mask[1, 5:] = False
    with torch.no_grad():
        out = attn(x, key_mask=key_mask)
        torch.testing.assert_close(out[1, :5], attn(x[1:, :5])[0], atol=1e-10, rtol=0)
        torch.testing.assert_close(out[0], attn(x[:1])[0], atol=1e-10, rtol=0)
        torch.testing.assert_close(out, reference(attn, x, torch.arange(7), key_mask), atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_left_padding_with_positions_and_key_mask(name: str) -> None:
    """Left padding: positions [b, s] restart at 0 on the first real token and key_mask hides the pads;
    the real tokens' outputs equal the unpadded sequence's (causal)."""
    attn = _build(name, causal=True)
    x = torch.randn(1, 5, D, dtype=torch.float64)
    padded = torch.cat((torch.randn(1, 2, D, dtype=torch.float64), x), dim=1)  # [1, 7, d]
    positions = torch.tensor([[0, 0, 0, 1, 2, 3, 4]])
    key_mask = torch.tensor([[False, False, True, True, True, True, True]])
    with torch.no_grad():
        out = attn(padded, positions, key_mask=key_mask)
        torch.testing.assert_close(out[:, 2:], attn(x), atol=1e-10, rtol=0)


def _count_sdpa(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = nnf.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(nnf, "scaled_dot_product_attention", counting)
    return calls


@pytest.mark.parametrize("name", NAMES)
def test_sdpa_used_when_the_scheme_allows(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rotations, additive biases and absolute codes go through scaled_dot_product_attention; only schemes
    with query- or value-dependent terms (Shaw) use explicit math."""
    attn = _build(name, causal=True)
    calls = _count_sdpa(monkeypatch)
    with torch.no_grad():
        attn(torch.randn(1, 4, D, dtype=torch.float64))
    assert len(calls) == (0 if attn.encoding.uses_query_terms else 1)


def test_sdpa_is_causal_flag_without_bias(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no bias and no cache, causal attention asks SDPA for is_causal=True and builds no mask."""
    attn = _build("rope", causal=True)
    seen: list[dict] = []
    real = nnf.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(nnf, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        attn(torch.randn(1, 4, D, dtype=torch.float64))
    assert seen[0].get("is_causal") is True and seen[0].get("attn_mask") is None


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_causal_masked_bias_is_reused_while_the_bias_is_unchanged(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without gradients, the causal-masked bias is built once and passed to SDPA again (the same
    tensor) while the scheme's cached bias is unchanged; a new length, a key mask, an edited T5
    table or a bias that needs gradients builds it anew, and outputs never differ from a fresh
    module's."""
    attn = _build(name, causal=True).eval()
    masks: list[torch.Tensor] = []
    real = nnf.scaled_dot_product_attention

    def spy(*args, **kwargs):
        masks.append(kwargs.get("attn_mask"))
        return real(*args, **kwargs)

    monkeypatch.setattr(nnf, "scaled_dot_product_attention", spy)
    x = torch.randn(2, 6, D, dtype=torch.float64)
    with torch.no_grad():
        first, second = attn(x), attn(x)
        assert masks[1] is masks[0] and torch.equal(first, second)
        assert torch.equal(torch.isneginf(masks[0][0, 0]), torch.ones(6, 6, dtype=torch.bool).triu(1))
        attn(x[:, :5])
        assert masks[2] is not masks[1] and masks[2].shape[-1] == 5
        attn(x, key_mask=torch.ones(2, 6, dtype=torch.bool))
        assert masks[3] is not masks[0]
        if name == "t5":
            attn.encoding.relative_attention_bias.weight.add_(1.0)  # in place: the bias is rebuilt
            edited = attn(x)
            assert masks[-1] is not masks[0]
            fresh = _build(name, causal=True).eval()
            fresh.load_state_dict(attn.state_dict())
            torch.testing.assert_close(edited, fresh(x), atol=1e-12, rtol=0)
    if name == "t5":  # the learned table requires grad: masked anew each step, gradients flow; on the
        # CPU through explicit math (SDPA would take its unfused math kernel with a mask that needs gradients)
        n = len(masks)
        explicit = attn._explicit
        monkeypatch.setattr(
            attn, "_explicit", lambda q, k, v, mask, *a: masks.append(mask) or explicit(q, k, v, mask, *a)
        )
        attn.train()(x).sum().backward()
        assert len(masks) == n + 1 and masks[-1].requires_grad
        assert attn.encoding.relative_attention_bias.weight.grad is not None


# -- Shaw et al. 2018 against the paper's equations --------------------------------------------


def naive_shaw(attn: posenc.Attention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Shaw et al. 2018, eqs. (3)-(5) with section 3.2's clipping, one (i, j) pair at a time:
    e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / √d_z,  z_i = Σ_j α_ij (x_j W^V + a^V_ij),
    a_ij = w[clip(j - i, -K, K)]."""
    enc = attn.encoding
    K = enc.config.max_relative_position
    w_k, w_v = enc.key_embeddings.weight, enc.value_embeddings.weight  # [2K+1, hd]
    b, s, _ = x.shape
    q, k, v = attn.qkv(x).view(b, s, 3, H, HD).unbind(2)  # 3 × [b, s, h, hd]
    z = torch.zeros(b, s, H, HD, dtype=x.dtype)
    for n in range(b):
        for h in range(H):
            for i in range(s):
                logits = []
                for j in range(s):
                    a_k = w_k[min(max(j - i, -K), K) + K]
                    e = (q[n, i, h] @ (k[n, j, h] + a_k)) / math.sqrt(HD)
                    logits.append(e if not (causal and j > i) else torch.tensor(float("-inf"), dtype=x.dtype))
                alpha = torch.stack(logits).softmax(0)
                for j in range(s):
                    a_v = w_v[min(max(j - i, -K), K) + K]
                    z[n, i, h] += alpha[j] * (v[n, j, h] + a_v)
    return attn.proj(z.reshape(b, s, D))  # [b, s, h, hd] -> [b, s, d]


@pytest.mark.parametrize("causal", [False, True])
def test_shaw_equals_the_papers_equations(causal: bool) -> None:
    """K = 2 with 7 tokens, so clipping is exercised on both sides; atol 1e-10."""
    enc = posenc.create("shaw", dim=HD, max_relative_position=2)
    attn = posenc.Attention(D, H, encoding=enc, causal=causal)
    torch.manual_seed(3)
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.3)
    attn = attn.double().eval()
    x = torch.randn(2, 7, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), naive_shaw(attn, x, causal), atol=1e-10, rtol=0)


def test_shaw_without_value_embeddings() -> None:
    """values=False keeps only the key term: equal to the explicit reference; no value embeddings exist."""
    enc = posenc.create("shaw", dim=HD, max_relative_position=3, values=False)
    attn = posenc.Attention(D, H, encoding=enc).double().eval()
    assert enc.value_embeddings is None
    x = torch.randn(1, 8, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), reference(attn, x, torch.arange(8)), atol=1e-10, rtol=0)


def test_bf16_attention_module_keeps_float64_frequencies() -> None:
    """``Attention(...).to(torch.bfloat16)`` moves parameters to bf16 but keeps the RoPE and sinusoid
    frequencies and ALiBi's slopes float64, so a bf16 model uses exact frequencies (docs/design.md, precision)."""
    rope = posenc.Attention(D, H, encoding="rope").to(torch.bfloat16)
    assert rope.qkv.weight.dtype == torch.bfloat16
    assert rope.encoding.inv_freq.dtype == torch.float64
    torch.testing.assert_close(rope.encoding.inv_freq, posenc.create("rope", dim=HD).inv_freq, atol=0, rtol=0)
    sinusoid = posenc.Attention(D, H, encoding="sinusoidal").to(torch.bfloat16)
    assert sinusoid.encoding.inv_freq.dtype == torch.float64
    alibi = posenc.Attention(D, H, encoding="alibi", causal=True).to(torch.bfloat16)
    assert alibi.encoding.slopes.dtype == torch.float64
    bias = alibi.encoding.bias(torch.tensor([4095, 4096]), torch.tensor([0]))
    assert bias[0, :, 0].tolist() == [-4095 * 0.25, -4096 * 0.25]  # slope 2^-2 for head 0 of 4
    with torch.no_grad():
        out = rope(torch.randn(1, 5, D).to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_fully_masked_queries_give_zero_attention_and_finite_gradients(name: str) -> None:
    """A left pad under a causal mask sees no key: its attention output is zero (the output is the
    projection's bias), as SDPA gives, for the explicit path too; no NaN reaches any gradient."""
    attn = _build(name, causal=True)
    x = torch.randn(1, 4, D, dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([[0, 0, 1, 2]])
    key_mask = torch.tensor([[False, True, True, True]])
    out = attn(x, positions, key_mask=key_mask)
    torch.testing.assert_close(out[0, 0], attn.proj.bias, atol=1e-12, rtol=0)
    out[:, 1:].sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters() if p.grad is not None)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("pad", [False, True], ids=["no-pad", "left-pad"])
def test_bias_with_gradients_takes_explicit_math_equal_to_sdpa(causal: bool, pad: bool, monkeypatch) -> None:
    """T5 in training (its table needs gradients) on the CPU: explicit math, whose output and
    gradients (x, every weight, the bucket table) equal SDPA given the same float mask, with and
    without fully masked queries (a left pad under a causal mask)."""
    attn = _build("t5", causal=causal)
    used = []
    explicit = attn._explicit
    monkeypatch.setattr(attn, "_explicit", lambda *a: used.append(1) or explicit(*a))
    x = torch.randn(2, 5, D, dtype=torch.float64, requires_grad=True)
    key_mask = torch.tensor([[False, True, True, True, True], [True] * 5]) if pad else None
    out = attn(x, key_mask=key_mask)
    assert used == [1]
    params = (x, *attn.parameters())
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, params, g)
    b, s, h, hd = 2, 5, H, D // H
    q, k, v = attn.qkv(x).view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
    pos = torch.arange(s)
    mask = attn.encoding.bias(pos, pos)[None]  # [1, h, s, s]
    forbid = torch.ones(s, s, dtype=torch.bool).triu(1) if causal else torch.zeros(s, s, dtype=torch.bool)
    if pad:
        forbid = forbid | ~key_mask[:, None, None, :]
    mask = mask.masked_fill(forbid, float("-inf"))
    ref = nnf.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=attn.scale)
    ref = attn.proj(ref.transpose(1, 2).reshape(b, s, D))
    want = torch.autograd.grad(ref, params, g)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, atol=1e-12, rtol=1e-12)


def _learned_schemes() -> list[str]:
    names = []
    for name in NAMES:
        try:
            if any(True for _ in posenc.Attention(D, H, encoding=name).encoding.parameters()):
                names.append(name)
        except (TypeError, ValueError):
            pass
    return names


@pytest.mark.parametrize("name", _learned_schemes())
def test_encoding_parameters_receive_gradients(name: str) -> None:
    """Learned position parameters (tables, biases, Shaw's embeddings) get gradients through Attention."""
    attn = _build(name, causal=True)
    params = dict(attn.encoding.named_parameters())
    attn(torch.randn(2, 6, D, dtype=torch.float64)).pow(2).sum().backward()
    for pname, p in params.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_sinusoidal_learned_scale_receives_gradient() -> None:
    enc = posenc.create("sinusoidal", dim=D, learned_scale=True)
    attn = posenc.Attention(D, H, encoding=enc)
    torch.testing.assert_close(enc.scale.detach(), torch.tensor(D**-0.5))
    attn(torch.randn(1, 5, D)).sum().backward()
    assert enc.scale.grad is not None and enc.scale.grad.abs() > 0


@pytest.mark.parametrize("name", NAMES)
def test_decoding_left_padded_batch(name: str) -> None:
    """Decoding a left-padded batch with a KVCache, positions [b, s] and a growing key_mask [b, sk]
    equals the full forward on the real tokens."""
    attn = _build(name, causal=True)
    x = torch.randn(2, 6, D, dtype=torch.float64)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])  # row 1: two pads, then 0..3
    key_mask = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    with torch.no_grad():
        full = attn(x, positions, key_mask=key_mask)
        cache = posenc.KVCache()
        steps = [
            attn(x[:, a:b], positions[:, a:b], cache=cache, key_mask=key_mask[:, :b])
            for a, b in [(0, 4), (4, 5), (5, 6)]
        ]
        alone = attn(x[1:, 2:])  # the real tokens of row 1 on their own
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)
    torch.testing.assert_close(full[1, 2:], alone[0], atol=1e-10, rtol=0)


def test_decoding_default_positions_stay_a_known_range():
    """Decoding with default positions keeps the KVCache's positions a known range (marked, not read
    back: on a GPU each read is a synchronisation), so each step's positions continue it without
    reading the last one; outputs equal one causal pass. An in-place edit of the cached positions
    voids the record, and the next step reads them."""
    from posenc.kernels.ranges import known_range

    for scheme in ("rope", "t5", "alibi", "learned"):
        torch.manual_seed(0)
        attn = posenc.Attention(32, 4, encoding=scheme, causal=True).eval()
        x = torch.randn(2, 9, 32)
        with torch.no_grad():
            full = attn(x)
            cache = posenc.KVCache()
            steps = [attn(x[:, :4], cache=cache)] + [attn(x[:, t : t + 1], cache=cache) for t in range(4, 7)]
            assert known_range(cache.positions) == 0 and cache.positions.tolist() == list(range(7))
            cache.positions.add_(10)  # positions 10..16 now: read back, continued at 17
            steps.append(attn(x[:, 7:9], cache=cache))
        torch.testing.assert_close(torch.cat(steps[:4], 1), full[:, :7], atol=1e-6, rtol=0)
        assert known_range(cache.positions) is None and cache.positions[-2:].tolist() == [17, 18]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kv", [2, 1])
def test_grouped_query_attention_equals_repeated_key_value_heads(name: str, kv: int) -> None:
    """``num_kv_heads`` (GQA; 1 is multi-query): equal to full multi-head attention whose key and
    value projections repeat each shared head for its group of queries, with a cache too, on every
    path (SDPA with and without a bias, Shaw's explicit math)."""
    if name in ("sinusoidal_nd", "rope_axial"):
        pytest.skip("N-D schemes: covered by the 1-D ones (the heads are independent of the coordinates)")
    torch.manual_seed(2)
    enc = _build(name, causal=True).encoding
    grouped = posenc.Attention(D, H, encoding=enc, causal=True, num_kv_heads=kv).double().eval()
    full = posenc.Attention(D, H, encoding=enc, causal=True).double().eval()
    with torch.no_grad():
        for p in grouped.parameters():
            torch.nn.init.normal_(p, std=0.3)
        wq, wk, wv = grouped.qkv.weight.split((H * HD, kv * HD, kv * HD))
        repeat = H // kv  # [kv hd, d] -> [h hd, d]: each shared head once per query head of its group
        full.qkv.weight.copy_(
            torch.cat((wq, *(w.view(kv, HD, D).repeat_interleave(repeat, 0).flatten(0, 1) for w in (wk, wv))))
        )
        full.proj.load_state_dict(grouped.proj.state_dict())
        x = torch.randn(2, 9, D, dtype=torch.float64)
        want = full(x)
        torch.testing.assert_close(grouped(x), want, atol=1e-10, rtol=0)
        cache = posenc.KVCache()
        steps = torch.cat([grouped(x[:, i : i + 3], cache=cache) for i in range(0, 9, 3)], 1)
        torch.testing.assert_close(steps, want, atol=1e-10, rtol=0)
        assert cache.k.shape == (2, kv, 9, HD)


def test_head_and_group_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match=r"num_kv_heads=3 must divide num_heads=4"):
        posenc.Attention(32, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match=r"dim=30 must be divisible by num_heads=4 \(or pass head_dim=\)"):
        posenc.Attention(30, 4)
    wide = posenc.Attention(30, 4, head_dim=16, num_kv_heads=2, encoding="rope")
    assert (wide.qkv.weight.shape, wide.proj.weight.shape) == ((4 * 16 + 2 * 2 * 16, 30), (30, 64))
    assert wide(torch.randn(1, 5, 30)).shape == (1, 5, 30)
