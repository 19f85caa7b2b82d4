"""The eager half-pair RoPE pass's cache step (issue 6, the uncompiled fallback): q and k
``[1, 32, L, 128]`` into ``out=`` with ``compile=False`` for several steps (bytes of rows of one
head per thread, ``posenc.functional._rope_eager._EAGER_HALF_STEP_BYTES``), each timed in
alternation with the copy floor, round-robin, beside the C loop (``posenc.functional._rope_native``:
what ``compile="auto"`` falls back to where Inductor cannot compile but a C++ compiler works):
python benchmarks/rope_eager_step.py [--quick] [--dtype bfloat16]."""

import argparse

from _common import finish, parse, parser, positive_ints, set_threads


def run(args: argparse.Namespace) -> list[dict]:
    import torch

    from posenc import functional as F
    from posenc.bench.timing import measure_paired_many
    from posenc.functional import _rope_eager, _rope_native

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    default = _rope_eager._EAGER_HALF_STEP_BYTES
    rows = []
    try:
        for L in args.lengths:
            q, k = (torch.randn(1, 32, L, 128).to(dtype) for _ in range(2))
            oq, ok = torch.empty_like(q), torch.empty_like(k)
            cos, sin = F.rope_cos_sin(L, F.rope_inv_freq(128)[0], layout="half")

            def case(step: int):
                def fn() -> None:
                    _rope_eager._EAGER_HALF_STEP_BYTES = step
                    F.fast_apply_rope(q, cos, sin, out=oq, compile=False)
                    F.fast_apply_rope(k, cos, sin, out=ok, compile=False)
                return fn

            def floor() -> None:
                oq.copy_(q)
                ok.copy_(k)

            fns = {f"{kib} KiB": case(kib << 10) for kib in args.steps}
            n = cos.shape[-1] // 2
            if _rope_native.available():  # float32, or bfloat16 with the float32 tables
                def c_loop() -> None:
                    _rope_native.rotate_half(q, cos[:, :n], sin[:, :n], oq, False)
                    _rope_native.rotate_half(k, cos[:, :n], sin[:, :n], ok, False)
                fns["C loop"] = c_loop
            for name, fn in fns.items():  # each case gives the reference's numbers before it is timed
                fn()
                torch.testing.assert_close(oq, F.apply_rope(q, cos, sin, layout="half"), atol=1e-5, rtol=1e-2)
            paired = measure_paired_many(fns, floor, num_threads=args.threads,
                                         min_run_time=0.05 if args.quick else 0.5)
            for name, p in paired.items():
                rows.append({"L": L, "dtype": args.dtype, "step_per_thread": name, "threads": args.threads,
                             "median_ms": p.case.median_s * 1e3, "x_floor": p.x_floor,
                             "x_floor_best": p.x_floor_best, "rounds": p.rounds, "other_cpu": p.case.other_cpu,
                             "default": name != "C loop" and int(name.split()[0]) << 10 == default})
    finally:
        _rope_eager._EAGER_HALF_STEP_BYTES = default
    return rows


if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument("--lengths", type=positive_ints, default=None, help="sequence lengths (default 2048,8192; 512 with --quick)")
    p.add_argument("--steps", type=positive_ints, default=(64, 128, 256, 512, 1024, 2048),
                   help="KiB per step per thread, e.g. 128,256,512")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = parse(p)
    if args.device != "cpu":
        p.error("--device: the cache step is the CPU's (on a GPU the eager pass runs whole-tensor kernels); takes cpu")
    args.lengths = args.lengths or ((512,) if args.quick else (2048, 8192))
    set_threads(args.threads)
    finish(run(args), args)
