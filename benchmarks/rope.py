"""RoPE against the floor and the peers (issue 6, item 1): python benchmarks/rope.py [--quick]."""

from _common import finish, parse, parser, positive_ints, set_threads

from posenc.bench import bench_rope

if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument(
        "--lengths",
        type=positive_ints,
        default=None,
        help="sequence lengths, e.g. 2048,8192 (default 512,2048,8192; 512 with --quick)",
    )
    args = parse(p)
    set_threads(args.threads)
    lengths = args.lengths or ((512,) if args.quick else (512, 2048, 8192))
    finish(
        bench_rope(
            lengths,
            num_threads=args.threads,
            min_run_time=0.05 if args.quick else 0.5,
            device=args.device,
            progress=print,
        ),
        args,
    )
