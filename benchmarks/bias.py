"""T5/ALiBi bias construction against filling a preallocated tensor (issue 6, item 3)."""

from _common import finish, parse, parser, set_threads

from posenc.bench import bench_bias

if __name__ == "__main__":
    args = parse(parser(__doc__))
    set_threads(args.threads)
    lengths = (512,) if args.quick else (2048,)
    finish(
        bench_bias(
            lengths,
            num_threads=args.threads,
            min_run_time=0.05 if args.quick else 0.5,
            device=args.device,
            progress=print,
        ),
        args,
    )
