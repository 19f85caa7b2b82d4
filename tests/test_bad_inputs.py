"""A table of bad and edge inputs over the public API (issue 29): each row gives either the right
result (its check says which) or a ValueError / TypeError raised by posenc whose message names the
parameter (a regex per row). No internal exception may escape: an IndexError, KeyError,
AttributeError or torch RuntimeError fails its row, and so does an error raised from inside torch
rather than by posenc's own checks.

Rows: functional functions, ``create`` for every scheme, the scheme hooks (``embed``, ``rotate``,
``bias``), ``Attention`` construction and forward, ``KVCache``, ``rope_from_config`` with malformed
configs and rope scaling dicts, and ``posenc.kernels`` / ``posenc.flex``. Sizes that no machine
holds (a bias over 2**20 positions: 4-32 TiB) are refused before anything is allocated
(``posenc._memory.TooLargeError``, a ValueError).
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import posenc
from posenc import flex
from posenc import functional as F
from posenc._memory import TooLargeError
from posenc.functional.sinusoidal import sinusoidal_table
from posenc.kernels import rope as kernel_rope
from posenc.kernels import rope_ as kernel_rope_

NAN, INF = float("nan"), float("inf")
HUGE = 2**20  # a bias [h, HUGE, HUGE] takes h * 4 TiB in float32


@dataclass(frozen=True)
class Row:
    id: str
    call: Callable[[], object]
    error: type[Exception] | None = None  # None: the call must succeed and pass `check`
    match: str = ""  # regex the message must match: it names the parameter
    check: Callable[[object], object] | None = None


def bad(id: str, call: Callable[[], object], error: type[Exception], match: str) -> Row:
    return Row(id, call, error, match)


def good(id: str, call: Callable[[], object], check: Callable[[object], object]) -> Row:
    return Row(id, call, check=check)


def _shape(*shape: int) -> Callable[[object], bool]:
    return lambda out: tuple(out.shape) == shape


def _shapes(*shape: int) -> Callable[[object], bool]:
    return lambda outs: all(tuple(t.shape) == shape for t in outs)


def _warns(call: Callable[[], object], match: str) -> Callable[[], object]:
    def run() -> object:
        with pytest.warns(UserWarning, match=match):
            return call()

    return run


_SCRATCH: list[Path] = []  # the module's scratch folder while its tests run


@pytest.fixture(autouse=True, scope="module")
def _scratch(tmp_path_factory: pytest.TempPathFactory):
    _SCRATCH.append(tmp_path_factory.mktemp("configs"))
    yield
    _SCRATCH.clear()


def _config_file(text: str, *, folder_only: bool = False) -> Path:
    folder = Path(tempfile.mkdtemp(dir=_SCRATCH[0]))
    if folder_only:
        return folder
    path = folder / "config.json"
    path.write_text(text, encoding="utf-8")
    return path


# -- shared inputs --------------------------------------------------------------------------------

INV8 = F.rope_inv_freq(8)[0]  # [4]
COS3, SIN3 = F.rope_cos_sin(3, INV8)  # [3, 8]
SLOPES = F.alibi_slopes(4)  # [4]


def q(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Queries or keys ``[b, h, s, hd]`` (default ``[1, 2, 3, 8]``)."""
    return torch.randn(*(shape or (1, 2, 3, 8)), dtype=dtype)


def x(b: int = 1, s: int = 3, d: int = 16) -> torch.Tensor:
    return torch.randn(b, s, d)


def attn(encoding: str | None = "rope", **kw: object) -> posenc.Attention:
    return posenc.Attention(16, 2, encoding=encoding, causal=True, **kw).eval()


def llama(**fields: object) -> dict:
    return {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, **fields}


def _two_layers_one_cache() -> None:
    a, b, cache = attn(), attn(), posenc.KVCache()
    with torch.no_grad():
        a(x(), cache=cache)
        b(x(), cache=cache)


def _append_twice(first: tuple, second: tuple, seq_dim: int = -1) -> posenc.KVCache:
    cache = posenc.KVCache()
    cache.append(*first, seq_dim=seq_dim)
    cache.append(*second, seq_dim=seq_dim)
    return cache


def _decode_another_batch() -> None:
    a, cache = attn(), posenc.KVCache()
    with torch.no_grad():
        a(x(b=2), cache=cache)
        a(x(b=1, s=1), cache=cache)


def _rope_shift_invariant(out: torch.Tensor) -> bool:
    return torch.allclose(out, _SHIFT_REF, atol=1e-4)


torch.manual_seed(0)
_SHIFT_X = x()
_SHIFT_ATTN = attn("rope")
with torch.no_grad():
    _SHIFT_REF = _SHIFT_ATTN(_SHIFT_X)


def rope() -> posenc.PositionalEncoding:
    return posenc.create("rope", dim=8)


def t5() -> posenc.PositionalEncoding:
    return posenc.create("t5", num_heads=2)


def alibi() -> posenc.PositionalEncoding:
    return posenc.create("alibi", num_heads=4)


def _overlapping_out() -> torch.Tensor:
    buffer = q(1, 2, 4, 8)
    return kernel_rope(buffer[:, :, :3], COS3, SIN3, out=buffer[:, :, 1:])


# -- the table --------------------------------------------------------------------------------------
# One row per line, as a table reads (the formatter would spread each over six lines).
# fmt: off

FUNCTIONAL = [
    # sinusoidal tables
    bad("sinusoidal-odd-dim", lambda: F.sinusoidal(4, 7), ValueError, r"dim must be a positive even number.*got 7"),
    bad("sinusoidal-zero-dim", lambda: F.sinusoidal(4, 0), ValueError, r"dim must be a positive integer, got 0"),
    bad("sinusoidal-str-dim", lambda: F.sinusoidal(4, "8"), TypeError, r"dim must be a positive integer, got '8'"),
    bad("sinusoidal-base-1", lambda: F.sinusoidal(4, 8, base=1.0), ValueError, r"base must be .*greater than 1, got 1"),
    bad("sinusoidal-base-nan", lambda: F.sinusoidal(4, 8, base=NAN), ValueError, r"base must be .*got nan"),
    bad("sinusoidal-base-str", lambda: F.sinusoidal(4, 8, base="1e4"), ValueError, r"base must be .*got '1e4'"),
    bad("sinusoidal-layout", lambda: F.sinusoidal(4, 8, layout="paired"), ValueError, r"unknown layout 'paired'"),
    bad("sinusoidal-frequencies", lambda: F.sinusoidal(4, 8, frequencies="t2t"), ValueError, r"frequencies 't2t'"),
    bad("sinusoidal-int-dtype", lambda: F.sinusoidal(4, 8, dtype=torch.int64), TypeError, r"dtype must be a floating"),
    bad("sinusoidal-str-dtype", lambda: F.sinusoidal(4, 8, dtype="float32"), TypeError, r"dtype must be a floating"),
    bad("sinusoidal-nan-position", lambda: F.sinusoidal(torch.tensor([0.0, NAN]), 8), ValueError, r"positions must be finite.*nan"),
    bad("sinusoidal-inf-position", lambda: F.sinusoidal(torch.tensor([INF]), 8), ValueError, r"positions must be finite.*inf"),
    bad("sinusoidal-negative-length", lambda: F.sinusoidal(-1, 8), ValueError, r"positions as an int is a length.*got -1"),
    bad("sinusoidal-float-length", lambda: F.sinusoidal(2.5, 8), TypeError, r"positions must be an int \(a length\) or a tensor"),
    bad("sinusoidal-bool-length", lambda: F.sinusoidal(True, 8), TypeError, r"positions must be an int or a tensor, got True"),
    bad("sinusoidal-bool-positions", lambda: F.sinusoidal(torch.tensor([True]), 8), TypeError, r"positions must be integer or real.*bool"),
    bad("sinusoidal-bf16-positions", lambda: F.sinusoidal(torch.ones(2, dtype=torch.bfloat16), 8), TypeError, r"positions of dtype torch.bfloat16"),
    bad("sinusoidal-complex-positions", lambda: F.sinusoidal(torch.ones(2, dtype=torch.complex64), 8), TypeError, r"positions must be integer or real.*complex64"),
    bad("sinusoidal-str-positions", lambda: F.sinusoidal("abc", 8), TypeError, r"positions must be an int or a tensor, got str"),
    bad("sinusoidal-ragged-positions", lambda: F.sinusoidal([[0], [1, 2]], 8), TypeError, r"positions must be an int or a tensor, got list"),
    bad("sinusoidal-huge-length", lambda: F.sinusoidal(2**40, 8), TooLargeError, r"sinusoidal table of shape \[1099511627776, 8\].*GiB"),
    bad("sinusoidal_inv_freq-odd", lambda: F.sinusoidal_inv_freq(7), ValueError, r"dim must be a positive even number"),
    bad("sinusoidal_table-inv-freq-list", lambda: sinusoidal_table(4, [1.0]), TypeError, r"inv_freq must be a 1-D tensor"),
    good("sinusoidal-empty-positions", lambda: F.sinusoidal(torch.empty(0), 8), _shape(0, 8)),
    good("sinusoidal-zero-length", lambda: F.sinusoidal(0, 8), _shape(0, 8)),
    good("sinusoidal-position-1e15", lambda: F.sinusoidal(torch.tensor([1e15]), 8), lambda t: bool(t.isfinite().all() and t.abs().max() <= 1)),
    good("sinusoidal-position-2**62", lambda: F.sinusoidal(torch.tensor([2**62]), 8), lambda t: bool(t.isfinite().all())),
    good("sinusoidal-meta-positions", lambda: F.sinusoidal(torch.arange(3, device="meta"), 8), lambda t: t.is_meta and t.shape == (3, 8)),
    # RoPE frequencies and scalings
    bad("rope_inv_freq-zero-dim", lambda: F.rope_inv_freq(0), ValueError, r"dim must be a positive integer, got 0"),
    bad("rope_inv_freq-bool-dim", lambda: F.rope_inv_freq(True), TypeError, r"dim must be a positive integer, got True"),
    bad("rope_inv_freq-base-below-1", lambda: F.rope_inv_freq(8, base=0.5), ValueError, r"base must be .*got 0.5"),
    bad("rope_inv_freq-base-inf", lambda: F.rope_inv_freq(8, base=INF), ValueError, r"base must be .*got inf"),
    bad("rope_inv_freq-unknown-scaling", lambda: F.rope_inv_freq(8, scaling="ntk-by-parts"), ValueError, r"unknown rope scaling type 'ntk-by-parts'"),
    bad("rope_inv_freq-scaling-list", lambda: F.rope_inv_freq(8, scaling=["linear"]), TypeError, r"scaling must be None, a rope_type name or a rope_scaling dict, got list"),
    bad("rope_inv_freq-scaling-type-int", lambda: F.rope_inv_freq(8, scaling={"rope_type": 5}), TypeError, r"rope_type must be a name such as 'yarn', got 5"),
    bad("rope_inv_freq-linear-no-factor", lambda: F.rope_inv_freq(8, scaling={"rope_type": "linear"}), ValueError, r"'linear' needs \['factor'\]"),
    bad("rope_inv_freq-linear-zero-factor", lambda: F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": 0}), ValueError, r"'factor' must be a positive number, got 0"),
    bad("rope_inv_freq-linear-str-factor", lambda: F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": "4"}), ValueError, r"'factor' must be a positive number, got '4'"),
    bad("rope_inv_freq-linear-nan-factor", lambda: F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": NAN}), ValueError, r"'factor' must be a positive number, got nan"),
    bad("rope_inv_freq-unknown-key", lambda: F.rope_inv_freq(8, scaling={"rope_type": "linear", "factor": 2, "alpha": 1}), ValueError, r"'linear' does not take \['alpha'\]"),
    bad("rope_inv_freq-yarn-beta-order", lambda: F.rope_inv_freq(8, scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048, "beta_fast": 1, "beta_slow": 32}), ValueError, r"'beta_fast' must be greater than 'beta_slow'"),
    bad("rope_inv_freq-llama3-order", lambda: F.rope_inv_freq(8, scaling={"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192, "low_freq_factor": 4, "high_freq_factor": 1}), ValueError, r"'high_freq_factor' must be greater than 'low_freq_factor'"),
    bad("rope_inv_freq-longrope-lengths", lambda: F.rope_inv_freq(8, scaling={"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 3, "original_max_position_embeddings": 4096}), ValueError, r"'short_factor' and 'long_factor' must have the same length"),
    bad("rope_inv_freq-longrope-pairs", lambda: F.rope_inv_freq(8, scaling={"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 3, "original_max_position_embeddings": 4096}), ValueError, r"short_factor"),
    bad("rope_inv_freq-longrope-factor-str", lambda: F.rope_inv_freq(8, scaling={"rope_type": "longrope", "short_factor": "1", "long_factor": [1.0] * 4, "original_max_position_embeddings": 4096}), ValueError, r"'short_factor' must be a non-empty list"),
    bad("rope_inv_freq-rope-theta-mismatch", lambda: F.rope_inv_freq(8, scaling={"rope_type": "default", "rope_theta": 5e5}), ValueError, r"rope_theta=500000.0, but base=10000"),
    bad("rope_inv_freq-partial-factor-2", lambda: F.rope_inv_freq(8, scaling={"rope_type": "default", "partial_rotary_factor": 2}), ValueError, r"partial_rotary_factor must be a number in \(0, 1\], got 2"),
    bad("rope_inv_freq-seq-len-0", lambda: F.rope_inv_freq(8, seq_len=0), ValueError, r"seq_len must be a positive integer, got 0"),
    bad("rope_inv_freq-seq-len-float", lambda: F.rope_inv_freq(8, seq_len=1.5), TypeError, r"seq_len must be a positive integer, got 1.5"),
    bad("rope_inv_freq-dynamic-width-2", lambda: F.rope_inv_freq(2, scaling={"rope_type": "dynamic", "factor": 2}), ValueError, r"'dynamic'.*rotated width of at least 4, got 2"),
    bad("rope_inv_freq-dynamic-no-original", lambda: F.rope_inv_freq(8, scaling={"rope_type": "dynamic", "factor": 2}, seq_len=10), ValueError, r"needs 'original_max_position_embeddings'"),
    # RoPE tables and rotation
    bad("rope_cos_sin-inv-freq-list", lambda: F.rope_cos_sin(4, [1.0, 0.1]), TypeError, r"inv_freq must be a 1-D tensor.*got list"),
    bad("rope_cos_sin-inv-freq-2d", lambda: F.rope_cos_sin(4, INV8[None]), TypeError, r"inv_freq must be a 1-D tensor.*shape \(1, 4\)"),
    bad("rope_cos_sin-layout", lambda: F.rope_cos_sin(4, INV8, layout="pairs"), ValueError, r"unknown layout 'pairs'"),
    bad("rope_cos_sin-nan-position", lambda: F.rope_cos_sin(torch.tensor([NAN]), INV8), ValueError, r"positions must be finite"),
    bad("rope_cos_sin-int-dtype", lambda: F.rope_cos_sin(4, INV8, dtype=torch.int32), TypeError, r"dtype must be a floating"),
    bad("rope_cos_sin-attention-scale-str", lambda: F.rope_cos_sin(4, INV8, attention_scale="2"), TypeError, r"attention_scale must be a finite number, got '2'"),
    bad("rope_cos_sin-attention-scale-nan", lambda: F.rope_cos_sin(4, INV8, attention_scale=NAN), ValueError, r"attention_scale must be a positive finite number, got nan"),
    bad("rope_cos_sin-huge-length", lambda: F.rope_cos_sin(2**40, INV8), TooLargeError, r"RoPE tables of shape \[1099511627776, 8\]"),
    good("rope_cos_sin-empty", lambda: F.rope_cos_sin(torch.empty(0, dtype=torch.long), INV8), _shapes(0, 8)),
    good("rope_cos_sin-position-1e8", lambda: F.rope_cos_sin(torch.tensor([10**8]), INV8), lambda cs: torch.allclose(cs[0] ** 2 + cs[1] ** 2, torch.ones(1, 8))),
    bad("apply_rope-int-x", lambda: F.apply_rope(q().long(), COS3, SIN3), TypeError, r"x must be a floating-point tensor, got dtype torch.int64"),
    bad("apply_rope-list-x", lambda: F.apply_rope([[1.0]], COS3, SIN3), TypeError, r"x must be a floating-point tensor, got list"),
    bad("apply_rope-cos-list", lambda: F.apply_rope(q(), [1.0], SIN3), TypeError, r"cos and sin must be tensors"),
    bad("apply_rope-shape-mismatch", lambda: F.apply_rope(q(), COS3, SIN3[:2]), ValueError, r"cos and sin must have the same shape"),
    bad("apply_rope-odd-width", lambda: F.apply_rope(q(), COS3[:, :3], SIN3[:, :3]), ValueError, r"rotated width cos.shape\[-1\] must be a positive even number, got 3"),
    bad("apply_rope-too-wide", lambda: F.apply_rope(q(1, 2, 3, 4), COS3, SIN3), ValueError, r"cos/sin rotate 8 features but x has only 4"),
    bad("apply_rope-no-broadcast", lambda: F.apply_rope(q(), COS3[:2], SIN3[:2]), ValueError, r"cos/sin of shape \(2, 8\) do not broadcast"),
    bad("apply_rope-layout", lambda: F.apply_rope(q(), COS3, SIN3, layout="x"), ValueError, r"unknown layout 'x'"),
    bad("apply_rope-meta-x", lambda: F.apply_rope(q().to("meta"), COS3, SIN3), ValueError, r"cos and sin \(on cpu, cpu\) must be on x's device, meta"),
    good("apply_rope-empty", lambda: F.apply_rope(q(1, 2, 0, 8), *F.rope_cos_sin(0, INV8)), _shape(1, 2, 0, 8)),
    # relative positions, ALiBi, T5 buckets, Shaw's index
    bad("alibi_slopes-zero", lambda: F.alibi_slopes(0), ValueError, r"num_heads must be a positive integer, got 0"),
    bad("alibi_slopes-float", lambda: F.alibi_slopes(2.5), TypeError, r"num_heads must be a positive integer, got 2.5"),
    bad("alibi_slopes-max-bias-0", lambda: F.alibi_slopes(4, max_bias=0), ValueError, r"max_bias must be a positive finite number, got 0"),
    bad("alibi_slopes-max-bias-nan", lambda: F.alibi_slopes(4, max_bias=NAN), ValueError, r"max_bias must be .*got nan"),
    bad("alibi_slopes-max-bias-str", lambda: F.alibi_slopes(4, max_bias="8"), TypeError, r"max_bias must be a finite number, got '8'"),
    bad("alibi_bias-slopes-list", lambda: F.alibi_bias([0.5], torch.arange(3), torch.arange(3)), ValueError, r"slopes must be a 1-D tensor \[h\], got list"),
    bad("alibi_bias-slopes-2d", lambda: F.alibi_bias(SLOPES[None], torch.arange(3), torch.arange(3)), ValueError, r"slopes must be a 1-D tensor \[h\], got \(1, 4\)"),
    bad("alibi_bias-0d-positions", lambda: F.alibi_bias(SLOPES, torch.tensor(3), torch.arange(3)), ValueError, r"query positions must be \[s\] or \[b, s\], got a 0-d tensor"),
    bad("alibi_bias-batch-mismatch", lambda: F.alibi_bias(SLOPES, torch.zeros(2, 3), torch.zeros(3, 3)), ValueError, r"must have matching leading \(batch\) dims"),
    bad("alibi_bias-nan-position", lambda: F.alibi_bias(SLOPES, torch.tensor([NAN]), torch.arange(3)), ValueError, r"positions must be finite"),
    bad("alibi_bias-inf-position", lambda: F.alibi_bias(SLOPES, torch.arange(3), torch.tensor([0.0, INF])), ValueError, r"positions must be finite.*inf"),
    bad("alibi_bias-bool-positions", lambda: F.alibi_bias(SLOPES, torch.ones(2, dtype=torch.bool), torch.arange(2)), TypeError, r"positions must be integer or real.*bool"),
    bad("alibi_bias-two-devices", lambda: F.alibi_bias(SLOPES, torch.arange(3), torch.arange(3, device="meta")), ValueError, r"query positions \(on cpu\) and key positions \(on meta\) must be on one device"),
    bad("alibi_bias-huge", lambda: F.alibi_bias(SLOPES, torch.arange(HUGE), torch.arange(HUGE)), TooLargeError, r"ALiBi bias of shape \[4, 1048576, 1048576\].*GiB.*set_mode\('always'\)"),
    good("alibi_bias-empty", lambda: F.alibi_bias(SLOPES, torch.arange(0), torch.arange(3)), _shape(4, 0, 3)),
    good("alibi_bias-huge-positions", lambda: F.alibi_bias(SLOPES, torch.tensor([2**40]), torch.tensor([2**40 - 3])), lambda t: torch.equal(t[:, 0, 0], -3 * SLOPES)),
    good("alibi_bias-list-positions", lambda: F.alibi_bias(SLOPES, [0, 1], [0, 1]), _shape(4, 2, 2)),
    good("alibi_bias-meta", lambda: F.alibi_bias(SLOPES.to("meta"), torch.arange(3, device="meta"), torch.arange(3, device="meta")), lambda t: t.is_meta and t.shape == (4, 3, 3)),
    bad("relative_positions-0d", lambda: F.relative_positions(torch.tensor(1), torch.arange(2)), ValueError, r"query positions must be \[s\] or \[b, s\], got a 0-d tensor"),
    bad("relative_positions-0d-meta", lambda: F.relative_positions(torch.tensor(1, device="meta"), torch.arange(2, device="meta")), ValueError, r"query positions must be \[s\] or \[b, s\], got a 0-d tensor"),
    bad("relative_positions-complex", lambda: F.relative_positions(torch.ones(2, dtype=torch.complex64), torch.arange(2)), TypeError, r"positions must be integer or real"),
    good("relative_positions-uint8", lambda: F.relative_positions(torch.tensor([5], dtype=torch.uint8), torch.tensor([3], dtype=torch.uint8)), lambda t: t.item() == -2),
    bad("t5_bucket-num-buckets-3", lambda: F.t5_relative_bucket(torch.arange(3), num_buckets=3), ValueError, r"num_buckets must be at least 4 when bidirectional=True, got 3"),
    bad("t5_bucket-max-distance-0", lambda: F.t5_relative_bucket(torch.arange(3), max_distance=0), ValueError, r"max_distance must be a positive integer, got 0"),
    bad("t5_bucket-max-distance-small", lambda: F.t5_relative_bucket(torch.arange(3), max_distance=8), ValueError, r"max_distance must exceed the 8 exact buckets"),
    bad("t5_bucket-float-position", lambda: F.t5_relative_bucket(torch.tensor([0.5])), TypeError, r"t5_relative_bucket needs integer positions, got a float position 0.5"),
    bad("t5_bucket-nan", lambda: F.t5_relative_bucket(torch.tensor([NAN])), ValueError, r"positions must be finite"),
    bad("t5_bucket-bool", lambda: F.t5_relative_bucket(torch.tensor([True])), TypeError, r"t5_relative_bucket needs integer positions, got a tensor of dtype torch.bool"),
    good("t5_bucket-huge-distances", lambda: F.t5_relative_bucket(torch.tensor([-(2**62), 2**62])), lambda t: t.tolist() == [15, 31]),
    good("t5_bucket-list", lambda: F.t5_relative_bucket([0, -1, 5]), lambda t: t.dtype == torch.int64 and t.tolist() == [0, 1, 21]),
    bad("clipped_index-K-0", lambda: F.clipped_relative_index(torch.arange(2), torch.arange(2), 0), ValueError, r"max_relative_position must be a positive integer, got 0"),
    bad("clipped_index-K-triple", lambda: F.clipped_relative_index(torch.arange(2), torch.arange(2), (1, 2, 3)), ValueError, r"max_relative_position must be K or a pair"),
    bad("clipped_index-K-str", lambda: F.clipped_relative_index(torch.arange(2), torch.arange(2), "4"), TypeError, r"max_relative_position must be a positive integer, got '4'"),
    bad("clipped_index-float-position", lambda: F.clipped_relative_index(torch.tensor([0.5]), torch.arange(2), 2), TypeError, r"shaw relative positions needs integer positions"),
    # Toeplitz builds
    bad("toeplitz-values-list", lambda: F.toeplitz([[1.0]], 1, 1), ValueError, r"values must be \[h, sq \+ sk - 1\] = \[h, 1\], a tensor.*got list"),
    bad("toeplitz-width", lambda: F.toeplitz(torch.ones(1, 3), 2, 3), ValueError, r"values must be \[h, sq \+ sk - 1\] = \[h, 4\]"),
    bad("toeplitz-negative-length", lambda: F.toeplitz(torch.ones(1, 3), -1, 3), ValueError, r"sq and sk must be non-negative integers, got sq=-1"),
    bad("toeplitz-out-shape", lambda: F.toeplitz(torch.ones(1, 4), 2, 3, out=torch.empty(1, 3, 2)), ValueError, r"out must be \[1, 2, 3\]"),
    bad("toeplitz-out-list", lambda: F.toeplitz(torch.ones(1, 4), 2, 3, out=[0.0]), ValueError, r"out must be \[1, 2, 3\].*got list"),
    bad("relative_range-str", lambda: F.relative_range("3", 4), ValueError, r"sq and sk must be non-negative integers, got sq='3'"),
    bad("alibi_bias_range-slopes-list", lambda: F.alibi_bias_range([0.5], 3, 3), ValueError, r"slopes must be a 1-D tensor"),
    bad("alibi_bias_range-huge", lambda: F.alibi_bias_range(SLOPES, HUGE, HUGE), TooLargeError, r"bias of shape \[4, 1048576, 1048576\]"),
    bad("t5_bias_range-weight-1d", lambda: F.t5_bias_range(torch.randn(32), 3, 3), ValueError, r"weight must be the table \[num_buckets, h\]"),
    bad("t5_bias_range-few-rows", lambda: F.t5_bias_range(torch.randn(8, 2), 3, 3), ValueError, r"weight must be the table \[num_buckets, h\] with num_buckets=32 rows, got \(8, 2\)"),
    # coordinates and N-D encodings
    bad("grid_positions-none", lambda: F.grid_positions(), ValueError, r"grid_positions needs at least one axis size"),
    bad("grid_positions-zero", lambda: F.grid_positions(3, 0), ValueError, r"sizes\[1\] must be a positive integer, got 0"),
    bad("grid_positions-float", lambda: F.grid_positions(2.5), TypeError, r"sizes\[0\] must be a positive integer, got 2.5"),
    bad("as_coordinates-n-axes-0", lambda: F.as_coordinates(torch.arange(3), 0), ValueError, r"n_axes must be a positive integer, got 0"),
    bad("as_coordinates-length", lambda: F.as_coordinates(torch.arange(3), 2, length=4), ValueError, r"with s=4; got shape \(3,\)"),
    bad("sinusoidal_nd-0d-coords", lambda: F.sinusoidal_nd(torch.tensor(1), 8), ValueError, r"coordinates must be a tensor \[\*p, n_axes\]"),
    bad("sinusoidal_nd-dim-0", lambda: F.sinusoidal_nd(F.grid_positions(2, 2), 0), ValueError, r"dim must be a positive integer, got 0"),
    bad("sinusoidal_nd-int-dtype", lambda: F.sinusoidal_nd(F.grid_positions(2, 2), 8, dtype=torch.int64), TypeError, r"dtype must be a floating"),
    bad("axial_inv_freq-dim-6", lambda: F.axial_rope_inv_freq(6), ValueError, r"dim must be a multiple of 2 \* n_axes = 4, got dim=6"),
    bad("axial_inv_freq-frequencies", lambda: F.axial_rope_inv_freq(8, frequencies="lang"), ValueError, r"unknown frequencies 'lang'"),
    bad("axial_inv_freq-base", lambda: F.axial_rope_inv_freq(8, base=1), ValueError, r"base must be a finite number greater than 1"),
    bad("axial_inv_freq-max-freq", lambda: F.axial_rope_inv_freq(8, frequencies="pixel", max_freq=-1), ValueError, r"max_freq must be a finite positive number, got -1"),
    bad("axial_cos_sin-inv-freq-1d", lambda: F.axial_rope_cos_sin(F.grid_positions(2, 2), INV8), TypeError, r"inv_freq must be a 2-D tensor"),
    bad("axial_cos_sin-wrong-axes", lambda: F.axial_rope_cos_sin(torch.zeros(3, 3), F.axial_rope_inv_freq(8)), ValueError, r"coordinates must have 2 axes in their last dim"),
    # random positions, layouts, as_positions
    bad("randomized-seq-len-over-max", lambda: F.randomized_positions(1, 5, 4), ValueError, r"max_position must be at least seq_len=5"),
    bad("randomized-batch-negative", lambda: F.randomized_positions(-1, 2, 4), ValueError, r"batch must be a non-negative integer, got -1"),
    bad("randomized-batch-float", lambda: F.randomized_positions(1.5, 2, 4), TypeError, r"batch must be a non-negative integer, got 1.5"),
    bad("randomized-generator", lambda: F.randomized_positions(1, 2, 4, generator=5), TypeError, r"generator must be a torch.Generator or None, got int"),
    bad("randomized-huge", lambda: F.randomized_positions(HUGE, 4, 2**31 - 1), TooLargeError, r"random keys of randomized_positions of shape \[1048576, 2147483647\].*smaller max_position"),
    bad("permute-weight-list", lambda: F.permute_qk_weight([1.0], 1, source="half", target="interleaved"), TypeError, r"weight must be a 1-D \(bias\) or 2-D \(weight\) tensor"),
    bad("permute-rows", lambda: F.permute_qk_weight(torch.randn(30, 4), 4, source="half", target="interleaved"), ValueError, r"weight has 30 output rows, not a multiple of num_heads=4"),
    bad("permute-source", lambda: F.permute_qk_weight(torch.randn(32, 4), 4, source="x", target="half"), ValueError, r"unknown source 'x'"),
    bad("permutation-odd-head", lambda: F.rope_layout_permutation(7, source="half", target="interleaved"), ValueError, r"head_dim must be a positive even number"),
    bad("permutation-rotary-wide", lambda: F.rope_layout_permutation(8, source="half", target="interleaved", rotary_dim=16), ValueError, r"rotary_dim must be at most head_dim=8, got 16"),
    bad("as_positions-float", lambda: F.as_positions(2.5), TypeError, r"positions must be an int \(a length\) or a tensor, got the float 2.5"),
    bad("as_positions-negative", lambda: F.as_positions(-3), ValueError, r"positions as an int is a length and must be >= 0, got -3"),
    bad("as_positions-meta-to-cpu", lambda: F.as_positions(torch.arange(3, device="meta"), device="cpu"), ValueError, r"positions .* are on the meta device"),
    bad("as_positions-huge-length", lambda: F.as_positions(2**40), TooLargeError, r"positions 0..1099511627775 of shape \[1099511627776\]"),
]

CREATE = [
    bad("create-unknown-name", lambda: posenc.create("rotary"), ValueError, r"unknown positional encoding 'rotary'; choose one of: .*rope"),
    bad("create-int-name", lambda: posenc.create(5), ValueError, r"unknown positional encoding 5"),
    bad("create-none-name", lambda: posenc.create(None), ValueError, r"unknown positional encoding None"),
    bad("create-missing-dim", lambda: posenc.create("rope"), ValueError, r"scheme 'rope' needs \['dim'\]; it accepts: dim, base"),
    bad("create-unknown-key", lambda: posenc.create("rope", dim=8, theta=1e4), ValueError, r"scheme 'rope' does not take \['theta'\]; it accepts: dim, base"),
    bad("create-none-unknown-key", lambda: posenc.create("none", base=4), ValueError, r"scheme 'none' does not take \['base'\]; it accepts: dim"),
    bad("create-none-dim-0", lambda: posenc.create("none", dim=0), ValueError, r"dim must be a positive integer, got 0"),
    bad("sinusoidal-create-odd-dim", lambda: posenc.create("sinusoidal", dim=7), ValueError, r"dim must be a positive even number"),
    bad("sinusoidal-create-base-0", lambda: posenc.create("sinusoidal", dim=8, base=0), ValueError, r"base must be a finite number greater than 1, got 0"),
    bad("sinusoidal-create-layout", lambda: posenc.create("sinusoidal", dim=8, layout="x"), ValueError, r"unknown layout 'x'"),
    bad("sinusoidal-create-frequencies", lambda: posenc.create("sinusoidal", dim=8, frequencies="x"), ValueError, r"unknown frequencies 'x'"),
    bad("sinusoidal-create-combine", lambda: posenc.create("sinusoidal", dim=8, combine="mul"), ValueError, r"unknown combine 'mul'"),
    bad("sinusoidal-create-learned-scale", lambda: posenc.create("sinusoidal", dim=8, learned_scale="no"), TypeError, r"learned_scale must be True or False, got 'no'"),
    bad("learned-create-dim-0", lambda: posenc.create("learned", dim=0), ValueError, r"dim must be a positive integer, got 0"),
    bad("learned-create-max-len-0", lambda: posenc.create("learned", dim=8, max_len=0), ValueError, r"max_len must be a positive integer, got 0"),
    bad("learned-create-max-len-huge", lambda: posenc.create("learned", dim=8, max_len=2**40), ValueError, r"max_len must be at most 2\*\*31 - 1"),
    bad("learned-create-combine", lambda: posenc.create("learned", dim=8, combine="sum"), ValueError, r"unknown combine 'sum'"),
    bad("learned-create-init-std", lambda: posenc.create("learned", dim=8, init_std=-1), ValueError, r"init_std must be a finite number >= 0, got -1"),
    bad("learned-create-init-std-str", lambda: posenc.create("learned", dim=8, init_std="0.02"), TypeError, r"init_std must be a finite number, got '0.02'"),
    bad("shaw-create-dim-0", lambda: posenc.create("shaw", dim=0), ValueError, r"dim must be a positive integer, got 0"),
    bad("shaw-create-K-0", lambda: posenc.create("shaw", dim=8, max_relative_position=0), ValueError, r"max_relative_position must be a positive integer, got 0"),
    bad("shaw-create-K-triple", lambda: posenc.create("shaw", dim=8, max_relative_position=(1, 2, 3)), ValueError, r"max_relative_position must be K or a pair"),
    bad("shaw-create-values", lambda: posenc.create("shaw", dim=8, values="yes"), TypeError, r"values must be True or False, got 'yes'"),
    bad("shaw-create-init-std-nan", lambda: posenc.create("shaw", dim=8, init_std=NAN), ValueError, r"init_std must be a finite number >= 0, got nan"),
    bad("t5-create-heads-0", lambda: posenc.create("t5", num_heads=0), ValueError, r"num_heads must be a positive integer, got 0"),
    bad("t5-create-buckets-2", lambda: posenc.create("t5", num_heads=2, num_buckets=2), ValueError, r"num_buckets must be at least 4 when bidirectional=True, got 2"),
    bad("t5-create-max-distance", lambda: posenc.create("t5", num_heads=2, max_distance=4), ValueError, r"max_distance must exceed the 8 exact buckets"),
    bad("t5-create-bidirectional", lambda: posenc.create("t5", num_heads=2, bidirectional="no"), TypeError, r"bidirectional must be True or False, got 'no'"),
    bad("t5-create-init-std", lambda: posenc.create("t5", num_heads=2, init_std=-0.1), ValueError, r"init_std must be a finite number >= 0"),
    bad("alibi-create-heads-0", lambda: posenc.create("alibi", num_heads=0), ValueError, r"num_heads must be a positive integer, got 0"),
    bad("alibi-create-heads-float", lambda: posenc.create("alibi", num_heads=2.5), TypeError, r"num_heads must be a positive integer, got 2.5"),
    bad("alibi-create-max-bias", lambda: posenc.create("alibi", num_heads=2, max_bias=0), ValueError, r"max_bias must be a positive finite number, got 0"),
    bad("alibi-create-bidirectional", lambda: posenc.create("alibi", num_heads=2, bidirectional=1), TypeError, r"bidirectional must be True or False, got 1"),
    bad("rope-create-odd-dim", lambda: posenc.create("rope", dim=7), ValueError, r"dim must be a positive even number.*got 7"),
    bad("rope-create-base-1", lambda: posenc.create("rope", dim=8, base=1), ValueError, r"base must be a finite number greater than 1, got 1"),
    bad("rope-create-layout", lambda: posenc.create("rope", dim=8, layout="x"), ValueError, r"unknown layout 'x'"),
    bad("rope-create-scaling-type", lambda: posenc.create("rope", dim=8, scaling={"rope_type": "bogus"}), ValueError, r"unknown rope scaling type 'bogus'"),
    bad("rope-create-scaling-no-factor", lambda: posenc.create("rope", dim=8, scaling={"rope_type": "linear"}), ValueError, r"'linear' needs \['factor'\]"),
    bad("rope-create-dynamic-no-original", lambda: posenc.create("rope", dim=8, scaling={"rope_type": "dynamic", "factor": 2}), ValueError, r"'dynamic' needs 'original_max_position_embeddings'"),
    bad("rope-create-rotary-dim-wide", lambda: posenc.create("rope", dim=8, rotary_dim=32), ValueError, r"rotary_dim must be at most dim=8.*got 32"),
    bad("rope-create-rotary-dim-0", lambda: posenc.create("rope", dim=8, rotary_dim=0), ValueError, r"rotary_dim must be a positive integer, got 0"),
    bad("rope-create-partial-factor-mismatch", lambda: posenc.create("rope", dim=8, rotary_dim=4, scaling={"rope_type": "default", "partial_rotary_factor": 1.0}), ValueError, r"partial_rotary_factor=1.0.*rotary_dim is 4"),
    bad("rope-create-proportional-rotary-dim", lambda: posenc.create("rope", dim=8, rotary_dim=4, scaling={"rope_type": "proportional"}), ValueError, r"'proportional' spans the whole head.*rotary_dim=4"),
    bad("xpos-create-odd-dim", lambda: posenc.create("xpos", dim=7), ValueError, r"dim must be a positive even number"),
    bad("xpos-create-scale-base", lambda: posenc.create("xpos", dim=8, scale_base=0), ValueError, r"scale_base must be a positive finite number, got 0"),
    bad("xpos-create-gamma", lambda: posenc.create("xpos", dim=8, gamma=-1), ValueError, r"gamma must be a positive finite number, got -1"),
    bad("xpos-create-center-nan", lambda: posenc.create("xpos", dim=8, center=NAN), ValueError, r"center must be a finite number, got nan"),
    bad("xpos-create-rotary-dim", lambda: posenc.create("xpos", dim=8, rotary_dim=16), ValueError, r"rotary_dim must be at most dim=8, got 16"),
    bad("sinusoidal_nd-create-dim-0", lambda: posenc.create("sinusoidal_nd", dim=0), ValueError, r"dim must be a positive integer, got 0"),
    bad("sinusoidal_nd-create-n-axes-0", lambda: posenc.create("sinusoidal_nd", dim=8, n_axes=0), ValueError, r"n_axes must be a positive integer, got 0"),
    bad("sinusoidal_nd-create-base", lambda: posenc.create("sinusoidal_nd", dim=8, base=1), ValueError, r"base must be a finite number greater than 1"),
    bad("rope_axial-create-dim-6", lambda: posenc.create("rope_axial", dim=6), ValueError, r"dim must be a multiple of 2 \* n_axes = 4, got dim=6"),
    bad("rope_axial-create-rotary-dim-6", lambda: posenc.create("rope_axial", dim=16, rotary_dim=6), ValueError, r"rotary_dim must be a multiple of 2 \* n_axes = 4, got rotary_dim=6"),
    bad("rope_axial-create-rotary-dim-wide", lambda: posenc.create("rope_axial", dim=16, rotary_dim=20), ValueError, r"rotary_dim must be at most dim=16, got 20"),
    bad("rope_axial-create-n-axes-0", lambda: posenc.create("rope_axial", dim=16, n_axes=0), ValueError, r"n_axes must be a positive integer, got 0"),
    bad("rope_axial-create-frequencies", lambda: posenc.create("rope_axial", dim=16, frequencies="lang"), ValueError, r"unknown frequencies 'lang'"),
    bad("rope_axial-create-max-freq", lambda: posenc.create("rope_axial", dim=16, frequencies="pixel", max_freq=-1), ValueError, r"max_freq must be a finite positive number"),
    bad("rope_axial-create-layout", lambda: posenc.create("rope_axial", dim=16, layout="x"), ValueError, r"unknown layout 'x'"),
]


HOOKS = [
    bad("rope.rotate-int-q", lambda: rope().rotate(q().long(), q()), TypeError, r"rope: queries and keys must be floating-point tensors, got dtype torch.int64"),
    bad("rope.rotate-width", lambda: rope().rotate(q(1, 2, 3, 4), q(1, 2, 3, 4)), ValueError, r"rope was built for heads of width dim=8"),
    bad("rope.rotate-list", lambda: rope().rotate([1.0], q()), TypeError, r"rope: queries and keys must be tensors"),
    bad("rope.rotate-0d-q", lambda: rope().rotate(torch.tensor(1.0), q()), ValueError, r"rope was built for heads of width dim=8"),
    bad("rope.rotate-positions-length", lambda: rope().rotate(q(), q(), torch.arange(4), torch.arange(4)), ValueError, r"key positions of shape \(4,\) do not fit keys"),
    bad("rope.rotate-nan-positions", lambda: rope().rotate(q(), q(), torch.tensor([0.0, NAN, 2.0]), torch.arange(3)), ValueError, r"positions must be finite"),
    bad("rope.rotate-bool-positions", lambda: rope().rotate(q(), q(), torch.ones(3, dtype=torch.bool), torch.arange(3)), TypeError, r"positions must be integer or real"),
    bad("rope.rotate-meta-positions", lambda: rope().rotate(q(), q(), torch.arange(3, device="meta"), torch.arange(3)), ValueError, r"on the meta device"),
    good("rope.rotate-empty", lambda: rope().rotate(q(1, 2, 0, 8), q(1, 2, 0, 8)), _shapes(1, 2, 0, 8)),
    good("rope.rotate-position-1e12", lambda: rope().rotate(q(1, 2, 1, 8), q(1, 2, 1, 8), torch.tensor([10**12]), torch.tensor([10**12])), lambda qk: bool(qk[0].isfinite().all())),
    good("rope.encode-is-none", lambda: rope().encode(torch.arange(3)), lambda out: out is None),
    bad("xpos.rotate-far-from-center", lambda: posenc.create("xpos", dim=8).rotate(q(), q(), torch.full((3,), 10**6), torch.full((3,), 10**6)), ValueError, r"center"),
    bad("rope_axial.rotate-coords", lambda: posenc.create("rope_axial", dim=8).rotate(q(), q(), torch.zeros(3, 3), torch.zeros(3, 3)), ValueError, r"positions of shape \(3, 3\) do not fit"),
    bad("t5.bias-float-positions", lambda: t5().bias(torch.tensor([0.5]), torch.arange(2)), TypeError, r"t5 buckets needs integer positions, got a float position 0.5"),
    bad("t5.bias-nan-positions", lambda: t5().bias(torch.tensor([NAN]), torch.arange(2)), ValueError, r"positions must be finite"),
    bad("t5.bias-batch-mismatch", lambda: t5().bias(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long)), ValueError, r"must have matching leading \(batch\) dims"),
    bad("t5.bias-0d-positions", lambda: t5().bias(torch.tensor(3), torch.arange(2)), ValueError, r"query positions must be \[s\] or \[b, s\], got a 0-d tensor"),
    bad("t5.bias-huge", lambda: t5().bias(torch.arange(HUGE), torch.arange(HUGE)), TooLargeError, r"a bias of shape \[2, 1048576, 1048576\].*GiB"),
    good("t5.bias-empty", lambda: t5().bias(torch.arange(0), torch.arange(3)), _shape(2, 0, 3)),
    bad("alibi.bias-huge-lengths", lambda: alibi().bias(HUGE, HUGE), TooLargeError, r"a bias of shape \[4, 1048576, 1048576\]"),
    bad("alibi.bias-inf-positions", lambda: alibi().bias(torch.tensor([INF]), torch.arange(2)), ValueError, r"positions must be finite"),
    bad("alibi.bias-complex-positions", lambda: alibi().bias(torch.ones(2, dtype=torch.complex64), torch.arange(2)), TypeError, r"positions must be integer or real"),
    good("alibi.bias-int-lengths", lambda: alibi().bias(3, 3), lambda t: torch.equal(t, F.alibi_bias(SLOPES, torch.arange(3), torch.arange(3)))),
    good("alibi.forward-dispatches-to-bias", lambda: alibi()(torch.arange(3), torch.arange(3)), _shape(4, 3, 3)),
    bad("learned.embed-2d-x", lambda: posenc.create("learned", dim=8).embed(torch.randn(3, 8)), ValueError, r"embed expects token embeddings \[b, s, d\]"),
    bad("learned.embed-int-x", lambda: posenc.create("learned", dim=8).embed(torch.ones(1, 3, 8, dtype=torch.long)), TypeError, r"embed expects floating-point token embeddings"),
    bad("learned.embed-past-table", lambda: posenc.create("learned", dim=8, max_len=4).embed(torch.randn(1, 5, 8)), ValueError, r"position 4 is outside the learned table \(max_len=4"),
    bad("learned.embed-negative-position", lambda: posenc.create("learned", dim=8).embed(torch.randn(1, 2, 8), torch.tensor([-1, 0])), ValueError, r"position -1 is outside the learned table"),
    bad("learned.encode-float-position", lambda: posenc.create("learned", dim=8).encode(torch.tensor([0.5])), TypeError, r"a learned position table needs integer positions"),
    bad("sinusoidal.embed-width", lambda: posenc.create("sinusoidal", dim=8).embed(torch.randn(1, 3, 6)), ValueError, r"combine='add' needs embeddings of width dim=8, got width 6"),
    bad("sinusoidal.embed-positions-length", lambda: posenc.create("sinusoidal", dim=8).embed(torch.randn(1, 3, 8), torch.arange(4)), ValueError, r"positions give 4 positions for a sequence of length 3"),
    bad("sinusoidal.embed-0d-positions", lambda: posenc.create("sinusoidal", dim=8).embed(torch.randn(1, 3, 8), torch.tensor(1)), ValueError, r"positions must have a sequence axis"),
    bad("sinusoidal_nd.embed-coords", lambda: posenc.create("sinusoidal_nd", dim=8).embed(torch.randn(1, 3, 8), torch.zeros(4, 2)), ValueError, r"with s=3; got shape \(4, 2\)"),
    good("sinusoidal.embed-concat", lambda: posenc.create("sinusoidal", dim=4, combine="concat").embed(torch.randn(2, 3, 6)), _shape(2, 3, 10)),
]

ATTENTION = [
    bad("Attention-dim-0", lambda: posenc.Attention(0, 2), ValueError, r"dim must be a positive integer, got 0"),
    bad("Attention-heads-str", lambda: posenc.Attention(8, "2"), TypeError, r"num_heads must be a positive integer, got '2'"),
    bad("Attention-not-divisible", lambda: posenc.Attention(10, 3), ValueError, r"dim=10 must be divisible by num_heads=3"),
    bad("Attention-kv-heads", lambda: posenc.Attention(16, 4, num_kv_heads=3), ValueError, r"num_kv_heads=3 must divide num_heads=4"),
    bad("Attention-head-dim-0", lambda: posenc.Attention(16, 4, head_dim=0), ValueError, r"head_dim must be a positive integer, got 0"),
    bad("Attention-dropout-2", lambda: posenc.Attention(16, 2, dropout=2.0), ValueError, r"dropout must be a probability in \[0, 1\], got 2.0"),
    bad("Attention-dropout-str", lambda: posenc.Attention(16, 2, dropout="0.1"), TypeError, r"dropout must be a probability in \[0, 1\], got '0.1'"),
    bad("Attention-scale-0", lambda: posenc.Attention(16, 2, scale=0), ValueError, r"scale must be a positive finite number, got 0"),
    bad("Attention-scale-nan", lambda: posenc.Attention(16, 2, scale=NAN), ValueError, r"scale must be a positive finite number, got nan"),
    bad("Attention-causal-str", lambda: posenc.Attention(16, 2, causal="yes"), TypeError, r"causal must be True or False, got 'yes'"),
    bad("Attention-qkv-bias-int", lambda: posenc.Attention(16, 2, qkv_bias=1), TypeError, r"qkv_bias must be True or False, got 1"),
    bad("Attention-encoding-unknown", lambda: posenc.Attention(16, 2, encoding="rotary"), ValueError, r"unknown positional encoding 'rotary'"),
    bad("Attention-encoding-int", lambda: posenc.Attention(16, 2, encoding=5), TypeError, r"encoding must be a scheme name, a PositionalEncoding or None, got int"),
    bad("Attention-encoding-width", lambda: posenc.Attention(16, 2, encoding=posenc.create("rope", dim=4)), ValueError, r"rope acts on heads: its dim must be the head width 8, got 4"),
    bad("Attention-encoding-heads", lambda: posenc.Attention(16, 2, encoding=posenc.create("alibi", num_heads=4), causal=True), ValueError, r"alibi has num_heads=4 but Attention has 2"),
    bad("Attention-causal-alibi-encoder", lambda: posenc.Attention(16, 2, encoding=posenc.create("alibi", num_heads=2)), ValueError, r"needs causal=True"),
    bad("Attention-absolute-width", lambda: posenc.Attention(16, 2, encoding=posenc.create("sinusoidal", dim=8)), ValueError, r"absolute encoding has dim=8 but Attention's width is 16"),
    bad("Attention-rope-odd-head", lambda: posenc.Attention(6, 2, encoding="rope"), ValueError, r"encoding 'rope' cannot serve Attention\(dim=6, num_heads=2\), heads of width 3"),
    bad("Attention-rope-axial-narrow", lambda: posenc.Attention(6, 3, encoding="rope_axial"), ValueError, r"head width of at least 4"),
    bad("forward-2d-x", lambda: attn()(torch.randn(3, 16)), ValueError, r"Attention expects x of shape \[b, s, 16\], got \(3, 16\)"),
    bad("forward-wrong-width", lambda: attn()(x(d=8)), ValueError, r"Attention expects x of shape \[b, s, 16\], got \(1, 3, 8\)"),
    bad("forward-int-x", lambda: attn()(torch.ones(1, 3, 16, dtype=torch.long)), TypeError, r"floating-point embeddings x \[b, s, 16\], got a tensor of dtype torch.int64"),
    bad("forward-list-x", lambda: attn()([[0.0] * 16]), TypeError, r"floating-point embeddings x \[b, s, 16\], got list"),
    bad("forward-meta-x", lambda: attn()(x().to("meta")), ValueError, r"x is on meta but this Attention's weights are on cpu"),
    bad("forward-positions-length", lambda: attn()(x(), torch.arange(4)), ValueError, r"positions must be \[s\], \[1, s\] or \[b, s\] with b=1, s=3, got shape \(4,\)"),
    bad("forward-positions-batch", lambda: attn()(x(b=2), torch.zeros(3, 3, dtype=torch.long)), ValueError, r"with b=2, s=3, got shape \(3, 3\)"),
    bad("forward-nan-positions", lambda: attn()(x(), torch.tensor([0.0, NAN, 2.0])), ValueError, r"positions must be finite"),
    bad("forward-bool-positions", lambda: attn()(x(), torch.ones(3, dtype=torch.bool)), TypeError, r"positions must be integer or real"),
    bad("forward-meta-positions", lambda: attn()(x(), torch.arange(3, device="meta")), ValueError, r"on the meta device"),
    bad("forward-key-mask-float", lambda: attn()(x(), key_mask=torch.ones(1, 3)), TypeError, r"key_mask must be a bool \(or 0/1 integer\) tensor"),
    bad("forward-key-mask-shape", lambda: attn()(x(), key_mask=torch.ones(1, 4, dtype=torch.bool)), ValueError, r"key_mask must be \[b, sk\] = \[1, 3\], got \(1, 4\)"),
    bad("forward-key-mask-list", lambda: attn()(x(), key_mask=[[True] * 3]), TypeError, r"key_mask must be a bool.*got list"),
    bad("forward-key-mask-meta", lambda: attn()(x(), key_mask=torch.ones(1, 3, dtype=torch.bool, device="meta")), ValueError, r"key_mask is on meta but x is on cpu"),
    bad("forward-cache-int", lambda: attn()(x(), cache=3), TypeError, r"cache must be a posenc.KVCache or None, got int"),
    bad("forward-huge-key-mask", lambda: attn(None)(torch.zeros(1, HUGE, 16), key_mask=torch.ones(1, HUGE, dtype=torch.bool)), TooLargeError, r"attention mask of shape \[1, 1, 1048576, 1048576\].*GiB.*KVCache"),
    bad("forward-huge-t5-training", lambda: posenc.Attention(16, 2, encoding="t5", causal=True)(torch.zeros(1, HUGE, 16)), TooLargeError, r"a bias of shape \[2, 1048576, 1048576\]"),
    bad("forward-huge-shaw", lambda: attn("shaw")(torch.zeros(1, HUGE, 16)), TooLargeError, r"attention mask of shape \[1, 1, 1048576, 1048576\]"),
    good("forward-empty-sequence", lambda: attn()(x(b=2, s=0)), _shape(2, 0, 16)),
    good("forward-empty-batch", lambda: attn()(x(b=0)), _shape(0, 3, 16)),
    good("forward-rope-positions-shifted-by-1e9", lambda: _SHIFT_ATTN(_SHIFT_X, torch.arange(3) + 10**9), _rope_shift_invariant),
    good("forward-int8-positions", lambda: attn()(x(), torch.arange(3, dtype=torch.int8)), _shape(1, 3, 16)),
]

KV_CACHE = [
    bad("kv-append-positions-long", lambda: posenc.KVCache().append(q(), q(), torch.arange(5)), ValueError, r"positions of shape \[5\] give 5 positions for 3 new keys"),
    bad("kv-append-positions-batch", lambda: posenc.KVCache().append(q(2, 2, 3, 8), q(2, 2, 3, 8), torch.zeros(3, 3)), ValueError, r"expected \[s\], \[1, s\] or \[b, s\] with s = 3, b = 2"),
    bad("kv-append-positions-0d", lambda: posenc.KVCache().append(q(1, 2, 1, 8), q(1, 2, 1, 8), torch.tensor(0)), ValueError, r"positions of shape \[\] give 1 positions for 1 new keys"),
    bad("kv-append-k-3d", lambda: posenc.KVCache().append(q(2, 3, 8), q(2, 3, 8), torch.arange(3)), ValueError, r"k and v must be \[b, h, s, hd\]"),
    bad("kv-append-v-length", lambda: posenc.KVCache().append(q(), q(1, 2, 2, 8), torch.arange(3)), ValueError, r"k and v must be \[b, h, s, hd\] with the same b, h and s"),
    bad("kv-append-k-list", lambda: posenc.KVCache().append([1.0], q(), torch.arange(3)), TypeError, r"k must be a tensor, got list"),
    bad("kv-append-positions-list", lambda: posenc.KVCache().append(q(), q(), [0, 1, 2]), TypeError, r"positions must be a tensor, got list"),
    bad("kv-append-seq-dim", lambda: posenc.KVCache().append(q(), q(), torch.arange(3), seq_dim=0), ValueError, r"seq_dim must be -1 \(positions \[.., s\]\) or -2"),
    bad("kv-append-coordinates-width", lambda: _append_twice((q(), q(), torch.zeros(3, 2)), (q(1, 2, 1, 8), q(1, 2, 1, 8), torch.zeros(1, 3)), seq_dim=-2), ValueError, r"at positions \[3, 2\].*do not continue them"),
    bad("kv-append-another-dtype", lambda: _append_twice((q(), q(), torch.arange(3)), (q().double(), q().double(), torch.arange(3, 6))), ValueError, r"new keys \[1, 2, 3, 8\] \(torch.float64, cpu\).*do not continue them"),
    bad("kv-append-positions-device", lambda: _append_twice((q(), q(), torch.arange(3)), (q(), q(), torch.arange(3, device="meta"))), ValueError, r"\(meta\) do not continue them"),
    bad("kv-second-layer", _two_layers_one_cache, ValueError, r"another attention layer.*one KVCache per layer"),
    bad("kv-another-batch", _decode_another_batch, ValueError, r"use a new KVCache for another batch"),
    good("kv-append-empty", lambda: _append_twice((q(1, 2, 0, 8), q(1, 2, 0, 8), torch.arange(0)), (q(), q(), torch.arange(3))), lambda c: c.length == 3 and c.positions.tolist() == [0, 1, 2]),
]

ROPE_CONFIG = [
    bad("config-int", lambda: posenc.rope_from_config(5), TypeError, r"config must be a dict, a path to config.json or a transformers config, got int"),
    bad("config-none", lambda: posenc.rope_from_config(None), TypeError, r"config must be a dict.*got NoneType"),
    bad("config-missing-file", lambda: posenc.rope_from_config("/nonexistent/posenc/config.json"), ValueError, r"no config file at '/nonexistent/posenc/config.json'"),
    bad("config-folder-without-file", lambda: posenc.rope_from_config(_config_file("", folder_only=True)), ValueError, r"no config file at .*config.json"),
    bad("config-file-not-json", lambda: posenc.rope_from_config(_config_file("{model_type: llama")), ValueError, r"is not readable JSON"),
    bad("config-file-json-list", lambda: posenc.rope_from_config(_config_file("[1, 2]")), ValueError, r"holds a JSON list, expected an object"),
    bad("config-no-head-width", lambda: posenc.rope_from_config({"hidden_size": 64, "rope_theta": 1e4}, layout="half"), ValueError, r"config needs 'head_dim', or 'hidden_size' and 'num_attention_heads'"),
    bad("config-unknown-model-type", lambda: posenc.rope_from_config(llama(model_type="mystery")), ValueError, r"unknown pair layout for model_type 'mystery'; pass layout="),
    bad("config-no-model-type", lambda: posenc.rope_from_config({"hidden_size": 64, "num_attention_heads": 4}), ValueError, r"unknown pair layout for model_type None"),
    bad("config-layout", lambda: posenc.rope_from_config(llama(), layout="diagonal"), ValueError, r"unknown layout 'diagonal'"),
    bad("config-text-config-int", lambda: posenc.rope_from_config({"model_type": "gemma3", "text_config": 5}, layer_type="full_attention"), ValueError, r"config field 'text_config' must be an object \(a dict\).*got 5"),
    bad("config-text-config-list", lambda: posenc.rope_from_config({"model_type": "gemma3", "text_config": [1]}), ValueError, r"config field 'text_config' must be an object"),
    bad("config-odd-head-dim", lambda: posenc.rope_from_config(llama(head_dim=65)), ValueError, r"head width from config field 'head_dim' is 65, odd"),
    bad("config-odd-derived-head-dim", lambda: posenc.rope_from_config(llama(hidden_size=66, num_attention_heads=2)), ValueError, r"'hidden_size' // 'num_attention_heads' \(head_dim = 66 // 2\) is 33, odd"),
    bad("config-head-dim-str", lambda: posenc.rope_from_config(llama(head_dim="64")), ValueError, r"config field 'head_dim' must be a positive whole number, got '64'"),
    bad("config-head-dim-fraction", lambda: posenc.rope_from_config(llama(head_dim=64.5)), ValueError, r"config field 'head_dim' must be a positive whole number, got 64.5"),
    bad("config-heads-zero", lambda: posenc.rope_from_config(llama(num_attention_heads=0)), ValueError, r"config field 'num_attention_heads' must be a positive whole number, got 0"),
    bad("config-heads-above-width", lambda: posenc.rope_from_config(llama(hidden_size=4, num_attention_heads=8)), ValueError, r"give heads of width 4 // 8 = 0; pass 'head_dim'"),
    bad("config-rope-theta-str", lambda: posenc.rope_from_config(llama(rope_theta="1e4")), ValueError, r"config field 'rope_theta' must be a finite number, got '1e4'"),
    bad("config-rope-theta-nan", lambda: posenc.rope_from_config(llama(rope_theta=NAN)), ValueError, r"config field 'rope_theta' must be a finite number, got nan"),
    bad("config-rope-theta-1", lambda: posenc.rope_from_config(llama(rope_theta=1)), ValueError, r"config field 'rope_theta' \(the RoPE base\) must be greater than 1, got 1"),
    bad("config-rope-scaling-str", lambda: posenc.rope_from_config(llama(rope_scaling="linear")), ValueError, r"config field 'rope_scaling' must be an object"),
    bad("config-rope-parameters-list", lambda: posenc.rope_from_config(llama(rope_parameters=[1])), ValueError, r"config field 'rope_parameters' must be an object"),
    bad("config-scaling-unknown-type", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "ntk-by-parts", "factor": 2})), ValueError, r"unknown rope scaling type 'ntk-by-parts'"),
    bad("config-scaling-type-null", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": None, "factor": 2})), TypeError, r"rope_type must be a name such as 'yarn', got None"),
    bad("config-scaling-no-factor", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "linear"})), ValueError, r"'linear' needs \['factor'\]"),
    bad("config-scaling-factor-str", lambda: posenc.rope_from_config(llama(rope_scaling={"type": "linear", "factor": "4"})), ValueError, r"'factor' must be a positive number, got '4'"),
    bad("config-yarn-original-str", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": "4k"})), ValueError, r"'original_max_position_embeddings' must be a positive whole number, got '4k'"),
    bad("config-llama3-missing-keys", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "llama3", "factor": 8})), ValueError, r"'llama3' needs \['high_freq_factor', 'low_freq_factor'\]"),
    bad("config-longrope-factor-str", lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "longrope", "short_factor": "1", "long_factor": [1.0] * 8})), ValueError, r"'short_factor' must be a non-empty list of positive numbers"),
    bad("config-dynamic-max-position-str", lambda: posenc.rope_from_config(llama(max_position_embeddings="2048", rope_scaling={"rope_type": "dynamic", "factor": 2})), ValueError, r"config field 'max_position_embeddings' must be a positive whole number, got '2048'"),
    bad("config-partial-factor-2", lambda: posenc.rope_from_config({"model_type": "phi", "hidden_size": 64, "num_attention_heads": 4, "partial_rotary_factor": 2}), ValueError, r"partial_rotary_factor \(rotary_pct\) must be a number in \(0, 1\], got 2"),
    bad("config-partial-factor-str", lambda: posenc.rope_from_config({"model_type": "phi", "hidden_size": 64, "num_attention_heads": 4, "partial_rotary_factor": "0.5"}), ValueError, r"partial_rotary_factor \(rotary_pct\) must be a number in \(0, 1\], got '0.5'"),
    bad("config-rotary-dim-str", lambda: posenc.rope_from_config({"model_type": "gptj", "n_embd": 64, "n_head": 4, "rotary_dim": "8"}), ValueError, r"config field 'rotary_dim' must be a positive whole number, got '8'"),
    bad("config-qk-rope-head-dim-0", lambda: posenc.rope_from_config({"model_type": "deepseek_v3", "hidden_size": 64, "num_attention_heads": 4, "qk_rope_head_dim": 0}), ValueError, r"config field 'qk_rope_head_dim' must be a positive whole number, got 0"),
    bad("config-global-head-dim-odd", lambda: posenc.rope_from_config({"model_type": "gemma4_text", "hidden_size": 64, "num_attention_heads": 4, "global_head_dim": 511}, layer_type="full_attention"), ValueError, r"head width from config field 'global_head_dim' is 511, odd"),
    bad("config-layer-type-single-rope", lambda: posenc.rope_from_config(llama(), layer_type="full_attention"), ValueError, r"layer_type='full_attention' picks one of a config's per-layer-type RoPEs"),
    bad("config-gemma3-no-layer-type", lambda: posenc.rope_from_config({"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4}), ValueError, r"pass layer_type= one of"),
    bad("config-gemma3-unknown-layer-type", lambda: posenc.rope_from_config({"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4}, layer_type="global"), ValueError, r"unknown layer_type 'global'"),
    bad("config-phimoe-no-mscale", lambda: posenc.rope_from_config({"model_type": "phimoe", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0] * 8, "original_max_position_embeddings": 4096}}), ValueError, r"needs 'short_mscale'"),
    good("config-unknown-scaling-key-warns", _warns(lambda: posenc.rope_from_config(llama(rope_scaling={"rope_type": "linear", "factor": 2, "alpha": 1})), r"does not take \['alpha'\]"), lambda r: r.config.scaling == {"rope_type": "linear", "factor": 2}),
    good("config-json-float-head-dim", lambda: posenc.rope_from_config(llama(head_dim=16.0)), lambda r: r.config.dim == 16),
    good("config-file", lambda: posenc.rope_from_config(_config_file(json.dumps(llama(rope_theta=5e5)))), lambda r: r.config.base == 5e5 and r.config.dim == 16),
]


KERNELS = [
    bad("kernels.rope-layout", lambda: kernel_rope(q(), COS3, SIN3, layout="x"), ValueError, r"unknown layout 'x'"),
    bad("kernels.rope-backend", lambda: kernel_rope(q(), COS3, SIN3, backend="cuda"), ValueError, r"unknown backend 'cuda'"),
    bad("kernels.rope-int-x", lambda: kernel_rope(q().long(), COS3, SIN3), TypeError, r"x must be a floating-point tensor \[..., s, hd\], got dtype torch.int64"),
    bad("kernels.rope-list-x", lambda: kernel_rope([1.0], COS3, SIN3), TypeError, r"x must be a floating-point tensor \[..., s, hd\], got list"),
    bad("kernels.rope-cos-list", lambda: kernel_rope(q(), [1.0], SIN3), TypeError, r"cos and sin must be tensors"),
    bad("kernels.rope-cos-odd", lambda: kernel_rope(q(), COS3[:, :3], SIN3[:, :3]), ValueError, r"rotated width cos.shape\[-1\] must be a positive even number, got 3"),
    bad("kernels.rope-meta-tables", lambda: kernel_rope(q(), COS3.to("meta"), SIN3.to("meta")), ValueError, r"cos and sin \(on meta, meta\) must be on x's device, cpu"),
    bad("kernels.rope-out-shape", lambda: kernel_rope(q(), COS3, SIN3, out=torch.empty(2)), ValueError, r"out must match x \(shape \(1, 2, 3, 8\)"),
    bad("kernels.rope-out-list", lambda: kernel_rope(q(), COS3, SIN3, out=[1.0]), ValueError, r"out must match x.*got list"),
    bad("kernels.rope-out-overlap", _overlapping_out, ValueError, r"out shares memory with x"),
    bad("kernels.rope-out-expanded", lambda: kernel_rope(q(), COS3, SIN3, out=torch.empty(1, 1, 3, 8).expand(1, 2, 3, 8)), ValueError, r"elements that share memory"),
    bad("kernels.rope_-requires-grad", lambda: kernel_rope_(q().requires_grad_(), COS3, SIN3), ValueError, r"rope_ \(in place\) takes no part in autograd"),
    good("kernels.rope-empty", lambda: kernel_rope(q(1, 2, 0, 8), *F.rope_cos_sin(0, INV8)), _shape(1, 2, 0, 8)),
    good("kernels.rope-equals-reference", lambda: (lambda t: (kernel_rope(t, COS3, SIN3), F.apply_rope(t, COS3, SIN3)))(q()), lambda pair: torch.allclose(*pair, atol=1e-6)),
    bad("flex.set_mode", lambda: flex.set_mode("fast"), ValueError, r"unknown flex mode 'fast'"),
    bad("flex.block_mask-sq-0", lambda: flex.block_mask(0, 4, causal=True), ValueError, r"sq must be a positive integer, got 0"),
    bad("flex.block_mask-q-offset", lambda: flex.block_mask(4, 4, causal=True, q_offset=-1), ValueError, r"q_offset must be a non-negative int"),
    bad("flex.warmup-rope", lambda: flex.warmup(rope()), ValueError, r"'rope' has no score mod"),
    bad("flex.alibi_score_mod-str", lambda: flex.alibi_score_mod("x"), TypeError, r"slopes must be a 1-D tensor or a sequence of numbers, got str"),
    bad("flex.t5_score_mod-table", lambda: flex.t5_score_mod(torch.randn(4, 2)), ValueError, r"table must be a tensor \[num_buckets=32, heads\]"),
]
# fmt: on

ROWS = [*FUNCTIONAL, *CREATE, *HOOKS, *ATTENTION, *KV_CACHE, *ROPE_CONFIG, *KERNELS]


def test_the_table_is_large_and_its_ids_unique() -> None:
    assert len(ROWS) >= 150
    ids = [row.id for row in ROWS]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input(row: Row) -> None:
    """The row's call gives the right result, or a ValueError / TypeError that posenc raised itself
    (the innermost frame is posenc's) and whose message matches the row's regex."""
    if row.error is None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = row.call()
        assert row.check(result), f"{row.id}: unexpected result {result!r}"
        return
    assert issubclass(row.error, (ValueError, TypeError))
    with pytest.raises(row.error, match=row.match) as info:
        row.call()
    raised_in = str(info.traceback[-1].path)
    assert f"{Path('posenc')}" in raised_in and "torch" not in Path(raised_in).parts, (
        f"{row.id}: {type(info.value).__name__} raised from {raised_in}, not by posenc's checks"
    )
