"""Bias construction and attention with each bias scheme, timed; FlexAttention's memory at long L.

Shape legend: ``h`` heads, ``L`` sequence, ``hd`` head width.

Bias build: the floor is filling a preallocated ``[h, L, L]`` float32 tensor; posenc's Toeplitz
build (into a preallocated tensor, and through the scheme with its cache) is set beside the
reference formula and the peers: Hugging Face ``T5Attention.compute_bias`` (as returned, a permuted
view, and made contiguous) and x-transformers ``AlibiPositionalBias``.

Long sequences: :func:`bench_flex_memory` runs ``posenc.Attention`` with ALiBi through
FlexAttention and, beside it, SDPA with a materialised bias, each in a fresh subprocess so that its
peak resident memory (``ru_maxrss``) is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .. import functional as F
from .timing import measure, measure_paired_many

__all__ = [
    "bench_bias",
    "bench_bias_build",
    "bench_bias_memory",
    "bench_attention",
    "bench_flex_memory",
    "PARAMETER_ONLY",
    "FLEX_SCHEMES",
]

#: The bias schemes whose bias is a function of positions and parameters alone (issue 26)
PARAMETER_ONLY = ("alibi", "t5", "kerple", "sandwich", "fire", "dpb")
#: The schemes whose FlexAttention memory issue 26 bounds (1 GiB at L = 16384, 8 heads)
FLEX_SCHEMES = ("kerple", "sandwich", "fire", "forgetting")


#: what installs the peers of the bias section (the same extra as the RoPE peers')
PEERS_EXTRA = "pip install 'posenc[bench]'"


def _peer_bias_cases(
    h: int, L: int, device: torch.device | str = "cpu"
) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    """The installed peers' bias builds as zero-argument callables, and ``{case: why}`` for the
    peers that are not installed (named with the extra that installs them, as the RoPE peers are)."""
    cases: dict[str, Callable[[], object]] = {}
    skipped: dict[str, str] = {}
    try:
        from transformers import T5Config
        from transformers.models.t5.modeling_t5 import T5Attention

        config = T5Config(
            d_model=h * 64, d_kv=64, num_heads=h, relative_attention_num_buckets=32, relative_attention_max_distance=128
        )
        t5 = T5Attention(config, has_relative_attention_bias=True).to(device)
        t5.eval()
        cases["peer transformers T5 compute_bias (view)"] = lambda: t5.compute_bias(L, L)
        cases["peer transformers T5 compute_bias (contiguous)"] = lambda: t5.compute_bias(L, L).contiguous()
    except ImportError as err:
        skipped["peer transformers T5 compute_bias"] = f"not installed ({err.name or err}): {PEERS_EXTRA}"
    try:
        from x_transformers.x_transformers import AlibiPositionalBias

        alibi = AlibiPositionalBias(heads=h, total_heads=h).to(device)

        def build() -> object:
            alibi.bias = None  # it keeps the last bias and slices later calls from it: time the build
            return alibi(L, L)

        cases["peer x-transformers ALiBi (build)"] = build
    except ImportError as err:
        skipped["peer x-transformers ALiBi (build)"] = f"not installed ({err.name or err}): {PEERS_EXTRA}"
    return cases, skipped


def bench_bias(
    lengths: Iterable[int] = (2048,),
    *,
    heads: int = 32,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    peers: bool = True,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (case, L): median ms and the ratio to filling a preallocated ``[h, L, L]``; with
    ``peers``, a ``kind="skipped"`` row per peer that is not installed, its reason naming the extra."""
    import posenc

    rows = []
    for L in lengths:
        out = torch.empty(heads, L, L, device=device)  # [h, L, L]
        slopes = F.alibi_slopes(heads).to(device)
        table = torch.randn(32, heads, device=device)
        alibi = posenc.create("alibi", num_heads=heads, bidirectional=False).to(device)
        t5 = posenc.create("t5", num_heads=heads, bidirectional=True).to(device)
        pos = torch.arange(L, device=device)
        cases: dict[str, Callable[[], object]] = {
            "floor (fill preallocated)": lambda: out.fill_(1.0),
            "posenc ALiBi Toeplitz out=": lambda: F.alibi_bias_range(slopes, L, L, out=out),
            "posenc T5 Toeplitz out=": lambda: F.t5_bias_range(table, L, L, out=out),
            "posenc ALiBi scheme (cached)": lambda: alibi.bias(pos, pos),
            "posenc ALiBi reference formula": lambda: F.alibi_bias(slopes, pos, pos),
            "posenc T5 reference formula": lambda: (
                t5.relative_attention_bias(F.t5_relative_bucket(F.relative_positions(pos, pos)))
                .permute(2, 0, 1)
                .contiguous()
            ),
        }
        missing: dict[str, str] = {}
        if peers:
            found, missing = _peer_bias_cases(heads, L, device)
            cases.update(found)
        floor_name = next(iter(cases))
        if progress:
            progress(f"bias L={L}: {len(cases)} cases, round-robin with the floor")
        with torch.no_grad():  # each case in alternation with the floor, all round-robin, as the RoPE cases
            floor = measure(floor_name, cases[floor_name], num_threads=num_threads, min_run_time=min_run_time)
            paired = measure_paired_many(
                {n: f for n, f in cases.items() if n != floor_name},
                cases[floor_name],
                num_threads=num_threads,
                min_run_time=min_run_time,
            )
        rows += [_row(L, heads, name, floor, paired.get(name), num_threads) for name in cases]
        rows += [{"L": L, "heads": heads, "case": n, "kind": "skipped", "reason": why} for n, why in missing.items()]
        cases, out = None, None  # the [h, L, L] buffer goes before the next length allocates its own
    return rows


def _row(L: int, heads: int, name: str, floor: Any, p: Any, num_threads: int) -> dict[str, Any]:
    """One table row: the case ``name``'s timing (``p``, paired with the floor; the floor itself
    where ``p`` is None) and its ratios to the floor."""
    m = floor if p is None else p.case
    return {
        "L": L,
        "heads": heads,
        "case": name,
        "kind": "steady",
        "median_ms": m.median_s * 1e3,
        "iqr_ms": m.iqr_s * 1e3,
        "runs": m.runs,
        "x_floor": 1.0 if p is None else p.x_floor,
        "x_floor_best": 1.0 if p is None else p.x_floor_best,
        "floor_ms_paired": None if p is None else p.floor.median_s * 1e3,
        "other_cpu": m.other_cpu,
        "num_threads": num_threads,
    }


def _bias_scheme(name: str, heads: int, bidirectional: bool, **options: object) -> torch.nn.Module:
    """A parameter-only bias scheme with ``heads`` heads, its defaults otherwise (sandwich: head
    width 64; the ``bidirectional`` flag where the scheme has one) and ``options``."""
    import posenc

    options["num_heads"] = heads
    if name == "sandwich":
        options["dim"] = 64
    if name in ("alibi", "t5", "kerple"):
        options["bidirectional"] = bidirectional
    return posenc.create(name, **options).eval()


def bias_builders(
    module: torch.nn.Module, positions: torch.Tensor
) -> tuple[Callable[[torch.Tensor | None], torch.Tensor], Callable[[], torch.Tensor]]:
    """``(build, reference)`` for a parameter-only scheme: ``build(out)`` the uncached build of
    :mod:`posenc.kernels.bias` (into ``out``, or a new tensor when None), ``reference()`` the
    scheme's :meth:`bias` as called today (with its cache dropped first where it has one)."""
    from ..kernels import bias as kb

    if module.name == "fire":
        from ..schemes.fire import fire_bias

        def build(out: torch.Tensor | None) -> torch.Tensor:
            return fire_bias(module.mlp, module.c, module.threshold(), module.config.eps, positions, positions, out=out)

        return build, lambda: module.bias(positions, positions)

    def uncached() -> torch.Tensor:
        # the bias the scheme builds when its cache misses (another length, new parameters): the
        # same Toeplitz build as kernels.bias.build_bias without out=, into a new tensor
        return kb.build_bias(module, positions, positions)

    return (lambda out: kb.build_bias(module, positions, positions, out=out)), uncached


def bench_bias_build(
    lengths: Iterable[int] = (2048,),
    *,
    heads: int = 32,
    schemes: Iterable[str] = PARAMETER_ONLY,
    bidirectional: bool = False,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Each parameter-only bias ``[h, L, L]`` built without a cache, against filling a preallocated
    tensor of that size (issue 26's target: at most 2x).

    Cases per scheme: ``out=`` (the build of :mod:`posenc.kernels.bias` into a preallocated tensor)
    and ``new tensor`` (the same build allocating its result: what a cache miss costs; FIRE's
    ``new tensor`` row is ``FIRE.bias`` as the scheme computes it now). Floors: ``fill_(1.0)`` and
    ``copy_`` from another tensor of the size, both preallocated. Every case is timed round-robin
    in alternation with the fill (:func:`measure_paired_many`); ``x_floor`` is the median of the
    per-round ratios, ``x_floor_best`` fastest over fastest."""
    schemes = list(schemes)
    unknown = sorted(set(schemes) - set(PARAMETER_ONLY))
    if unknown:
        raise ValueError(f"parameter-only bias schemes are {', '.join(PARAMETER_ONLY)}; got {unknown}")
    rows = []
    for L in lengths:
        out = torch.empty(heads, L, L, device=device)  # [h, L, L]
        source = torch.ones(heads, L, L, device=device)  # [h, L, L], for the copy floor
        pos = torch.arange(L, device=device)
        cases: dict[str, Callable[[], object]] = {
            "floor fill_ (preallocated)": lambda: out.fill_(1.0),
            "floor copy_ (preallocated)": lambda: out.copy_(source),
        }
        for name in schemes:
            build, reference = bias_builders(_bias_scheme(name, heads, bidirectional).to(device), pos)
            cases[f"{name} out="] = lambda build=build: build(out)
            cases[f"{name} new tensor" if name != "fire" else "fire FIRE.bias (now)"] = reference
            if name == "fire":
                cases["fire new tensor"] = lambda build=build: build(None)
                # the threshold at L (init_L = L): every row Toeplitz, as FIRE's bias is below its threshold
                below, _ = bias_builders(_bias_scheme(name, heads, bidirectional, init_L=float(L)).to(device), pos)
                cases["fire out= (threshold L)"] = lambda build=below: build(out)
        floor_name = next(iter(cases))
        if progress:
            progress(f"bias build L={L}: {len(cases)} cases, round-robin with the fill")
        with torch.no_grad():
            paired = measure_paired_many(
                {n: f for n, f in cases.items() if n != floor_name},
                cases[floor_name],
                num_threads=num_threads,
                min_run_time=min_run_time,
            )
        floor = min((p.floor for p in paired.values()), key=lambda m: m.median_s)
        for name in cases:
            scheme, _, build = name.partition(" ")
            row = _row(L, heads, name, floor, paired.get(name), num_threads)
            row.update(scheme=None if scheme == "floor" else scheme, build=build, bidirectional=bidirectional)
            row["target_x_floor"] = 2.0 if scheme != "floor" and build.startswith("out=") else None
            rows.append(row)
        cases, out, source = None, None, None  # free the [h, L, L] buffers before the next length
    return rows


def bench_bias_memory(
    L: int = 16384,
    *,
    schemes: Iterable[str] = FLEX_SCHEMES,
    heads: int = 8,
    head_dim: int = 64,
    num_threads: int = 1,
    device: torch.device | str = "cpu",
    repeats: int = 1,
    timeout: float = 1800,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Causal FlexAttention forward with each scheme at length ``L`` (issue 26's target: under
    1 GiB of process memory at L = 16384, 8 heads), each in a fresh process
    (:func:`bench_flex_memory`): the peak RSS during the timed calls (``peak_rss_mib``), the RSS
    before them (``baseline_rss_mib``: imports, model, input) and the difference."""
    rows = []
    for scheme in schemes:
        if progress:
            progress(f"FlexAttention memory: {scheme} at L={L} (a subprocess; compiles first)")
        for row in bench_flex_memory(
            L,
            heads=heads,
            head_dim=head_dim,
            modes=("flex",),
            num_threads=num_threads,
            device=device,
            repeats=repeats,
            timeout=timeout,
            scheme=scheme,
        ):
            row["target_mib"] = 1024
            rows.append(row)
    return rows


def bench_attention(
    schemes: Iterable[str] = ("none", "rope", "alibi", "t5", "sinusoidal"),
    *,
    L: int = 1024,
    dim: int = 512,
    heads: int = 8,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """``posenc.Attention`` forward (no grad, causal) per scheme at length ``L``; ratio to ``none``.

    Every scheme is timed in alternation with ``none``, round-robin (:func:`measure_paired_many`):
    ``x_none`` is the median of the per-round ratios, ``x_none_best`` the fastest round of the
    scheme over the fastest of ``none``. Timed one after another, the host's slow phases had put
    rope at 0.88x no encoding."""
    import posenc

    schemes = list(schemes)
    x = torch.randn(1, L, dim, device=device)  # [1, L, d]
    names = list(dict.fromkeys(("none", *schemes)))  # none first: the baseline of every ratio
    calls = {}
    for name in names:
        encoding = name if name in ("none", "rope", "alibi", "t5") else posenc.create(name, dim=dim)
        attn = posenc.Attention(dim, heads, encoding=encoding, causal=True).to(device).eval()
        calls[name] = torch.no_grad()(lambda attn=attn: attn(x))
    if progress:
        progress(f"attention L={L}: {', '.join(calls)} (round-robin against none)")
    none = calls.pop("none")
    paired = measure_paired_many(calls, none, num_threads=num_threads, min_run_time=min_run_time)
    floors = [p.floor for p in paired.values()]
    rows = []
    for name in names if "none" in schemes else names[1:]:
        if name == "none":
            m = (
                min(floors, key=lambda f: f.median_s)
                if floors
                else measure("none", none, num_threads=num_threads, min_run_time=min_run_time)
            )
            ratio = best = 1.0
        else:
            p = paired[name]
            m, ratio, best = p.case, p.x_floor, p.x_floor_best
        rows.append(
            {
                "L": L,
                "heads": heads,
                "case": f"Attention {name}",
                "kind": "steady",
                "median_ms": m.median_s * 1e3,
                "iqr_ms": m.iqr_s * 1e3,
                "runs": m.runs,
                "x_none": ratio,
                "x_none_best": best,
                "other_cpu": m.other_cpu,
                "num_threads": num_threads,
            }
        )
    return rows


_CHILD = r"""
import json, resource, statistics, sys, time, torch
import torch.nn.functional as nnf
L, heads, hd, mode, threads, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
repeats, scheme = int(sys.argv[7]), sys.argv[8]
torch.set_num_threads(threads)
cuda = device.startswith("cuda")
def sync():
    if cuda:
        torch.cuda.synchronize()
torch.manual_seed(0)
import posenc
from posenc import flex
from posenc.bench.timing import CpuProbe
dim = heads * hd
x = torch.randn(1, L, dim, device=device)
attn = posenc.Attention(dim, heads, encoding=scheme, causal=True).to(device).eval()
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def rss_kib():  # resident now: the baseline after imports, the model and x
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None
def reset_peak():  # Linux: restart the peak RSS (VmHWM) here, so it covers the timed calls, not the warm-up
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
def peak_kib():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
probe = CpuProbe()
result = {"L": L, "heads": heads, "head_dim": hd, "mode": mode, "scheme": scheme}
baseline = rss_kib()
result["baseline_rss_mib"] = None if baseline is None else baseline / 1024
with torch.no_grad():
    if mode == "flex":
        flex.set_mode("always")
        start = time.perf_counter(); attn(x[:, :256]); sync(); result["first_call_s"] = time.perf_counter() - start
        start = time.perf_counter(); attn(x); sync(); result["first_call_at_L_s"] = time.perf_counter() - start
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        def call():
            attn(x)
    else:
        q, k, v = attn.qkv(x).view(1, L, 3, heads, hd).permute(2, 0, 3, 1, 4)  # 3 x [1, h, L, hd]

        def call():
            # the cheapest materialised form: the Toeplitz-built bias [h, L, L] with -inf filled in place
            bias = posenc.functional.alibi_bias_range(attn.encoding.slopes.float(), L, L)
            bias.masked_fill_(torch.ones(L, L, dtype=torch.bool, device=device).triu_(1), float("-inf"))
            nnf.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    window = reset_peak()
    probe.start()
    times = []
    for _ in range(repeats):
        start = time.perf_counter(); call(); sync(); times.append(time.perf_counter() - start)
    result["other_cpu"] = probe.stop()
    result["seconds_each"] = times
    result["seconds"] = statistics.median(times)
result["peak_rss_mib"] = peak_kib() / 1024  # of the whole process, during the timed calls where window
result["peak_rss_window"] = "timed calls" if window else "process lifetime"
result["peak_rss_before_mib"] = base_rss / 1024
if baseline is not None:  # what attention itself adds over the process after imports, model and input
    result["peak_rss_over_baseline_mib"] = result["peak_rss_mib"] - result["baseline_rss_mib"]
if cuda:  # the accelerator's memory: what the bias and the scores take there
    result["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
print(json.dumps(result))
"""


def _available_bytes(device: torch.device | str = "cpu") -> int | None:
    """Free memory where the bias would live: the accelerator's, or the host's ``MemAvailable``."""
    if torch.device(device).type == "cuda":
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def bench_flex_memory(
    L: int = 16384,
    *,
    heads: int = 8,
    head_dim: int = 64,
    modes: Iterable[str] = ("flex", "sdpa"),
    num_threads: int = 1,
    device: torch.device | str = "cpu",
    repeats: int = 3,
    timeout: float = 900,
    scheme: str = "alibi",
) -> list[dict]:
    """Causal attention with ``scheme`` (ALiBi by default) at length ``L``: FlexAttention vs SDPA
    with a materialised bias (ALiBi only; the other schemes run FlexAttention alone).

    Each mode runs in its own Python process; a row holds the median of ``repeats`` timed calls
    (``seconds``; each in ``seconds_each``), the peak RSS of that process during the timed calls
    (``peak_rss_window``: Linux restarts the peak there; elsewhere it is the process lifetime's), on
    CUDA the peak of allocated GPU memory (``peak_gpu_mib``), and the first-call (compile) time. SDPA on CPU materialises the scores beside the bias (~3 x ``h L^2`` float32:
    26 GB at L = 16384, 8 heads), so it is skipped, with a row saying so, when the machine does not
    have that much memory available: the out-of-memory killer would pick a process, maybe not ours.
    """
    modes = list(modes)
    unknown = sorted(set(modes) - {"flex", "sdpa"})
    if unknown or not modes:
        raise ValueError(f"flex benchmark modes are flex and sdpa; got {unknown or 'none'}")
    if scheme != "alibi" and "sdpa" in modes:
        raise ValueError(f"the sdpa mode materialises ALiBi's bias; run {scheme!r} with modes=('flex',)")
    if not all(isinstance(v, int) and v > 0 for v in (L, heads, head_dim, repeats)):
        raise ValueError(
            f"L, heads, head_dim and repeats must be positive integers; got {L}, {heads}, {head_dim}, {repeats}"
        )
    rows = []
    for mode in modes:
        need = 3 * heads * L * L * 4
        free = _available_bytes(device)
        if mode == "sdpa" and free is not None and need > 0.8 * free:
            rows.append(
                {
                    "L": L,
                    "heads": heads,
                    "mode": mode,
                    "scheme": scheme,
                    "error": f"skipped: needs ~{need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB available",
                }
            )
            continue
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _CHILD,
                    str(L),
                    str(heads),
                    str(head_dim),
                    mode,
                    str(num_threads),
                    str(device),
                    str(repeats),
                    scheme,
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:  # the child is killed; the row says so and the run goes on
            rows.append(
                {"L": L, "heads": heads, "mode": mode, "scheme": scheme, "error": f"timed out after {timeout:.0f} s"}
            )
            continue
        if proc.returncode != 0:
            rows.append(
                {
                    "L": L,
                    "heads": heads,
                    "mode": mode,
                    "scheme": scheme,
                    "error": f"exit {proc.returncode}: " + " ".join(proc.stderr.strip().splitlines()[-1:]),
                }
            )
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows
