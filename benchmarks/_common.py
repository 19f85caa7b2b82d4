"""Shared argument handling of the benchmark scripts: threads, JSON output, printing rows."""

from __future__ import annotations

import argparse
import json


def positive_ints(text: str) -> tuple[int, ...]:
    """``"2048,8192"`` -> ``(2048, 8192)``; anything else is a usage error naming the value."""
    try:
        values = tuple(dict.fromkeys(int(v) for v in text.split(",") if v.strip()))  # each once
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"takes positive integers separated by commas, e.g. 2048,8192; got {text!r}")
    return values


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"takes a positive integer; got {text!r}")
    return value


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads and Timer num_threads")
    p.add_argument("--quick", action="store_true", help="small sizes, short timings")
    p.add_argument("--json", default=None, help="write the rows to this JSON file")
    p.add_argument("--device", default="cpu", help="where the tensors live: cpu, cuda, cuda:1, ...")
    return p


def parse(p: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, with ``--device`` checked: a clear error (exit 2), not a traceback."""
    from posenc.bench.report import check_output_path
    from posenc.bench.timing import resolve_device

    args = p.parse_args()
    try:
        resolve_device(args.device)
    except ValueError as err:
        p.error(str(err))
    if args.json:  # before the run: a bad path should not cost a full benchmark
        try:
            check_output_path(args.json)
        except ValueError as err:
            p.error(f"--json: {err}")
    return args


def finish(rows: list[dict], args: argparse.Namespace) -> None:
    for row in rows:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    if args.json:
        from posenc.bench.report import write_output

        write_output(args.json, json.dumps(rows, indent=1))


def set_threads(n: int) -> None:
    """torch's intra-op threads (set ``OMP_NUM_THREADS`` before Python starts to size OpenMP's own
    pool too: once torch is imported, changing the variable has no effect)."""
    import torch

    torch.set_num_threads(n)
