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
    ) -> None:
        """Time RoPE, bias construction, attention and a training step; print ratios to the floor."""
        import json

        import torch
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

        console = Console()
        if not console.is_terminal:  # a log file or a pipe: no terminal width to fit, keep the names whole
            console = Console(width=160)
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
                    progress=lambda msg: status.update(msg),
                    on_section=save,
                )
        except ValueError as err:
            fail(str(err))
        except RuntimeError as err:  # a fast path that does not match the reference: nothing was timed
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
            table = Table(title=f"posenc bench: {section}")
            columns = summary_columns(section)
            for column in columns:
                table.add_column(column, overflow="fold")
            for cells in format_rows(rows, columns):
                table.add_row(*cells)
            console.print(table)
            once = one_time_rows(rows)
            if once:
                extra = Table(title=f"{section}: one-time costs (table build, first call = compile)")
                for column in ("L", "dtype", "layout", "case", "seconds"):
                    extra.add_column(column, overflow="fold")
                for cells in once:
                    extra.add_row(*cells)
                console.print(extra)
            if section == "rope" and rows:
                console.print(_rope_ratio_table(rope_ratios(rows)))
        for section in section_list:
            for row in result.get(section, []):
                if row.get("kind") == "skipped":
                    console.print(
                        escape(
                            f"not timed: {row['case']} at L={row.get('L')} {row.get('dtype', '')} "
                            f"{row.get('layout', '')}: {row['reason']}"
                        )
                    )
                elif (row.get("max_error") or 0) > (row.get("tolerance") or float("inf")):
                    console.print(
                        escape(
                            f"note: {row['case']} at L={row['L']} {row['dtype']} {row['layout']} differs from "
                            f"apply_rope by up to {row['max_error']:.3g} (a correct rotation: "
                            f"{row['tolerance']:.3g})"
                        )
                    )
        console.print(f"threads={threads}; other processes' CPU share is in other_cpu (discard rows above ~0.1)")
        console.print(
            "x_floor, x_none: the median of per-round ratios to the reference timed in turn with the case "
            "(floor_ms_paired in the JSON), not a ratio of the medians shown"
        )
        save(result)  # whole, once more: the last section's state is the run's
        for path in (json_file, markdown_file):
            if path is not None:
                console.print(f"wrote {path}")


#: the columns of the RoPE ratio table: (key of :func:`posenc.bench.report.rope_ratios`, heading)
_RATIO_COLUMNS = (
    ("L", "L"),
    ("dtype", "dtype"),
    ("layout", "layout"),
    ("backend", "auto backend"),
    ("rotate_x_clone", "Rope.rotate / clone"),
    ("new_x_clone", "rope() new / clone"),
    ("out_x_floor", "out= / floor"),
    ("out_eager_x_floor", "out= eager / floor"),
    ("in_place_x_floor", "in place / floor"),
    ("in_place_floor_x_floor", "neg_ / floor"),
    ("transformers_x_rotate", "transformers / Rope.rotate"),
)


def _rope_ratio_table(ratios: list[dict]):
    """The ratios to quote for each RoPE shape as a rich table."""
    from rich.table import Table

    table = Table(
        title="posenc bench: rope ratios (paired medians; lower is better, except transformers / Rope.rotate)"
    )
    for _, heading in _RATIO_COLUMNS:
        table.add_column(heading, overflow="fold")
    for row in ratios:
        table.add_row(
            *(
                "-" if row[key] is None else f"{row[key]:.2f}" if isinstance(row[key], float) else str(row[key])
                for key, _ in _RATIO_COLUMNS
            )
        )
    return table
