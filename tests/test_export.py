"""``torch.export`` and graph capture of models built on posenc (issue 27, "export and graphs").

A small causal model (embedding, one :class:`posenc.Attention`, output layer) is exported with a
dynamic sequence length (and batch) and must give the eager outputs at lengths other than the one
it was traced at: a scheme that bakes a traced length into a table or a Python branch would give
other numbers (or refuse the length) there. CUDA-graph capture of a decoding step runs where a GPU
is present; on the CPU, the same step compiling to one graph (``fullgraph=True``: no host read of
a tensor, which is also what capture forbids) stands in for it.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import posenc

from .all_schemes import SCHEMES

VOCAB, DIM, HEADS = 50, 24, 3


class Tiny(torch.nn.Module):
    """Token ids ``[b, s]`` (and optional positions ``[b, s]``) -> logits ``[b, s, VOCAB]``."""

    def __init__(self, encoding: str, causal: bool = True) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.attention = posenc.Attention(DIM, HEADS, encoding=encoding, causal=causal)
        self.out = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(ids)  # [b, s, d]
        return self.out(x + self.attention(x, positions))  # [b, s, VOCAB]


def _model(name: str, causal: bool = True) -> Tiny:
    torch.manual_seed(0)
    return Tiny(name, causal).eval()


def _ids(b: int, s: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (b, s), generator=torch.Generator().manual_seed(b * 100 + s))


@pytest.mark.parametrize("name", SCHEMES)
def test_exported_model_equals_eager_at_other_lengths(name):
    """Traced at s = 16, run at s = 3, 16 and 40: the exported program's logits equal eager's
    (2e-6: the same kernels in the same order, bit-identical for all but DPB's MLP)."""
    model = _model(name)
    program = torch.export.export(model, (_ids(2, 16),), dynamic_shapes=({1: Dim("s", min=2, max=64)},))
    for s in (3, 16, 40):
        ids = _ids(2, s)
        with torch.no_grad():
            torch.testing.assert_close(program.module()(ids), model(ids), rtol=0, atol=2e-6)


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "sinusoidal"])
@pytest.mark.parametrize("causal", [True, False])
def test_exported_program_saves_loads_and_takes_positions(name, causal, tmp_path):
    """Dynamic batch and length, explicit positions ``[b, s]`` (a row continuing at 1000, as a
    decoder past its prompt; a row with gaps): the program saved with ``torch.export.save`` and loaded back gives
    the eager logits."""
    model = _model(name, causal)
    positions = torch.arange(8)[None].repeat(2, 1)  # [b, s]
    dims = {0: Dim("b", min=1, max=8), 1: Dim("s", min=2, max=64)}
    program = torch.export.export(model, (_ids(2, 8), positions), dynamic_shapes=(dims, dims))
    torch.export.save(program, tmp_path / "model.pt2")
    loaded = torch.export.load(tmp_path / "model.pt2").module()
    ids = _ids(3, 20)
    # a row at 0, one continuing at 1000, one with gaps (which relative schemes see)
    positions = torch.stack((torch.arange(20), torch.arange(1000, 1020), torch.arange(0, 40, 2)))  # [3, 20]
    with torch.no_grad():
        expected = model(ids, positions)
    torch.testing.assert_close(loaded(ids, positions), expected, rtol=0, atol=2e-6)
    if name != "none":  # the positions reach the result: a program that ignored them would pass otherwise
        assert not torch.allclose(loaded(ids, positions), model(ids, torch.arange(20).repeat(3, 1)), atol=1e-4)


def _decoding_step(name: str, device: str):
    """A layer, a prompt of 32 tokens and ``fresh()``: a new cache holding that prompt."""
    torch.manual_seed(0)
    layer = posenc.Attention(64, 4, encoding=name, causal=True).to(device).eval()
    prompt = torch.randn(2, 32, 64, device=device)

    def fresh() -> posenc.KVCache:
        cache = posenc.KVCache()
        with torch.no_grad():
            layer(prompt, cache=cache)
        return cache

    return layer, fresh


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "sinusoidal"])
def test_decoding_step_compiles_to_one_graph(name):
    """One token decoded against a 32-token cache at an explicit position ``[b, 1]``: the step
    compiles with ``fullgraph=True`` (no graph break, so no host read of a tensor: what CUDA-graph
    capture needs) and gives the eager output."""
    layer, fresh = _decoding_step(name, "cpu")
    x, positions = torch.randn(2, 1, 64), torch.full((2, 1), 32)

    def step(x, positions, cache):
        return layer(x, positions, cache=cache)

    compiled = torch.compile(step, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, positions, fresh()), step(x, positions, fresh()), rtol=0, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "sinusoidal"])
def test_cuda_graph_replays_a_decoding_step(name):
    """Capture one decoding step (new token at position 32 against a 32-token cache) in a CUDA graph;
    replaying it on new inputs copied into the captured tensor gives the eager step's output."""
    layer, fresh = _decoding_step(name, "cuda")
    static_x, positions = torch.randn(2, 1, 64, device="cuda"), torch.full((2, 1), 32, device="cuda")
    side = torch.cuda.Stream()  # warm up on a side stream, as torch's CUDA-graph notes ask
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):
            layer(static_x, positions, cache=fresh())
    torch.cuda.current_stream().wait_stream(side)
    graph, cache = torch.cuda.CUDAGraph(), fresh()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = layer(static_x, positions, cache=cache)
    for seed in range(3):
        x = torch.randn(2, 1, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        static_x.copy_(x)
        graph.replay()
        with torch.no_grad():
            expected = layer(x, positions, cache=fresh())
        torch.testing.assert_close(static_out, expected, rtol=1e-5, atol=1e-5)
