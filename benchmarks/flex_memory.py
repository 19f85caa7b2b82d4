"""Causal ALiBi through FlexAttention vs SDPA with a materialised bias: time and peak memory
(issue 6, item 3). The SDPA side needs ~26 GB at the default L = 16384, 8 heads (skipped if unavailable)."""

from _common import finish, parse, parser, positive_int, set_threads

from posenc.bench import bench_flex_memory

if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument(
        "--length", type=positive_int, default=None, help="sequence length (default 16384; 1024 with --quick)"
    )
    p.add_argument("--modes", default="flex,sdpa", help="comma-separated: flex, sdpa")
    p.add_argument("--repeats", type=positive_int, default=3, help="timed calls per mode; the row holds their median")
    args = parse(p)
    set_threads(args.threads)
    length = args.length or (1024 if args.quick else 16384)
    try:
        rows = bench_flex_memory(
            length, modes=args.modes.split(","), num_threads=args.threads, device=args.device, repeats=args.repeats
        )
    except ValueError as err:
        p.error(str(err))
    finish(rows, args)
