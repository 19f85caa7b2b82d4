"""RoPE at the experiments' training size (the training-step target): q and k of one qkv
projection ``[b, s, 3, h, hd] = [64, 32, 3, 4, 16]`` (float32, half pairs), each path timed in
alternation with the copy floor of the same views (q and k read once and written once into a
preallocated tensor), round-robin:
python benchmarks/rope_training_size.py [--quick] [--batch 64] [--device cuda] [--json rows.json].

Paths, each returning new q and k as a training forward does: ``Rope.rotate`` (the scheme, as
``posenc.Attention`` calls it), ``posenc.kernels.rope`` through the default dispatch and with each
backend forced (``triton`` where it serves the input), the reference formula ``F.apply_rope``,
and Hugging Face's ``apply_rotary_pos_emb`` when transformers is installed; beside them
``q.clone(); k.clone()``, the floor of a pass that returns new tensors. Each is checked against
the reference before it is timed."""

import argparse

from _common import finish, parse, parser, positive_int, set_threads


def run(args: argparse.Namespace) -> list[dict]:
    import torch

    import posenc
    from posenc import functional as F
    from posenc import kernels
    from posenc.bench.timing import measure_paired_many
    from posenc.kernels import triton

    b, s, h, hd = args.batch, 32, 4, 16
    proj = torch.randn(b, s, 3 * h * hd, device=args.device)  # the qkv projection [b, s, 3 h hd]
    q, k, _ = proj.view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)  # [b, h, s, hd] views
    both = proj.view(b, s, 3, h, hd)[:, :, :2].permute(2, 0, 3, 1, 4)  # [2, b, h, s, hd]: q and k
    cos, sin = F.rope_cos_sin(s, F.rope_inv_freq(hd)[0].to(args.device), layout="half")  # [s, hd]
    scheme = posenc.create("rope", dim=hd).to(args.device)
    out = torch.empty_like(both)
    want = (F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin))

    def floor() -> None:
        out.copy_(both)

    def forced(backend: str):
        return lambda: (kernels.rope(q, cos, sin, backend=backend), kernels.rope(k, cos, sin, backend=backend))

    auto = kernels.backend_for(q, cos, "half")
    fns = {
        "clone of q and k (the new-tensor floor)": lambda: (q.clone(), k.clone()),
        "Rope.rotate": lambda: scheme.rotate(q, k),
        f"kernels.rope (default dispatch: {auto})": lambda: (kernels.rope(q, cos, sin), kernels.rope(k, cos, sin)),
        **{
            f"kernels.rope (backend={name})": forced(name)
            for name in (("triton",) if triton.serves(q, cos) else ()) + ("compiled", "eager", "reference")
        },
        "reference F.apply_rope": lambda: (F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin)),
    }
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        fns["transformers apply_rotary_pos_emb"] = lambda: apply_rotary_pos_emb(q, k, cos[None], sin[None])
    except ImportError:
        pass
    for name, fn in fns.items():  # every path gives the reference's numbers before it is timed
        if not name.startswith("clone"):
            for got, ref in zip(fn(), want):
                torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)
    paired = measure_paired_many(fns, floor, num_threads=args.threads, min_run_time=0.05 if args.quick else 0.5)
    return [
        {
            "case": name,
            "shape": [2, b, h, s, hd],
            "threads": args.threads,
            "device": args.device,
            "median_us": p.case.median_s * 1e6,
            "floor_us": p.floor.median_s * 1e6,
            "x_floor": p.x_floor,
            "x_floor_best": p.x_floor_best,
            "rounds": p.rounds,
            "other_cpu": p.case.other_cpu,
        }
        for name, p in paired.items()
    ]


if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument("--batch", type=positive_int, default=64, help="batch size (default 64, the experiments')")
    args = parse(p)
    set_threads(args.threads)
    finish(run(args), args)
