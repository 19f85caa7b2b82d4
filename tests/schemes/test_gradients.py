"""Gradients through the schemes: every learned parameter gets one, the rotations' backward and the
learned tables pass gradcheck, second-order gradients and ``torch.func`` transforms agree with
the reference, and a module first run under ``inference_mode`` still trains.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import functional as F
from tests.all_schemes import DIM, HEADS, LEARNED_PARAMETERS, SCHEMES, attention

# -- inference_mode, no_grad, training in one process ------------------------------------------


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


# -- gradients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMES)
def test_gradients_reach_every_learned_parameter(name: str) -> None:
    """One backward pass gives a finite, non-zero gradient to every parameter of the encoding (the
    learned table, T5's bucket table, Shaw's key and value embeddings) and to the input."""
    a = attention(name, causal=name in ("alibi", "fire", "forgetting"))  # fire, forgetting: causal only
    x = torch.randn(2, 6, DIM, requires_grad=True)
    a(x).square().sum().backward()
    names = {n for n, _ in a.encoding.named_parameters()}
    assert names == LEARNED_PARAMETERS[name]
    for n, p in a.encoding.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()) and float(p.grad.abs().sum()) > 0, n
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("rope", {"layout": "half"}),
        ("rope", {"layout": "interleaved"}),
        ("rope", {"rotary_dim": 4}),
        ("xpos", {}),
        ("rope_axial", {}),
    ],
)
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
        attn(xs[i : i + 1]).pow(2).sum().backward()
        for n, p in attn.named_parameters():
            torch.testing.assert_close(per_sample[n][i], p.grad, rtol=1e-9, atol=1e-12)
    dx = torch.func.grad(lambda x: attn(x).pow(2).sum())(xs)
    ref = xs.clone().requires_grad_()
    attn(ref).pow(2).sum().backward()
    torch.testing.assert_close(dx, ref.grad, rtol=1e-9, atol=1e-12)
