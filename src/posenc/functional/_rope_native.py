"""Half-pair RoPE on the CPU as one C loop, for the eager pass of :mod:`posenc.functional.fast_rope`.

Shape legend: ``s`` sequence, ``hd`` head width, ``n`` rotated pairs (``cos_h.shape[-1]``), ``...``
the leading (batch, head) dims.

Same formula as :func:`posenc.functional.apply_rope` with ``layout="half"`` (Su et al. 2021,
RoFormer, section 3.4; pairs ``(i, i + n)`` as HF ``rotate_half``): ``x1 cos - x2 sin`` and
``x2 cos + x1 sin``, each product and sum rounded as the reference's ATen ops round them (no fused
multiply-add: the source is built with ``-ffp-contract=off``), so float32 and float64 results
equal the reference bit for bit. bfloat16 inputs take float32 tables: each pair is widened,
rotated in float32 and rounded once to nearest even (``round_to_nearest_even`` in pytorch/pytorch
``c10/util/BFloat16.h``), as the reference computes them; NaN and inf land where the reference's do.

Why: ATen has no op that pairs feature ``i`` with ``i + n``, so an eager rotation needs several
passes over ``x`` (the swap pass of :mod:`~posenc.functional._rope_eager` makes four), and at the
training sizes of the experiments (q and k ``[64, 4, 32, 16]``, rows of 8-feature halves in a
strided projection) each pass costs as much as a copy. One loop reads each row once and writes
it once: a pass over memory at the cost of a copy.

The C source below is compiled at first use by the C++ toolchain ``torch.compile`` uses on the
CPU (``torch._inductor.codecache.CppCodeCache``: its compiler, flags and on-disk cache, so later
processes load the built library; no vector-ISA probes), and called through ``ctypes`` from a plan
cached per layout. The source needs GCC or Clang (vector extensions). No compiler, or any failure:
:func:`rotate_half` returns False and the ATen passes serve (the reason logged once at INFO).
"""

from __future__ import annotations

import ctypes
import logging
import threading

import torch
from torch import Tensor

log = logging.getLogger(__name__)

#: Most dims of the index space a call may have after merging (the loop's multi-index).
_MAX_DIMS = 8

#: Elements from which a call splits its rows over ``torch.get_num_threads()`` OpenMP threads.
_PARALLEL_NUMEL = 1 << 16

_SOURCE = r"""
#include <stdint.h>
#ifdef _OPENMP  // rows split over threads where the compiler has OpenMP; one thread otherwise
#include <omp.h>
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

// One row: n pairs (i, i + n) at unit stride, then `tail` features copied. V: W elements of T in
// one 32-byte vector (GCC/Clang vector extensions). `s` is read as sign * sin, an exact negation;
// each product and sum is rounded on its own (built with -ffp-contract=off), as ATen's ops do.
template <typename T, typename V, int W>
struct Row {
    typedef T X;  // x's and out's element
    typedef T C;  // the tables' element
    static inline void run(const T* a, T* o, const T* c, const T* s, int64_t n, int64_t tail, T sign) {
        int64_t i = 0;
        for (; i + W <= n; i += W) {
            V x1, x2, cv, sv;
            __builtin_memcpy(&x1, a + i, sizeof(V));
            __builtin_memcpy(&x2, a + i + n, sizeof(V));
            __builtin_memcpy(&cv, c + i, sizeof(V));
            __builtin_memcpy(&sv, s + i, sizeof(V));
            sv = sv * sign;
            V y1 = x1 * cv - x2 * sv;
            V y2 = x2 * cv + x1 * sv;
            __builtin_memcpy(o + i, &y1, sizeof(V));
            __builtin_memcpy(o + i + n, &y2, sizeof(V));
        }
        for (; i < n; ++i) {
            T x1 = a[i], x2 = a[i + n], sv = s[i] * sign;
            o[i] = x1 * c[i] - x2 * sv;
            o[i + n] = x2 * c[i] + x1 * sv;
        }
        for (i = 2 * n; i < 2 * n + tail; ++i) o[i] = a[i];
    }
};

// bfloat16 x and out (their bits as uint16), float32 tables: each pair widened to float32 (exact),
// rotated in float32 and rounded once to bfloat16, to nearest even on the bits, NaN to a quiet NaN
// (c10/util/BFloat16.h round_to_nearest_even): what the reference computes for a bfloat16 x.
static inline float bf16_float(uint16_t h) {
    uint32_t w = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &w, 4);
    return f;
}
static inline uint16_t float_bf16(float f) {
    if (f != f) return 0x7FC0;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static inline v8f bf16_load(const uint16_t* p) {
    v8h h;
    __builtin_memcpy(&h, p, sizeof(h));
    v8u w = __builtin_convertvector(h, v8u) << 16;
    v8f f;
    __builtin_memcpy(&f, &w, sizeof(f));
    return f;
}
static inline void bf16_store(uint16_t* p, v8f f) {
    v8u u;
    __builtin_memcpy(&u, &f, sizeof(u));
    v8u r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    v8i nan = (v8i)(f != f);  // all ones where NaN
    r = (r & ~(v8u)nan) | ((v8u)nan & 0x7FC0u);
    v8h h = __builtin_convertvector(r, v8h);
    __builtin_memcpy(p, &h, sizeof(h));
}
struct RowBf16 {
    typedef uint16_t X;
    typedef float C;
    static inline void run(const uint16_t* a, uint16_t* o, const float* c, const float* s, int64_t n,
                           int64_t tail, float sign) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            v8f x1 = bf16_load(a + i), x2 = bf16_load(a + i + n), cv, sv;
            __builtin_memcpy(&cv, c + i, sizeof(v8f));
            __builtin_memcpy(&sv, s + i, sizeof(v8f));
            sv = sv * sign;
            bf16_store(o + i, x1 * cv - x2 * sv);
            bf16_store(o + i + n, x2 * cv + x1 * sv);
        }
        for (; i < n; ++i) {
            float x1 = bf16_float(a[i]), x2 = bf16_float(a[i + n]), sv = s[i] * sign;
            o[i] = float_bf16(x1 * c[i] - x2 * sv);
            o[i + n] = float_bf16(x2 * c[i] + x1 * sv);
        }
        for (i = 2 * n; i < 2 * n + tail; ++i) o[i] = a[i];
    }
};

// Rows [first, last) of the index space: dims [0, ndim) with sizes `size` and strides in elements
// of x, out and the two tables (0 along broadcast dims); the last dim is the inner loop.
template <typename R>
static void rows(const typename R::X* x, typename R::X* out, const typename R::C* cs, const typename R::C* sn,
                 int64_t ndim, const int64_t* size, const int64_t* xs, const int64_t* os, const int64_t* cst,
                 const int64_t* sst, int64_t n, int64_t tail, typename R::C sign, int64_t first, int64_t last) {
    int64_t idx[8];
    int64_t xo = 0, oo = 0, co = 0, so = 0, rem = first;
    for (int64_t d = ndim - 1; d >= 0; --d) {  // the multi-index of row `first`
        idx[d] = rem % size[d];
        rem /= size[d];
        xo += idx[d] * xs[d]; oo += idx[d] * os[d]; co += idx[d] * cst[d]; so += idx[d] * sst[d];
    }
    const int64_t in = ndim - 1, isz = size[in], ixs = xs[in], ios = os[in], ics = cst[in], iss = sst[in];
    int64_t r = first;
    while (r < last) {
        int64_t count = isz - idx[in];
        if (count > last - r) count = last - r;
        const typename R::X* a = x + xo;
        typename R::X* o = out + oo;
        const typename R::C* c = cs + co;
        const typename R::C* s = sn + so;
        for (int64_t j = 0; j < count; ++j, a += ixs, o += ios, c += ics, s += iss)
            R::run(a, o, c, s, n, tail, sign);
        r += count;
        // the next row: the inner index back to 0, carried into the outer dims
        xo -= idx[in] * ixs; oo -= idx[in] * ios; co -= idx[in] * ics; so -= idx[in] * iss;
        idx[in] = 0;
        for (int64_t d = in - 1; d >= 0; --d) {
            if (++idx[d] < size[d]) {
                xo += xs[d]; oo += os[d]; co += cst[d]; so += sst[d];
                break;
            }
            idx[d] = 0;
            xo -= (size[d] - 1) * xs[d]; oo -= (size[d] - 1) * os[d];
            co -= (size[d] - 1) * cst[d]; so -= (size[d] - 1) * sst[d];
        }
    }
}

template <typename R>
static void rope_half(const typename R::X* x, typename R::X* out, const typename R::C* cs,
                      const typename R::C* sn, int64_t ndim, const int64_t* size, const int64_t* xs,
                      const int64_t* os, const int64_t* cst, const int64_t* sst, int64_t n, int64_t tail,
                      int inverse, int64_t threads) {
    int64_t total = 1;
    for (int64_t d = 0; d < ndim; ++d) total *= size[d];
    typename R::C sign = inverse ? -1 : 1;
#ifdef _OPENMP
    if (threads > 1 && total > 1) {
#pragma omp parallel num_threads(threads)
        {
            int64_t parts = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t first = total * t / parts, last = total * (t + 1) / parts;
            rows<R>(x, out, cs, sn, ndim, size, xs, os, cst, sst, n, tail, sign, first, last);
        }
        return;
    }
#endif
    rows<R>(x, out, cs, sn, ndim, size, xs, os, cst, sst, n, tail, sign, 0, total);
}

#define POSENC_ROPE_HALF(name, R)                                                                        \
    extern "C" void name(const R::X* x, R::X* out, const R::C* cs, const R::C* sn, int64_t ndim,           \
                         const int64_t* size, const int64_t* xs, const int64_t* os, const int64_t* cst,    \
                         const int64_t* sst, int64_t n, int64_t tail, int inverse, int64_t threads) {      \
        rope_half<R>(x, out, cs, sn, ndim, size, xs, os, cst, sst, n, tail, inverse, threads);             \
    }
typedef Row<float, v8f, 8> RowF32;
typedef Row<double, v4d, 4> RowF64;
POSENC_ROPE_HALF(posenc_rope_half_f32, RowF32)
POSENC_ROPE_HALF(posenc_rope_half_f64, RowF64)
POSENC_ROPE_HALF(posenc_rope_half_bf16, RowBf16)
"""

#: The loop's entry point per dtype of x (bfloat16 with float32 tables, the others with their own).
_FUNCTIONS = {torch.float32: "posenc_rope_half_f32", torch.float64: "posenc_rope_half_f64",
              torch.bfloat16: "posenc_rope_half_bf16"}

_lock = threading.Lock()
_state: dict[str, object] = {}  # "lib": the loaded library, or "error": why there is none
_I64 = ctypes.c_int64
_P = ctypes.c_void_p


def _library() -> object | None:
    """The compiled library (built or loaded from the on-disk cache at the first call), or None."""
    lib = _state.get("lib")
    if lib is not None or "error" in _state:
        return lib
    with _lock:
        if "lib" in _state or "error" in _state:
            return _state.get("lib")
        try:
            from torch._inductor.codecache import CppCodeCache

            try:  # no vector-ISA probes (seconds of test builds on a fresh cache): the source needs none
                lib = CppCodeCache.load(_SOURCE, needs_vec_isa=False)
            except TypeError:  # a torch whose loader has no such argument
                lib = CppCodeCache.load(_SOURCE)
            for name in _FUNCTIONS.values():
                fn = getattr(lib, name)
                fn.restype = None
                fn.argtypes = [_P, _P, _P, _P, _I64, _P, _P, _P, _P, _P, _I64, _I64, ctypes.c_int, _I64]
            _state["lib"] = lib
        except Exception as err:  # no compiler, no Inductor, a failed build: the ATen passes serve
            _state["error"] = f"{type(err).__name__}: {err}"
            log.info("posenc: the C RoPE loop is unavailable, using ATen passes (%s)", _state["error"])
            return None
    return lib


def available() -> bool:
    """Whether the C loop can run here (builds it on the first call)."""
    return _library() is not None


def _index_space(x: Tensor, out: Tensor, cos_h: Tensor, sin_h: Tensor) -> tuple | None:
    """Sizes and element strides of x, out and the tables over x's leading dims (all but the
    features), in x's memory order, size-1 dims dropped and neighbours merged where all four
    allow; None beyond :data:`_MAX_DIMS` dims."""
    lead = x.shape[:-1]
    n = cos_h.shape[-1]
    c, s = cos_h.expand(*lead, n), sin_h.expand(*lead, n)
    dims = [d for d in range(len(lead)) if lead[d] != 1]
    dims.sort(key=lambda d: -x.stride(d))  # x's memory order: the inner loop runs along its rows
    merged: list[list[int]] = []  # [size, x stride, out stride, cos stride, sin stride]
    for d in dims:
        cur = [lead[d], x.stride(d), out.stride(d), c.stride(d), s.stride(d)]
        if merged:
            prev = merged[-1]
            if all(prev[k] == cur[k] * cur[0] for k in range(1, 5)):
                prev[0] *= cur[0]
                prev[1:] = cur[1:]
                continue
        merged.append(cur)
    merged = _blocked(merged)
    if len(merged) > _MAX_DIMS:
        return None
    if not merged:  # a single row: one dim of size 1
        merged.append([1, 0, 0, 0, 0])
    return tuple(tuple(m[k] for m in merged) for k in range(5))


#: Rows per block, and heads per group, of :func:`_blocked`.
_BLOCK_ROWS, _GROUP = 64, 4


def _blocked(dims: list[list[int]]) -> list[list[int]]:
    """Head-major layouts (``[..., h, s, hd]``: the innermost dim walks the table rows, the one
    outside it shares them) reordered as ``[..., s / B, h / g, B, g]``: a block of B table rows is
    read once for all heads while it is in cache, g heads at a time (g streams of x in flight),
    instead of the whole table once per head. The dims as they are where that does not fit (the
    sequence not a multiple of B, or shorter than two blocks). q/k ``[1, 32, L, 128]`` float32
    into ``out=``, one thread, x the copy floor, L = 2048 / 8192: 1.61 / 1.62 -> 1.17 / 1.18 (B = 64,
    g = 4; g = 1 1.33, g = 32 1.65; B = 16-256 alike)."""
    if len(dims) < 2:
        return dims
    head, seq = dims[-2], dims[-1]
    if head[3] or head[4] or not (seq[3] or seq[4]) or seq[0] % _BLOCK_ROWS or seq[0] < 2 * _BLOCK_ROWS:
        return dims
    g = next((g for g in (_GROUP, 2) if head[0] % g == 0), 1)
    b = _BLOCK_ROWS
    blocks, rows = [seq[0] // b, *(st * b for st in seq[1:])], [b, *seq[1:]]
    if g == 1:
        return [*dims[:-2], blocks, head, rows]
    return [*dims[:-2], blocks, [head[0] // g, *(st * g for st in head[1:])], rows, [g, *head[1:]]]


#: Call plans by layout (see :func:`rotate_half`): the function and its argument arrays, or None
#: where the loop does not apply; the oldest dropped beyond :data:`_PLANS`.
_plans: dict[tuple, tuple | None] = {}
_PLANS = 64


def _plan(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, inplace: bool) -> tuple | None:
    if x.device.type != "cpu" or x.dtype not in _FUNCTIONS or x.dim() < 1:
        return None
    table = torch.float32 if x.dtype == torch.bfloat16 else x.dtype  # bfloat16 rotates in float32
    if not (cos_h.dtype == sin_h.dtype == table and out.dtype == x.dtype and cos_h.device.type == sin_h.device.type
            == "cpu" and out.device.type == "cpu" and out.shape == x.shape):
        return None
    n, hd = cos_h.shape[-1], x.shape[-1]
    if 2 * n > hd or any(t.stride(-1) != 1 for t in (x, out, cos_h, sin_h) if t.shape[-1] > 1):
        return None
    if inplace and out.stride() != x.stride():
        return None
    try:
        space = _index_space(x, out, cos_h, sin_h)
    except RuntimeError:  # tables that do not broadcast against x
        return None
    if space is None:
        return None
    lib = _library()
    if lib is None:
        return None
    arrays = tuple((_I64 * max(1, len(v)))(*v) for v in space)
    fn = getattr(lib, _FUNCTIONS[x.dtype])
    return (fn, len(space[0]), *(ctypes.addressof(a) for a in arrays), n, 0 if inplace else hd - 2 * n, arrays)


def rotate_half(x: Tensor, cos_h: Tensor, sin_h: Tensor, out: Tensor, inverse: bool) -> bool:
    """Rotate half pairs of ``x`` ``[..., s, hd]`` into ``out`` (which may be ``x``) by the
    half-width tables ``cos_h``/``sin_h`` ``[..., s, n]`` (broadcasting against ``x``); the
    features past ``2 n`` are copied. False (nothing written) where the loop does not apply:
    not a CPU float32/float64 tensor with the tables and ``out`` in its dtype, or a bfloat16 one
    with float32 tables (rotated in float32, rounded once), a feature dim
    without unit stride, ``out`` overlapping ``x`` other than as the same tensor, or no compiled
    library. The layout checks and argument arrays are made once per layout (a plan, ~10 us)."""
    inplace = out.data_ptr() == x.data_ptr()
    key = (tuple(x.shape), x.stride(), out.stride(), tuple(cos_h.shape), cos_h.stride(), sin_h.stride(), x.dtype,
           cos_h.dtype, sin_h.dtype, out.dtype, x.device, out.device, cos_h.device, sin_h.device, inplace)
    plan = _plans.get(key, False)
    if plan is False:
        plan = _plan(x, cos_h, sin_h, out, inplace)
        with _lock:  # threads may file plans at once
            if len(_plans) >= _PLANS:
                _plans.pop(next(iter(_plans)))
            _plans[key] = plan
    if plan is None:
        return False
    if x.numel() == 0:
        return True
    fn, ndim, size, xs, os_, cs, ss, n, tail = plan[:9]
    threads = torch.get_num_threads() if x.numel() >= _PARALLEL_NUMEL else 1
    fn(x.data_ptr(), out.data_ptr(), cos_h.data_ptr(), sin_h.data_ptr(), ndim, size, xs, os_, cs, ss, n, tail,
       int(inverse), threads)
    return True
