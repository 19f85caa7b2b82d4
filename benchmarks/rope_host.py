"""Host time per RoPE call (issue 6): the compiled pass on a small input, call plans on and off in
alternation: python benchmarks/rope_host.py [--device cuda] [--quick]."""

from _common import finish, parse, parser, set_threads

from posenc.bench import bench_rope_host

if __name__ == "__main__":
    args = parse(parser(__doc__))
    set_threads(args.threads)
    finish(bench_rope_host(rounds=3 if args.quick else 9, calls=100 if args.quick else 500, device=args.device,
                           progress=print), args)
