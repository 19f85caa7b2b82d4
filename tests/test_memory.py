"""Quadratic tensors too large for the memory available are refused before they are allocated
(posenc._memory): biases, attention masks and scores, position tables. The error is a
``TooLargeError``, both a ValueError and a MemoryError, naming the tensor's shape, its size in GiB
and the ways around it, instead of the allocator's ``[enforce fail at alloc_cpu.cpp:127] ... you
tried to allocate 137438953472 bytes``.

Most tests fix the available memory at 1 GiB (the check reads it from the system), so that they
behave alike on any machine and never allocate what they ask about.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import _memory as memory
from posenc import functional as F
from posenc._memory import TooLargeError

L = 65536  # 8 heads: a float32 bias [8, L, L] of 128 GiB
GIB = 1 << 30


@pytest.fixture
def one_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: GIB)


def _refused(*fragments: str):
    """pytest.raises for a TooLargeError whose message holds every fragment (literally)."""
    import re

    return pytest.raises(TooLargeError, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


def test_too_large_error_is_a_value_error_and_a_memory_error() -> None:
    assert issubclass(TooLargeError, ValueError) and issubclass(TooLargeError, MemoryError)


def test_check_fits_names_shape_size_and_hint(one_gib: None) -> None:
    with _refused("a bias of shape [8, 65536, 65536] (torch.float32)", "128.0 GiB", "1.0 GiB", "set_mode('always')"):
        memory.check_fits("a bias", (8, L, L), torch.float32, "cpu")
    memory.check_fits("a bias", (8, 1024, 1024), torch.float32, "cpu")  # 32 MiB: fits
    memory.check_fits("a bias", (8, L, L), torch.float32, "meta")  # nothing is allocated on meta


def test_small_tensors_are_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below CHECK_FROM_BYTES the system is not asked at all (the check stays a multiplication)."""

    def fail(device=None):
        raise AssertionError("available_bytes read for a small tensor")

    monkeypatch.setattr(memory, "available_bytes", fail)
    memory.check_fits("a bias", (4, 1000, 1000), torch.float32, "cpu")  # 16 MB


def test_available_bytes_on_the_cpu_falls_back_to_physical_memory_then_a_constant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert memory.available_bytes("cpu") > 0
    monkeypatch.setattr(memory, "_meminfo_available", lambda: None)
    physical = memory._physical_memory()
    assert memory.available_bytes("cpu") == (physical or memory.FALLBACK_BYTES)
    monkeypatch.setattr(memory, "_physical_memory", lambda: None)
    assert memory.available_bytes("cpu") == memory.FALLBACK_BYTES


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_scheme_bias_at_65536_positions(one_gib: None, name: str) -> None:
    """Was a bug: ``create(name, num_heads=8).bias(arange(L), arange(L))`` stopped in the allocator."""
    scheme = posenc.create(name, num_heads=8)
    with _refused("bias of shape [8, 65536, 65536]", "128.0 GiB", "FlexAttention", "shorter", "chunk"):
        scheme.bias(torch.arange(L), torch.arange(L))
    with _refused("[2, 8, 65536, 65536]"):  # batched positions take the reference formula: checked too
        scheme.bias(torch.arange(L).expand(2, L), torch.arange(L).expand(2, L))


def test_functional_alibi_bias_at_65536_positions(one_gib: None) -> None:
    with _refused("ALiBi bias of shape [8, 65536, 65536]", "128.0 GiB"):
        F.alibi_bias(F.alibi_slopes(8), torch.arange(L), torch.arange(L))
    with _refused("bias of shape [8, 65536, 65536]"):
        F.alibi_bias_range(F.alibi_slopes(8), L, L)


def test_attention_with_a_key_mask_or_gradients_at_65536_tokens(one_gib: None) -> None:
    """FlexAttention does not take a key mask, nor (on the CPU) gradients: the materialised path
    refuses the bias, mask or scores it would build."""
    x = torch.zeros(1, L, 32)
    key_mask = torch.ones(1, L, dtype=torch.bool)
    with torch.no_grad():
        alibi = posenc.Attention(32, 8, encoding="alibi", causal=True)
        with _refused("bias of shape [8, 65536, 65536]", "128.0 GiB"):
            alibi(x, key_mask=key_mask)
        plain = posenc.Attention(32, 8, causal=True)  # no bias: the mask alone
        with _refused("attention mask of shape [1, 1, 65536, 65536]", "16.0 GiB", "KVCache"):
            plain(x, key_mask=key_mask)
        shaw = posenc.Attention(32, 8, encoding="shaw", causal=True)
        with _refused("attention mask of shape [1, 1, 65536, 65536]"):
            shaw(x)
    t5 = posenc.Attention(32, 8, encoding="t5", causal=True)  # training: the table needs gradients
    with _refused("bias of shape [8, 65536, 65536]"):
        t5(x)


def test_attention_scores_of_query_terms_are_checked(one_gib: None) -> None:
    """Shaw without a causal mask has no mask to check; its explicit scores are."""
    shaw = posenc.Attention(32, 8, encoding="shaw")
    with torch.no_grad(), _refused("attention scores of shape [1, 8, 65536, 65536]", "128.0 GiB"):
        shaw(torch.zeros(1, L, 32))


def test_lengths_no_machine_holds_are_refused_with_the_real_figure() -> None:
    """Without a fixed figure: 2**40 positions of a width-8 sinusoidal table (64 TiB in float64)
    and ALiBi over 2**20 positions (32 TiB). Was a bug: the allocator's message."""
    with _refused("sinusoidal table of shape [1099511627776, 8]", "GiB", "fewer positions"):
        F.sinusoidal(2**40, 8)
    with _refused("RoPE tables of shape [1099511627776, 8]"):
        F.rope_cos_sin(2**40, F.rope_inv_freq(8)[0])
    with _refused("positions 0..1099511627775"):
        F.as_positions(2**40)
    with _refused("ALiBi bias of shape [8, 1048576, 1048576]"):
        F.alibi_bias(F.alibi_slopes(8), torch.arange(2**20), torch.arange(2**20))
    with pytest.raises(MemoryError):  # caught as what it is, too
        posenc.create("alibi", num_heads=8).bias(2**20, 2**20)


def test_inputs_that_fit_still_run(one_gib: None) -> None:
    """At sizes under the figure nothing changes: the bias is the reference formula's."""
    slopes = F.alibi_slopes(8)
    got = posenc.create("alibi", num_heads=8).bias(torch.arange(2048), torch.arange(2048))  # 128 MiB
    assert torch.equal(got, F.alibi_bias(slopes, torch.arange(2048), torch.arange(2048)))
