"""CoPE (Golovneva et al. 2024): parity with x-transformers' ``CoPE`` given the same table, through
:class:`posenc.Attention` with and without a KV cache, gradients and config errors."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc.schemes.cope import cope_positions

xt = pytest.importorskip("x_transformers.x_transformers")


def _layer(dim: int = 16, heads: int = 2, *, causal: bool = True, max_positions: int = 4) -> posenc.Attention:
    torch.manual_seed(0)
    enc = posenc.create("cope", dim=dim // heads, max_positions=max_positions, bidirectional=not causal)
    with torch.no_grad():
        enc.pos_emb.normal_()
    return posenc.Attention(dim, heads, encoding=enc, causal=causal)


def _reference(layer: posenc.Attention, x: torch.Tensor) -> torch.Tensor:
    """The layer computed as x-transformers' ``Attend`` does with ``use_cope`` (attend.py: scaled
    logits, causal mask at ``-finfo.max``, then ``sim + cope(q, sim)``), its ``CoPE`` holding our table."""
    b, s, d = x.shape
    h, hd = layer.num_heads, layer.head_dim
    ref = xt.CoPE(dim=hd, heads=h, max_pos=layer.encoding.config.max_positions)
    with torch.no_grad():
        ref.pos_emb.copy_(layer.encoding.pos_emb)
    q, k, v = layer.qkv(x).view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)  # [b, h, s, hd] each
    sim = q @ k.transpose(-2, -1) * hd**-0.5
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    sim = sim.masked_fill(causal, -torch.finfo(sim.dtype).max)
    sim = sim + ref(q, sim)
    out = sim.softmax(-1) @ v  # [b, h, s, hd]
    return layer.proj(out.transpose(1, 2).flatten(2))


def test_logit_term_equals_x_transformers() -> None:
    """The term alone, on masked logits: equal to x-transformers' ``CoPE.forward(query, attn_logits)``."""
    torch.manual_seed(1)
    enc = posenc.create("cope", dim=8, max_positions=5, init_std=1.0)
    ref = xt.CoPE(dim=8, heads=3, max_pos=5)
    with torch.no_grad():
        ref.pos_emb.copy_(enc.pos_emb)
    q = torch.randn(2, 3, 7, 8)
    logits = torch.randn(2, 3, 7, 7) * 3
    mask = torch.ones(7, 7, dtype=torch.bool).triu(1)
    ours = enc.logit_term(q, logits.masked_fill(mask, float("-inf")), torch.arange(7), torch.arange(7))
    theirs = ref(q, logits.masked_fill(mask, -torch.finfo(torch.float32).max))
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    assert ours.abs().max() > 0.1


@pytest.mark.parametrize("max_positions", [2, 4, 64])
def test_attention_equals_x_transformers(max_positions: int) -> None:
    layer = _layer(max_positions=max_positions)
    x = torch.randn(2, 9, 16)
    torch.testing.assert_close(layer(x), _reference(layer, x), atol=1e-6, rtol=0)


def test_positions_count_gates() -> None:
    """Gates all 1 count keys: p_ij = i - j + 1 (clipped); gates 0 past the query (masked)."""
    gates = torch.ones(5, 5).tril()
    pos = cope_positions(gates, 10)
    expected = (torch.arange(5)[:, None] - torch.arange(5)[None, :] + 1).clamp(min=0).float().tril()
    torch.testing.assert_close(pos, expected)
    assert cope_positions(gates, 3).max() == 2


def test_bidirectional_counts_both_ways() -> None:
    gates = torch.ones(4, 4)
    rel = torch.arange(4)[None, :] - torch.arange(4)[:, None]
    pos = cope_positions(gates, 10, rel)
    torch.testing.assert_close(pos, rel.abs().float() + 1)


@pytest.mark.parametrize("causal", [True, False])
def test_decoding_equals_full_forward(causal: bool) -> None:
    layer = _layer(causal=causal).eval()
    x = torch.randn(2, 7, 16)
    full = layer(x)
    if not causal:  # an encoder's keys see the future: decoding the whole sequence at once only
        cache = posenc.KVCache()
        torch.testing.assert_close(layer(x, cache=cache), full, atol=1e-6, rtol=0)
        return
    cache = posenc.KVCache()
    steps = [layer(x[:, :3], cache=cache)] + [layer(x[:, t : t + 1], cache=cache) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=0)


def test_gradients_reach_the_table_and_input() -> None:
    layer = _layer()
    x = torch.randn(2, 6, 16, requires_grad=True)
    layer(x).square().sum().backward()
    assert float(layer.encoding.pos_emb.grad.abs().sum()) > 0
    assert bool(torch.isfinite(x.grad).all()) and float(x.grad.abs().sum()) > 0


def test_key_mask_zeroes_padding_gates() -> None:
    """A left-padded row equals the row without its padding."""
    layer = _layer().eval()
    x = torch.randn(1, 5, 16)
    padded = torch.cat([torch.randn(1, 2, 16), x], dim=1)
    key_mask = torch.tensor([[False, False, True, True, True, True, True]])
    out = layer(padded, torch.tensor([[0, 0, 0, 1, 2, 3, 4]]), key_mask=key_mask)
    torch.testing.assert_close(out[:, 2:], layer(x), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"dim": 0}, "dim"),
        ({"dim": 8, "max_positions": 0}, "max_positions"),
        ({"dim": 8, "init_std": -1.0}, "init_std"),
        ({"dim": 8, "bidirectional": "yes"}, "bidirectional"),
    ],
)
def test_bad_config(config: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        posenc.create("cope", **config)


def test_causal_form_refuses_an_encoder() -> None:
    with pytest.raises(ValueError, match="bidirectional=True"):
        posenc.Attention(16, 2, encoding=posenc.create("cope", dim=8), causal=False)
    with pytest.raises(ValueError, match="head width 8"):
        posenc.Attention(16, 2, encoding=posenc.create("cope", dim=4), causal=True)


def test_tiny_transformer_trains() -> None:
    from posenc.experiments.model import ModelConfig, TinyTransformer

    torch.manual_seed(0)
    model = TinyTransformer(ModelConfig(vocab_size=11, dim=16, num_heads=2, num_layers=2, scheme="cope"))
    tokens = torch.randint(0, 11, (2, 8))
    model(tokens).logsumexp(-1).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", ["cope", "forgetting"])
def test_atlas_asks_data_dependence(name: str) -> None:
    """Data-dependent schemes have no code from positions alone: the atlas draws only their bias for
    random inputs, runs no per-scheme property checks (by the class attribute ``data_dependent``)
    but lists them in the comparison table, and ``encoding_matrix`` says why."""
    from posenc import analysis
    from posenc.report.plan import figures_for
    from posenc.viz.kinds import family_of, kinds_for

    assert posenc.schemes.scheme_class(name).data_dependent
    assert analysis.is_data_dependent(name) and not analysis.is_data_dependent("alibi")
    assert kinds_for(name) == ["bias"] and [s.kind for s in figures_for(name, family_of(name))] == ["bias"]
    assert analysis.run_checks(name) == [] and name in analysis.default_schemes()
    with pytest.raises(ValueError, match="data_dependent"):
        analysis.encoding_matrix(name, 8)


def test_logits_that_do_not_fit_the_queries_are_named() -> None:
    """``logit_term`` needs the logits ``[b, h, sq, sk]`` of these queries: other shapes (or none)
    raise a ValueError naming both shapes, not torch's gather error."""
    enc = posenc.create("cope", dim=8, max_positions=4)
    q = torch.randn(1, 2, 5, 8)
    for logits in (torch.randn(1, 3, 5, 5), torch.randn(1, 2, 4, 5), torch.randn(2, 5, 5), None):
        with pytest.raises(
            ValueError, match=r"logits must be the scaled, masked logits \[b, h, sq, sk\] of the queries"
        ):
            enc.logit_term(q, logits, torch.arange(5), torch.arange(5))


def test_bidirectional_positions_that_do_not_fit_the_logits_are_named() -> None:
    enc = posenc.create("cope", dim=8, max_positions=4, bidirectional=True)
    q, logits = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 5)
    with pytest.raises(ValueError, match=r"distances \(4, 5\) do not fit the logits .* sq = 5 query and sk = 5 key"):
        enc.logit_term(q, logits, torch.arange(4), torch.arange(5))
    with pytest.raises(ValueError, match=r"distances \(3, 5, 5\)"):
        enc.logit_term(q, logits, torch.arange(5).expand(3, 5), torch.arange(5).expand(3, 5))


def test_counts_past_the_table_clip_at_its_last_row() -> None:
    """Counts past ``max_positions - 1`` (the paper's ``npos_max``) are not an error: they clip, as
    the paper's code (``pos.clamp(max=self.npos_max - 1)``) and x-transformers do, so every key
    further than the table reaches gets its last embedding."""
    enc = posenc.create("cope", dim=4, max_positions=3, init_std=1.0)
    q = torch.randn(1, 1, 1, 4)
    logits = torch.full((1, 1, 1, 9), 50.0)  # every gate 1: key j of query 8 counts 9 - j
    term = enc.logit_term(q, logits, torch.tensor([8]), torch.arange(9))
    last = (q @ enc.pos_emb[2]).squeeze()
    torch.testing.assert_close(term[0, 0, 0, :7], last.expand(7))  # counts 9..3 -> row 2
    torch.testing.assert_close(term[0, 0, 0, 8], (q @ enc.pos_emb[1]).squeeze())  # its own key counts 1
