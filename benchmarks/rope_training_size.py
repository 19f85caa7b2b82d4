"""RoPE at the experiments' training size (issue 6, the training-step target): q and k of one qkv
projection ``[b, s, 3, h, hd] = [64, 32, 3, 4, 16]`` (float32, half pairs), each path timed in
alternation with the copy floor of the same views (q and k read once and written once into a
preallocated tensor), round-robin, CPU only:
python benchmarks/rope_training_size.py [--quick] [--batch 64] [--json rows.json].

Paths: the C loop (``posenc.functional._rope_native``, into a new tensor and in place inside the
projection as ``posenc.Attention`` does), the ATen swap pass (what runs without a compiler), the
reference formula ``F.apply_rope``, and Hugging Face's ``apply_rotary_pos_emb`` when transformers is
installed. Each is checked against the reference before it is timed."""

import argparse

from _common import finish, parse, parser, positive_int, set_threads


def run(args: argparse.Namespace) -> list[dict]:
    import torch

    from posenc import functional as F
    from posenc.bench.timing import measure_paired_many
    from posenc.functional import _rope_eager, _rope_native
    from posenc.functional.fast_rope import fast_apply_rope_fused_

    b, s, h, hd = args.batch, 32, 4, 16
    proj = torch.randn(b, s, 3 * h * hd)  # the qkv projection [b, s, 3 h hd]
    q, k, _ = proj.view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)  # [b, h, s, hd] views
    both = proj.view(b, s, 3, h, hd)[:, :, :2].permute(2, 0, 3, 1, 4)  # [2, b, h, s, hd]: q and k
    cos, sin = F.rope_cos_sin(s, F.rope_inv_freq(hd)[0], layout="half")  # [s, hd]
    cos_h, sin_h = cos[:, : hd // 2], sin[:, : hd // 2]
    out = torch.empty_like(both)
    want = torch.stack((F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin)))

    def floor() -> None:
        out.copy_(both)

    fns = {
        "C loop, into a new tensor": lambda: _rope_native.rotate_half(both, cos_h, sin_h, torch.empty_like(both), False),
        "ATen swap pass (no compiler)": lambda: _rope_eager._eager(both, cos_h, sin_h, torch.empty_like(both), "half", False),
        "reference F.apply_rope": lambda: (F.apply_rope(q, cos, sin), F.apply_rope(k, cos, sin)),
    }
    if not _rope_native.available():
        del fns["C loop, into a new tensor"]
    else:
        work = proj.clone()

        def in_projection() -> None:  # rotates the projection in place again at each call (norms kept)
            fast_apply_rope_fused_(work, cos, sin, h, h, hd)
        fns["C loop, in place in the projection"] = in_projection
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        fns["transformers apply_rotary_pos_emb"] = lambda: apply_rotary_pos_emb(q, k, cos[None], sin[None])
    except ImportError:
        pass
    checks = {  # every path gives the reference's numbers before it is timed
        "C loop, into a new tensor": lambda: _rope_native.rotate_half(both, cos_h, sin_h, out, False) and out,
        "ATen swap pass (no compiler)": lambda: (_rope_eager._eager(both, cos_h, sin_h, out, "half", False), out)[1],
        "reference F.apply_rope": lambda: torch.stack(fns["reference F.apply_rope"]()),
        "C loop, in place in the projection": lambda: torch.stack(fast_apply_rope_fused_(proj.clone(), cos, sin, h, h, hd)[:2]),
        "transformers apply_rotary_pos_emb": lambda: torch.stack(fns["transformers apply_rotary_pos_emb"]()),
    }
    for name in fns:
        torch.testing.assert_close(checks[name](), want, atol=1e-6, rtol=1e-5)
    paired = measure_paired_many(fns, floor, num_threads=args.threads, min_run_time=0.05 if args.quick else 0.5)
    return [{"case": name, "shape": [2, b, h, s, hd], "threads": args.threads, "median_us": p.case.median_s * 1e6,
             "floor_us": p.floor.median_s * 1e6, "x_floor": p.x_floor, "x_floor_best": p.x_floor_best,
             "rounds": p.rounds, "other_cpu": p.case.other_cpu} for name, p in paired.items()]


if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument("--batch", type=positive_int, default=64, help="batch size (default 64, the experiments')")
    args = parse(p)
    if args.device != "cpu":
        p.error("--device: the C loop is the CPU's (a GPU takes the Triton kernel, see rope.py); takes cpu")
    set_threads(args.threads)
    finish(run(args), args)
