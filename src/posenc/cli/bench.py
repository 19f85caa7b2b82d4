"""``posenc bench``: speed and memory against the floor and the peers (issue 6)."""

from __future__ import annotations

from pathlib import Path

from . import MAX_THREADS, fail, stopped, usable_path

__all__ = ["register"]

#: Longest RoPE sequence ``--lengths`` takes: q and k ``[1, 32, L, 128]`` are 0.5 GiB each in
#: float32 at 32768, and the peers make several copies.
MAX_LENGTH = 65536


def register(app) -> None:  # app: typer.Typer
    import typer

    @app.command("bench", short_help="Time RoPE, biases, attention and training against the floor.")
    def bench(
        quick: bool = typer.Option(
            False, "--quick", help="Small sizes and short timings: checks the harness in about a minute."
        ),
        json_file: Path | None = typer.Option(
            None, "--json", metavar="FILE", help="Write every row (and the run's metadata) to this JSON file."
        ),
        sections: str = typer.Option(
            "rope,bias,attention,flex,training",
            "--sections",
            metavar="LIST",
            help="Comma-separated: rope, bias, attention, flex, training; also bias-build (each parameter-only "
            "bias built into a preallocated tensor vs a fill), bias-memory (FlexAttention's peak memory per "
            "bias scheme at L = 16384), varlen (packed documents with cu_seqlens vs the padded batch) and "
            "transformers (a transformers Llama switched to posenc's RoPE vs stock), not run by default.",
        ),
        threads: int = typer.Option(
            1, "--threads", min=1, max=MAX_THREADS, metavar="N", help="Threads for torch and for every timing."
        ),
        lengths: str | None = typer.Option(
            None, "--lengths", metavar="LIST", help=f"RoPE sequence lengths, e.g. 2048,8192 (1 to {MAX_LENGTH})."
        ),
        dtypes: str = typer.Option("float32,bfloat16", "--dtypes", metavar="LIST", help="RoPE dtypes."),
        no_peers: bool = typer.Option(False, "--no-peers", help="Skip the peer libraries."),
        device: str = typer.Option(
            "cpu", "--device", metavar="DEVICE", help="Where the tensors live: cpu, cuda, cuda:1, ..."
        ),
        markdown_file: Path | None = typer.Option(
            None, "--markdown", metavar="FILE", help="Write the tables of docs/performance.md here."
        ),
        min_run_time: float | None = typer.Option(
            None,
            "--min-run-time",
            min=0.01,
            metavar="SECONDS",
            help="Timing per case and its floor (at least 7 paired rounds): 0.5 by default, 0.05 with --quick.",
        ),
        all_backends: bool = typer.Option(
            True,
            "--all-backends/--auto-backend",
            help="RoPE out= and in place with every backend forced, or with the one the dispatch picks only.",
        ),
        allocator: str = typer.Option(
            "reuse",
            "--allocator",
            metavar="MODE",
            help="reuse: run under glibc settings that reuse freed memory, so that new tensors do not "
            "page-fault and the clone floor equals the copy floor (the command runs itself again with "
            "GLIBC_TUNABLES set); system: the allocator as it is, where new tensors of 32 MiB or more page-fault.",
        ),
    ) -> None:
        """Time RoPE, bias construction, attention and a training step; print ratios to the floor."""
        import json

        import torch
        from rich import box
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from ..bench.report import (
            SECTIONS,
            check_output_path,
            format_rows,
            markdown,
            one_time_rows,
            rope_ratios,
            run,
            summary_columns,
            write_output,
        )

        if allocator not in ("reuse", "system"):
            fail(f"--allocator takes reuse or system, got {allocator!r}")
        if allocator == "reuse":
            _rerun_with_freed_memory_reused()
        console = Console()
        if not console.is_terminal:  # a log file or a pipe: 100 columns, as a terminal would show
            console = Console(width=100)
        try:
            dtype_list = [getattr(torch, d.strip()) for d in dtypes.split(",") if d.strip()]
            if not all(isinstance(d, torch.dtype) for d in dtype_list):
                raise AttributeError
        except AttributeError:
            fail(f"--dtypes takes torch dtype names such as float32,bfloat16; got {dtypes!r}")
        if not dtype_list:  # run() would say "RoPE dtypes must be floating point ...; got none"
            fail("--dtypes is empty; give comma-separated dtypes such as float32,bfloat16 or leave the option out")
        try:
            length_list = [int(v) for v in lengths.split(",") if v.strip()] if lengths is not None else None
        except ValueError:
            fail(f"--lengths takes comma-separated integers, got {lengths!r}")
        if length_list == []:  # " , " would otherwise mean the default lengths
            fail("--lengths is empty; give comma-separated integers or leave the option out")
        if length_list and max(length_list) > MAX_LENGTH:  # (the run refuses lengths below 1)
            fail(
                f"--lengths must be at most {MAX_LENGTH} (q and k [1, 32, L, 128] and the peers' copies of them: "
                f"~{MAX_LENGTH * 32 * 128 * 4 * 12 / 2**30:.0f} GiB at L = {MAX_LENGTH} in float32), got {lengths!r}"
            )
        section_list = list(dict.fromkeys(s.strip() for s in sections.split(",") if s.strip()))  # each once
        unknown = [s for s in section_list if s not in SECTIONS]  # run()'s words, with the option's name
        if unknown or not section_list:
            fail(
                f"--sections: unknown bench sections {unknown}; choose from: {', '.join(SECTIONS)}"
                if unknown
                else f"--sections: no bench section given; choose from: {', '.join(SECTIONS)}"
            )
        for option, path in (("--json", json_file), ("--markdown", markdown_file)):
            if path is not None:
                usable_path(option, path)
        if json_file is not None and markdown_file is not None and json_file.resolve() == markdown_file.resolve():
            fail(f"--json and --markdown name the same file ({json_file}); give two paths")
        for option, path in (("--json", json_file), ("--markdown", markdown_file)):
            if path is not None:  # before the run: a bad path should not cost a full benchmark
                try:
                    check_output_path(path)
                except ValueError as err:
                    fail(f"{option}: {err}")

        def save(result: dict) -> None:  # after every section: an interrupted run keeps what it finished
            if json_file is not None:
                write_output(json_file, json.dumps(result, indent=1))
            if markdown_file is not None:
                write_output(markdown_file, markdown(result))

        try:
            with console.status("benchmarking") as status:
                result = run(
                    quick=quick,
                    sections=section_list,
                    num_threads=threads,
                    rope_lengths=length_list,
                    dtypes=dtype_list,
                    peers=not no_peers,
                    device=device,
                    min_run_time=min_run_time,
                    all_backends=all_backends,
                    progress=lambda msg: status.update(msg),
                    on_section=save,
                )
        except ValueError as err:
            fail(str(err))
        except RuntimeError as err:  # a fast path that does not match the reference: nothing was timed
            fail(str(err), code=1)
        except ImportError as err:  # a section whose library is missing (transformers): it names the extra
            fail(str(err), code=1)
        except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (the root command makes it an interrupt)
            how, code = stopped(err)
            kept = [str(p) for p in (json_file, markdown_file) if p is not None and p.exists()]
            console.print(
                f"{how}: "
                + (
                    f"the sections finished are in {' and '.join(kept)}"
                    if kept
                    else "no section had finished, nothing written"
                )
            )
            raise typer.Exit(code) from None
        for section in section_list:
            rows = result.get(section, [])
            table = Table(title=f"posenc bench: {section}", box=box.SIMPLE_HEAD)
            columns = summary_columns(section)
            for column in columns:
                table.add_column(_HEADINGS.get(column, column), overflow="fold")
            for cells in format_rows(rows, columns):
                table.add_row(*cells)
            console.print(table)
            once = one_time_rows(rows)
            if once:
                extra = Table(
                    title=f"{section}: one-time costs (table build, first call = compile)", box=box.SIMPLE_HEAD
                )
                for column in ("L", "dtype", "layout", "case", "seconds"):
                    extra.add_column(column, overflow="fold")
                for cells in once:
                    extra.add_row(*cells)
                console.print(extra)
            if section == "rope" and rows:
                console.print(_rope_ratio_table(rope_ratios(rows)))
        skipped: dict[tuple[str, str], list[str]] = {}  # (case, reason): the shapes it was not timed at
        for section in section_list:
            for row in result.get(section, []):
                if row.get("kind") == "skipped":
                    shape = " ".join(str(row[key]) for key in ("L", "dtype", "layout") if row.get(key) is not None)
                    skipped.setdefault((row["case"], row["reason"]), []).append(shape)
                elif (row.get("max_error") or 0) > (row.get("tolerance") or float("inf")):
                    console.print(
                        escape(
                            f"note: {row['case']} at L={row['L']} {row['dtype']} {row['layout']} differs from "
                            f"apply_rope by up to {row['max_error']:.3g} (a correct rotation: "
                            f"{row['tolerance']:.3g})"
                        )
                    )
        missing = [case for case, reason in skipped if reason.startswith("not installed")]
        for (case, reason), shapes in skipped.items():
            if case not in missing:
                where = f" ({', '.join(shapes)})" if len(shapes) <= 2 else f" ({len(shapes)} shapes)"
                console.print(escape(f"not timed: {case}{where}: {reason}"))
        if missing:
            console.print(escape(f"not installed, not timed: {', '.join(dict.fromkeys(missing))}"))
            console.print(escape(f"  {_PEERS_EXTRA} installs them"))
        console.print(f"threads={threads}; other processes' CPU share is in other_cpu (discard rows above ~0.1)")
        console.print(
            "x_floor, x_none: the median of per-round ratios to the reference timed in turn with the case "
            "(floor_ms_paired in the JSON), not a ratio of the medians shown"
        )
        save(result)  # whole, once more: the last section's state is the run's
        for path in (json_file, markdown_file):
            if path is not None:
                console.print(f"wrote {path}")


def _rerun_with_freed_memory_reused() -> None:
    """Replace this process by the same command under :data:`posenc.bench.allocator.TUNABLES`
    where it was started without them (see :mod:`posenc.bench.allocator`); else return."""
    import os
    import sys

    from ..bench.allocator import rerun_command

    command = rerun_command(sys.argv, os.environ)
    if command is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(command[0][0], command[0], command[1])


#: what installs the peer libraries (the speed-ups of the README are over them)
_PEERS_EXTRA = "pip install 'posenc[bench]'"

#: shorter headings for the terminal (the JSON keeps the names)
_HEADINGS = {
    "median_ms": "ms",
    "x_floor": "x floor",
    "x_floor_best": "best",
    "other_cpu": "other CPU",
    "page_faults_per_call": "faults/call",
    "x_none": "x none",
    "x_none_best": "best",
    "overhead_vs_none": "vs none",
    "first_step_ms": "1st step ms",
    "target_x_floor": "target",
    "seconds": "s",
}

#: the columns of the RoPE ratio table: (key of :func:`posenc.bench.report.rope_ratios`, heading)
_RATIO_COLUMNS = (
    ("L", "L"),
    ("dtype", "dtype"),
    ("layout", "layout"),
    ("backend", "auto"),
    ("clone_x_floor", "clone"),
    ("rotate_x_floor", "rotate"),
    ("out_x_floor", "out="),
    ("in_place_x_floor", "in place"),
    ("transformers_x_rotate", "HF x"),
    ("fastest_peer_x_rotate", "peer x"),
)


def _rope_ratio_table(ratios: list[dict]):
    """The ratios to quote for each RoPE shape as a rich table."""
    from rich import box
    from rich.table import Table

    table = Table(
        title="posenc bench: rope ratios to the copy floor (out.copy_(x)), paired medians",
        caption="clone: x.clone() of q and k (the floor of new tensors); rotate: Rope.rotate(q, k); out=, in place: kernels.rope(out=), rope_ with the auto backend. Lower is better, "
        "but HF x, peer x: how many times slower than Rope.rotate transformers and the fastest peer are.",
        box=box.SIMPLE_HEAD,
    )
    for key, heading in _RATIO_COLUMNS:
        table.add_column(heading, no_wrap=key in ("dtype", "layout", "backend"))
    for row in ratios:
        table.add_row(
            *(
                "-" if row[key] is None else f"{row[key]:.2f}" if isinstance(row[key], float) else str(row[key])
                for key, _ in _RATIO_COLUMNS
            )
        )
    return table
