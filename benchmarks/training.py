"""Training-step overhead of each scheme against no encoding (issue 6, item 5)."""

from _common import finish, parse, parser, set_threads

from posenc.bench import bench_training

if __name__ == "__main__":
    args = parse(parser(__doc__))
    set_threads(args.threads)
    finish(
        bench_training(
            num_threads=args.threads, min_run_time=0.1 if args.quick else 2.0, device=args.device, progress=print
        ),
        args,
    )
