"""Shared argument handling of the benchmark scripts: threads, JSON output, printing rows."""

from __future__ import annotations

import argparse
import json
import os


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", type=int, default=1, help="torch threads and Timer num_threads")
    p.add_argument("--quick", action="store_true", help="small sizes, short timings")
    p.add_argument("--json", default=None, help="write the rows to this JSON file")
    p.add_argument("--device", default="cpu", help="where the tensors live: cpu, cuda, cuda:1, ...")
    return p


def parse(p: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, with ``--device`` checked: a clear error (exit 2), not a traceback."""
    from posenc.bench.timing import resolve_device

    args = p.parse_args()
    try:
        resolve_device(args.device)
    except ValueError as err:
        p.error(str(err))
    return args


def finish(rows: list[dict], args: argparse.Namespace) -> None:
    for row in rows:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def set_threads(n: int) -> None:
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    torch.set_num_threads(n)
