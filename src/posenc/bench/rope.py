"""RoPE application timed against the floor and the peers: q, k ``[1, h, L, hd]``.

Shape legend: ``b`` batch (1), ``h`` heads, ``L`` sequence, ``hd`` head width.

The floor is one read and one write of q and k into preallocated outputs (``out.copy_(x)``), the
least any rotation must move; ``q.clone(); k.clone()`` is the floor of a pass that returns new
tensors (it pays for the allocation too), and ``x.neg_()`` of q and k that of an in-place pass.

posenc's cases, each for q and k:

* as users call it: ``Rope.rotate(q, k)`` (the scheme, its cached tables), :func:`posenc.kernels.rope`
  returning new tensors, and its inverse rotation (what :class:`~posenc.kernels.RopeFunction`'s
  backward runs), all through the default dispatch (:func:`posenc.kernels.backend_for`; each row
  records the backend it picked);
* into a preallocated ``out=`` and in place (:func:`posenc.kernels.rope_`) with each backend forced
  that takes the input (:func:`forced_backends`): ``compiled``, ``eager``, ``reference``; ``complex``
  for float32 interleaved pairs; ``triton`` on CUDA;
* the reference formula :func:`posenc.functional.apply_rope` itself.

Each peer runs in its own pair layout, with whatever tables it builds per call included (that is
how they are used): Hugging Face Llama (``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb``, half
pairs), torchtune ``RotaryPositionalEmbeddings`` (interleaved, on its ``[b, s, h, hd]`` layout),
rotary-embedding-torch ``rotate_queries_or_keys`` (interleaved), x-transformers
``RotaryEmbedding`` + ``apply_rotary_pos_emb`` (interleaved).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch

from .. import functional as F
from .. import kernels
from ..kernels import compiled, eager, triton
from .allocator import page_faults
from .timing import measure, measure_paired_many, synchronize

__all__ = ["bench_rope", "rope_peers", "forced_backends", "PEERS", "BACKEND_ORDER"]

Case = Callable[[], object]


def _hf(q, k, layout):
    if layout != "half":
        return None
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    h, L, hd = q.shape[1], q.shape[2], q.shape[3]
    config = LlamaConfig(hidden_size=h * hd, num_attention_heads=h, head_dim=hd, max_position_embeddings=L)
    rotary = LlamaRotaryEmbedding(config).to(q.device)
    position_ids = torch.arange(L, device=q.device)[None]  # [1, L]

    def run():
        cos, sin = rotary(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    return run


def _torchtune(q, k, layout):
    if layout != "interleaved":
        return None
    from torchtune.modules import RotaryPositionalEmbeddings

    rope = RotaryPositionalEmbeddings(dim=q.shape[-1], max_seq_len=q.shape[2]).to(q.device)
    qt, kt = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()  # its layout [b, L, h, hd]
    return lambda: (rope(qt), rope(kt))


def _rotary_embedding_torch(q, k, layout):
    if layout != "interleaved":
        return None
    from rotary_embedding_torch import RotaryEmbedding

    rope = RotaryEmbedding(dim=q.shape[-1]).to(q.device)
    return lambda: (rope.rotate_queries_or_keys(q), rope.rotate_queries_or_keys(k))


def _x_transformers(q, k, layout):
    if layout != "interleaved":
        return None
    from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

    rope = RotaryEmbedding(q.shape[-1]).to(q.device)
    t = torch.arange(q.shape[2], device=q.device)

    def run():
        freqs, scale = rope(t)
        return apply_rotary_pos_emb(q, freqs, scale), apply_rotary_pos_emb(k, freqs, scale)

    return run


PEERS: dict[str, Callable] = {
    "transformers": _hf,
    "torchtune": _torchtune,
    "rotary-embedding-torch": _rotary_embedding_torch,
    "x-transformers": _x_transformers,
}


def rope_peers(q, k, layout: str, *, with_skipped: bool = False):
    """The installed peers' RoPE for ``layout`` as zero-argument callables; with ``with_skipped``
    also ``{peer: why}`` for those that are not installed or fail to build or run (a peer's API
    drifts between versions: one broken peer must not end the whole benchmark)."""
    cases, skipped = {}, {}
    for name, build in PEERS.items():
        try:
            case = build(q, k, layout)
            if case is not None:
                case()  # the first call: an incompatible version fails here, not in the timing
        except ImportError as err:
            skipped[name] = f"not installed ({err.name or err}): pip install 'posenc[bench]'"
            continue
        except Exception as err:  # noqa: BLE001 - any failure of a third-party library: report, go on
            skipped[name] = f"failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            continue
        if case is not None:
            cases[name] = case
    return (cases, skipped) if with_skipped else cases


#: the order in which the forced backends are timed and listed (the compiled ones first: their first
#: calls compile); each that :data:`posenc.kernels.BACKENDS` has is timed where it serves the input
BACKEND_ORDER = ("triton", "compiled", "complex", "eager", "reference")


def forced_backends(q: torch.Tensor, cos: torch.Tensor, layout: str) -> tuple[str, ...]:
    """The backends the ``out=`` and in-place cases force: every one of :data:`posenc.kernels.BACKENDS`
    that takes ``q`` itself (a forced backend that does not hands the work to the eager one, which
    would be timed twice under two names): ``triton`` where it serves ``q`` (CUDA with Triton),
    ``complex`` for interleaved pairs it can view as complex numbers, the others everywhere."""
    takes = {"triton": triton.serves(q, cos), "complex": layout == "interleaved" and eager.complex_serves(q, cos)}
    return tuple(b for b in BACKEND_ORDER if b in kernels.BACKENDS and takes.get(b, True))


def _posenc_cases(
    q,
    k,
    cos,
    sin,
    layout,
    backends: Iterable[str] = ("compiled", "eager", "reference"),
) -> tuple[dict[str, Case], Callable[[], None]]:
    """posenc's cases, each returning its rotated q and k, and a function that resets the in-place
    cases' inputs (so that a check sees one rotation, not however many the warm-up made). The
    forced ``out=`` and in-place cases come first (the compiled ones compile at their first call),
    then the default dispatch, then the reference formula."""
    from ..schemes import create

    oq, ok = torch.empty_like(q), torch.empty_like(k)
    qi, ki = q.clone(), k.clone()  # rotated in place again and again: values stay bounded (a rotation)
    qf, kf = q.clone(), k.clone()  # the in-place floor's buffers: negated again and again
    scheme = create("rope", dim=q.shape[-1], layout=layout).to(q.device)

    def out_(backend: str) -> Case:
        return lambda: (
            kernels.rope(q, cos, sin, layout=layout, out=oq, backend=backend),
            kernels.rope(k, cos, sin, layout=layout, out=ok, backend=backend),
        )

    def in_place(backend: str) -> Case:
        return lambda: (
            kernels.rope_(qi, cos, sin, layout=layout, backend=backend),
            kernels.rope_(ki, cos, sin, layout=layout, backend=backend),
        )

    def reset() -> None:
        qi.copy_(q)
        ki.copy_(k)

    cases: dict[str, Case] = {
        "floor": lambda: (oq.copy_(q), ok.copy_(k)),
        "floor, new tensors": lambda: (q.clone(), k.clone()),
        "floor, in place": lambda: (qf.neg_(), kf.neg_()),
    }
    for backend in backends:
        cases[f"posenc out= ({backend})"] = out_(backend)
        cases[f"posenc in-place ({backend})"] = in_place(backend)
    cases.update(
        {
            "posenc Rope.rotate": lambda: scheme.rotate(q, k),
            "posenc new tensors": lambda: (
                kernels.rope(q, cos, sin, layout=layout),
                kernels.rope(k, cos, sin, layout=layout),
            ),
            "posenc backward": lambda: (
                kernels.rope(q, cos, sin, layout=layout, inverse=True),
                kernels.rope(k, cos, sin, layout=layout, inverse=True),
            ),
            "posenc reference apply_rope": lambda: (
                F.apply_rope(q, cos, sin, layout=layout),
                F.apply_rope(k, cos, sin, layout=layout),
            ),
        }
    )
    return cases, reset


#: the cases whose page faults each row records (``page_faults_per_call``)
FAULT_CASES = ("floor", "floor, new tensors", "posenc Rope.rotate", "posenc new tensors")

#: the cases that run the default dispatch (the others force a backend, or are no rotation by posenc)
AUTO_CASES = ("posenc Rope.rotate", "posenc new tensors", "posenc backward")


def _backend_of(name: str, auto: str) -> str | None:
    """The backend a posenc case runs: the one it forces, ``auto`` for the default dispatch."""
    if name in AUTO_CASES:
        return auto
    if name.startswith(("posenc out= (", "posenc in-place (")):
        return name[name.index("(") + 1 : -1]
    return "reference" if name == "posenc reference apply_rope" else None


def _peer_outputs(name: str, result: tuple) -> tuple:
    """A peer's (q, k) in posenc's ``[b, h, L, hd]`` (torchtune works on ``[b, L, h, hd]``)."""
    return tuple(t.transpose(1, 2) for t in result) if name == "peer torchtune" else tuple(result)


def _max_error(got: tuple, want: tuple) -> float:
    return max(float((g.double() - w.double()).abs().max()) for g, w in zip(got, want))


def _tolerance(x: torch.Tensor, *, peer: bool) -> float:
    """What a correct rotation of ``x`` may differ from the reference by: two units in the last
    place of ``x``'s dtype at its largest value (posenc reads the reference's own float32 tables);
    a peer forms its angles in float32 as well, which loses ~1.5e-7 of the angle at position L."""
    largest = float(x.abs().max())
    rounding = 2 * torch.finfo(x.dtype).eps * max(largest, 1.0)
    return rounding + (largest * (2e-6 + 1.5e-7 * x.shape[-2]) if peer else 0.0)


def bench_rope(
    lengths: Iterable[int] = (512, 2048, 8192),
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    layouts: Iterable[str] = ("half", "interleaved"),
    *,
    heads: int = 32,
    head_dim: int = 128,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    peers: bool = True,
    device: torch.device | str = "cpu",
    all_backends: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (case, L, dtype, layout): median ms, effective GB/s, ratio to the floor, load,
    and ``backend`` (the one a posenc case runs; for the default dispatch, what
    :func:`~posenc.kernels.backend_for` picked for q, also in every row as ``auto_backend``).

    Each case is timed in alternation with the floor, all cases of a shape round-robin
    (:func:`~posenc.bench.timing.measure_paired_many`);
    ``x_floor`` is the median of the per-round ratios, ``x_floor_best`` the fastest case round over
    the fastest floor round, and ``floor_ms_paired`` the floor's median over the same rounds.

    Also rows ``kind="one-time"`` for the cos/sin table build, each compiled case's first call
    (compile time) and ``Rope.rotate``'s first call (its table cache), reported apart from the
    steady state. ``device`` places q, k, the tables and the peers' modules (``"cuda"``: the
    Triton backend is timed too, and is what the default dispatch picks). ``all_backends=False``
    times ``out=`` and in place with the backend the dispatch picks only (a shorter run).
    """
    rows: list[dict] = []
    inv_freq, _ = F.rope_inv_freq(head_dim)
    inv_freq = inv_freq.to(device)
    for L in lengths:
        for dtype in dtypes:
            q = torch.randn(1, heads, L, head_dim, device=device).to(dtype)  # [1, h, L, hd]
            k = torch.randn(1, heads, L, head_dim, device=device).to(dtype)
            floor_bytes = 4 * q.numel() * q.element_size()  # read + write of q and k
            for layout in layouts:
                start = time.perf_counter()
                cos, sin = F.rope_cos_sin(L, inv_freq, layout=layout)  # [L, hd] float32
                synchronize(q.device)
                table_s = time.perf_counter() - start
                base = {"L": L, "dtype": str(dtype).removeprefix("torch."), "layout": layout}
                rows.append({**base, "case": "cos/sin table build", "kind": "one-time", "seconds": table_s})
                forced = forced_backends(q, cos, layout)
                if not all_backends:
                    forced = tuple(b for b in forced if b == kernels.backend_for(q, cos, layout))
                cases, reset = _posenc_cases(q, k, cos, sin, layout, forced)
                if peers:
                    found, skipped = rope_peers(q, k, layout, with_skipped=True)
                    cases.update({f"peer {n}": c for n, c in found.items()})
                    rows += [
                        {**base, "case": f"peer {n}", "kind": "skipped", "reason": why} for n, why in skipped.items()
                    ]
                rows += _first_calls(cases, q, cos, layout, base, progress)
                if not compiled.available():  # the forced compiled cases ran the eager backend: not timed as compiled
                    why = f"compilation is not available here ({compiled.error()}): the eager rows are what runs"
                    rows += [{**base, "case": n, "kind": "skipped", "reason": why} for n in cases if "(compiled)" in n]
                    cases = {n: c for n, c in cases.items() if "(compiled)" not in n}
                auto = kernels.backend_for(
                    q, cos, layout
                )  # after the first calls: a failed compile turns "compiled" off
                errors, limits = _check_cases(cases, reset, q, k, cos, sin, layout, base, progress)
                # the floors' and the new tensors' page faults: none where freed memory is reused
                faults = {n: page_faults(cases[n], calls=2) for n in FAULT_CASES if n in cases}
                if progress:
                    progress(f"rope L={L} {base['dtype']} {layout}: {len(cases)} cases, round-robin with the floor")
                floor = measure("floor", cases["floor"], num_threads=num_threads, min_run_time=min_run_time)
                # every case in alternation with the floor, all cases round-robin: the ratios
                # survive the machine's drift and its slow phases (see measure_paired_many)
                paired = measure_paired_many(
                    {n: f for n, f in cases.items() if n != "floor"},
                    cases["floor"],
                    num_threads=num_threads,
                    min_run_time=min_run_time,
                )
                for name in cases:
                    if name == "floor":
                        m, x_floor, x_best, floor_ms = floor, 1.0, 1.0, None
                    else:
                        p = paired[name]
                        m, x_floor, x_best, floor_ms = p.case, p.x_floor, p.x_floor_best, p.floor.median_s * 1e3
                    rows.append(
                        {
                            **base,
                            "case": name,
                            "kind": "steady",
                            "backend": _backend_of(name, auto),
                            "auto_backend": auto,
                            "median_ms": m.median_s * 1e3,
                            "iqr_ms": m.iqr_s * 1e3,
                            "runs": m.runs,
                            "gb_per_s": floor_bytes / m.median_s / 1e9,
                            "x_floor": x_floor,
                            "x_floor_best": x_best,
                            "floor_ms_paired": floor_ms,
                            "other_cpu": m.other_cpu,
                            "num_threads": num_threads,
                            "page_faults_per_call": faults.get(name),
                            "max_error": errors.get(name),
                            "tolerance": limits.get(name),
                        }
                    )
            del q, k
    return rows


def _first_calls(
    cases: dict[str, Case], q, cos, layout: str, base: dict, progress: Callable[[str], None] | None
) -> list[dict]:
    """Run the cases whose first call carries a one-time cost (a compile, a table cache) once,
    timed: one ``kind="one-time"`` row each (none for a compile that failed)."""
    rows = []
    auto = kernels.backend_for(q, cos, layout)
    for name, fn in cases.items():
        compiles = "(compiled)" in name or (name in AUTO_CASES and auto == "compiled")
        if not (compiles or name == "posenc Rope.rotate"):
            continue
        if progress:
            progress(f"rope L={base['L']} {base['dtype']} {layout}: first call of {name}")
        start = time.perf_counter()
        fn()
        synchronize(q.device)
        if compiles and not compiled.available():
            continue  # the compile failed: the call ran the eager backend, no compile time to report
        rows.append({**base, "case": name, "kind": "one-time", "seconds": time.perf_counter() - start})
    return rows


def _check_cases(
    cases: dict[str, Case],
    reset: Callable[[], None],
    q,
    k,
    cos,
    sin,
    layout: str,
    base: dict,
    progress: Callable[[str], None] | None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Every case's output against the reference (:func:`posenc.functional.apply_rope`; the
    backward against the inverse rotation) before anything is timed: the largest error and the
    tolerance per case.
    A posenc case outside :func:`_tolerance` raises (timing a wrong pass is worse than none); a
    peer's error is reported in its row (rotary-embedding-torch forms positions in the input's
    dtype: bfloat16 turns 257 into 256)."""
    if progress:
        progress(f"rope L={base['L']} {base['dtype']} {layout}: checking every case against apply_rope")
    with torch.no_grad():
        forward = (F.apply_rope(q, cos, sin, layout=layout), F.apply_rope(k, cos, sin, layout=layout))
        inverse = (F.apply_rope(q, cos, -sin, layout=layout), F.apply_rope(k, cos, -sin, layout=layout))
        errors, limits = {}, {}
        for name, fn in cases.items():
            if name.startswith("floor"):
                continue
            reset()
            got = _peer_outputs(name, fn()) if name.startswith("peer ") else fn()
            errors[name] = _max_error(got, inverse if "backward" in name else forward)
            limit = _tolerance(q, peer=name.startswith("peer "))
            limits[name] = limit
            if not name.startswith("peer ") and not errors[name] <= limit:
                raise RuntimeError(
                    f"{name} does not match apply_rope at L={base['L']} {base['dtype']} {layout}: "
                    f"largest error {errors[name]:.3g} (tolerance {limit:.3g}); not timing a wrong pass"
                )
    return errors, limits
