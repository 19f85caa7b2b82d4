"""The benchmark harness (posenc.bench) and ``posenc bench`` end to end on small sizes."""

from __future__ import annotations

import json
import os
import time

import pytest
import torch

from posenc.bench import report, timing
from posenc.cli import main


def test_measure_reports_the_median_and_the_load():
    m = timing.measure("sleep", lambda: time.sleep(0.002), num_threads=1, min_run_time=0.05)
    assert 0.0015 < m.median_s < 0.05  # a 2 ms sleep, give or take the scheduler
    assert m.runs >= 1 and m.num_threads == 1
    assert m.other_cpu is None or 0.0 <= m.other_cpu <= 1.0


def test_measure_paired_alternates_and_reports_the_median_ratio():
    """Case and floor run in alternating blocks (every round has both), at least ``min_rounds``
    rounds; a 4 ms sleep against a 2 ms one is ~2x the floor."""
    calls: list[str] = []

    def case():
        calls.append("c")
        time.sleep(0.004)

    def floor():
        calls.append("f")
        time.sleep(0.002)

    p = timing.measure_paired("sleep", case, floor, min_run_time=0.05, block_s=0.01, min_rounds=5)
    assert p.rounds >= 5
    assert 1.4 < p.x_floor < 3.0  # scheduler jitter aside, 2
    assert 0.0035 < p.case.median_s < 0.05 and 0.0015 < p.floor.median_s < 0.05
    runs = "".join(calls)
    assert runs.count("cf") + runs.count("fc") >= 2 * p.rounds - 1  # blocks alternate


def test_measure_paired_many_runs_the_cases_round_robin():
    """Several cases against one floor: every case's rounds are interleaved with the others' (a slow
    phase of the machine cannot cover one case alone), each round pairs a case block with a floor
    block, and each case gets its own median ratio (4 ms and 8 ms sleeps against 2 ms: ~2 and ~4)."""
    calls: list[str] = []

    def sleeper(tag: str, seconds: float):
        def fn():
            calls.append(tag)
            time.sleep(seconds)

        return fn

    result = timing.measure_paired_many(
        {"a": sleeper("a", 0.004), "b": sleeper("b", 0.008)},
        sleeper("f", 0.002),
        min_run_time=0.05,
        block_s=0.01,
        min_rounds=5,
    )
    assert set(result) == {"a", "b"} and all(p.rounds >= 5 for p in result.values())
    assert 1.4 < result["a"].x_floor < 3.0 and 2.8 < result["b"].x_floor < 6.0
    timed = "".join(calls)[6:]  # after the warm-up and block-sizing calls (a, a, b, b, f, f)
    assert timed.rfind("a") > timed.find("b") and timed.rfind("b") > timed.find("a")  # interleaved
    assert timed.count("af") + timed.count("bf") >= result["a"].rounds + result["b"].rounds - 2


def test_cpu_probe_does_not_count_this_process(monkeypatch):
    """When the machine's busy time is exactly this process's CPU time, other processes' share is 0;
    when another process adds one busy CPU-second per wall second on 2 CPUs, it is 0.5."""
    own = lambda: sum(os.times()[:2])  # noqa: E731
    monkeypatch.setattr(timing.CpuProbe, "_busy_seconds", staticmethod(own))
    probe = timing.CpuProbe()
    probe.start()
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        pass
    assert probe.stop() == pytest.approx(0.0, abs=1e-6)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    start = time.perf_counter()
    monkeypatch.setattr(timing.CpuProbe, "_busy_seconds", staticmethod(lambda: own() + (time.perf_counter() - start)))
    probe.start()
    time.sleep(0.2)
    assert probe.stop() == pytest.approx(0.5, abs=0.05)


def test_rows_are_formatted_steady_only():
    rows = [
        {"case": "a", "kind": "steady", "median_ms": 1.23456, "x_floor": 1.0},
        {"case": "b", "kind": "one-time", "seconds": 2.0},
    ]
    assert report.format_rows(rows, ["case", "median_ms", "x_floor", "other_cpu"]) == [["a", "1.23", "1", "-"]]
    assert report.one_time_rows(rows) == [["-", "-", "-", "b", "2"]]


def test_unknown_section_is_refused():
    with pytest.raises(ValueError, match=r"unknown bench sections \['speed'\]"):
        report.run(quick=True, sections=["speed"])


@pytest.mark.slow
def test_cli_quick_writes_json(tmp_path, capsys):
    """``posenc bench --quick`` on the bias and RoPE sections (eager and reference cases only
    would not exercise the floor ratio: the floor row must read exactly 1)."""
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--quick",
            "--sections",
            "bias,rope",
            "--no-peers",
            "--dtypes",
            "float32",
            "--lengths",
            "64",
            "--json",
            str(out),
            "--markdown",
            str(tmp_path / "perf.md"),
        ]
    )
    assert code == 0, capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True and data["meta"]["num_threads"] == 1
    bias = {r["case"]: r for r in data["bias"]}
    assert bias["floor (fill preallocated)"]["x_floor"] == 1.0
    assert {"posenc ALiBi Toeplitz out=", "posenc T5 Toeplitz out="} <= set(bias)
    rope = [r for r in data["rope"] if r["kind"] == "steady"]
    floors = [r for r in rope if r["case"] == "floor"]
    assert len(floors) == 2 and all(r["x_floor"] == 1.0 for r in floors)  # one per layout
    for r in rope:
        assert r["gb_per_s"] > 0 and r["median_ms"] > 0
        expected_gbps = 4 * 32 * 64 * 128 * 4 / (r["median_ms"] / 1e3) / 1e9  # read + write of q and k
        assert r["gb_per_s"] == pytest.approx(expected_gbps, rel=1e-9)
    once = {r["case"] for r in data["rope"] if r["kind"] == "one-time"}
    assert "cos/sin table build" in once and "posenc out= (compiled)" in once
    printed = capsys.readouterr().out
    assert "posenc bench: rope" in printed and "rope ratios" in printed
    md = (tmp_path / "perf.md").read_text()
    assert "| 64 | float32 | half |" in md and "| 64 | float32 | interleaved |" in md


def test_cli_rejects_bad_options(capsys):
    assert main(["bench", "--sections", "speed"]) == 2
    assert main(["bench", "--dtypes", "float99"]) == 2
    assert main(["bench", "--device", "tpu9"]) == 2
    captured = capsys.readouterr()
    assert "device 'tpu9' is not usable here" in captured.out + captured.err
    for args, message in (
        (["--lengths", "0,2048"], "RoPE lengths must be positive integers, got [0, 2048]"),
        (["--lengths", "99999999999"], "--lengths must be at most 65536"),  # not an allocator error
        (["--dtypes", "int8"], "RoPE dtypes must be floating point"),
        (["--sections", ","], "no bench section given"),
        (["--json", "/proc/posenc/bench.json"], "--json: cannot write /proc/posenc/bench.json"),
    ):
        assert main(["bench", *args]) == 2, args  # refused at once, before any timing
        captured = capsys.readouterr()
        text = " ".join((captured.out + captured.err).replace("│", " ").split())
        assert message in text and "Traceback" not in text, text
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not usable here .*; usable here: cpu$"):
            report.run(quick=True, sections=["rope"], device="cuda")
    with pytest.raises(ValueError, match="device 'meta' is not usable here \\(meta tensors hold no data\\)"):
        report.run(quick=True, sections=["rope"], device="meta")


def test_cli_output_paths_checked_before_the_run_and_written_whole(tmp_path, capsys, monkeypatch):
    """--json/--markdown naming a folder, or both the same file: refused before any timing. A run
    that fails leaves no (empty) output file behind; a finished one writes each file whole."""
    calls = []
    monkeypatch.setattr(report, "run", lambda **kw: calls.append(kw) or {"meta": {}, "rope": []})
    for args, message in (
        (["--json", str(tmp_path)], f"--json: {tmp_path} is a directory; give a file name"),
        (["--markdown", str(tmp_path)], f"--markdown: {tmp_path} is a directory"),
        (
            ["--json", str(tmp_path / "a"), "--markdown", str(tmp_path / "." / "a")],
            "--json and --markdown name the same file",
        ),
    ):
        assert main(["bench", "--sections", "rope", *args]) == 2, args
        text = " ".join(capsys.readouterr().err.replace("│", " ").split())
        assert message in text and "Traceback" not in text, text
    assert calls == [] and list(tmp_path.iterdir()) == []

    def interrupted(**kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "run", interrupted)
    main(["bench", "--sections", "rope", "--json", str(tmp_path / "out" / "b.json")])
    assert list((tmp_path / "out").iterdir()) == []  # the folder is made, no empty JSON left in it
    monkeypatch.setattr(report, "run", lambda **kw: calls.append(kw) or {"meta": {"quick": True}, "rope": []})
    assert (
        main(
            [
                "bench",
                "--sections",
                "rope,rope",
                "--lengths",
                "64,64,",
                "--dtypes",
                "float32,float",
                "--json",
                str(tmp_path / "out" / "b.json"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "out" / "b.json").read_text()) == {"meta": {"quick": True}, "rope": []}
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["b.json"]  # no temporary file left
    assert calls[-1]["sections"] == ["rope"] and calls[-1]["rope_lengths"] == [64, 64]  # run() takes each once


def test_run_takes_each_section_length_and_dtype_once(monkeypatch):
    import posenc.bench.rope as rope_bench

    seen = {}
    monkeypatch.setattr(rope_bench, "bench_rope", lambda lengths, dtypes, **kw: seen.update(L=lengths, d=dtypes) or [])
    result = report.run(
        quick=True, sections=["rope", "rope"], rope_lengths=[8, 8, 16], dtypes=[torch.float32, torch.float], peers=False
    )
    assert seen == {"L": [8, 16], "d": (torch.float32,)} and list(result) == ["meta", "rope"]


def test_benchmark_scripts_refuse_bad_arguments():
    """``benchmarks/*.py`` with a device that is not there, a bad length, thread count, mode or output
    path: a clear one-line error and exit status 2 before any timing, no traceback."""
    import pathlib
    import subprocess
    import sys

    scripts = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
    for script, args, message in (
        ("bias.py", ["--device", "tpu9"], "device 'tpu9' is not usable here"),
        ("rope.py", ["--lengths", "0,2048"], "--lengths: takes positive integers separated by commas"),
        ("rope.py", ["--threads", "0"], "--threads: takes a positive integer; got '0'"),
        ("flex_memory.py", ["--modes", "flx"], "flex benchmark modes are flex and sdpa; got ['flx']"),
        ("bias.py", ["--json", "/proc/posenc/rows.json"], "--json: cannot write /proc/posenc/rows.json"),
        ("bias.py", ["--json", "."], "--json: . is a directory; give a file name"),
        ("rope.py", ["--device", "meta"], "device 'meta' is not usable here"),
        ("rope_training_size.py", ["--batch", "0"], "--batch: takes a positive integer; got '0'"),
    ):
        proc = subprocess.run(
            [sys.executable, str(scripts / script), "--quick", *args],
            capture_output=True,
            text=True,
            cwd=scripts,
            timeout=120,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (script, args, proc.stderr)
        assert message in proc.stderr, (script, args, proc.stderr)
    assert torch.get_num_threads() >= 1


def test_markdown_names_the_path_auto_takes_on_each_device():
    """The RoPE table shows the out= case of the backend the default dispatch picked, as the rows
    record it (``auto_backend``): the Triton kernel on CUDA, eager for float32 interleaved pairs on
    the CPU. Rows recorded without it get the dispatch of their release: eager (the complex
    multiply) for float32 interleaved pairs on the CPU, the Triton kernel, then named compiled, on CUDA."""
    from posenc.bench.report import markdown

    def row(case, ms, auto=None):
        return {
            "kind": "steady",
            "L": 2048,
            "dtype": "float32",
            "layout": "interleaved",
            "case": case,
            "median_ms": ms,
            "x_floor": ms / 0.05,
            "x_floor_best": ms / 0.05,
            "auto_backend": auto,
        }

    rope = [row("floor", 0.05), row("posenc out= (compiled)", 0.06), row("posenc out= (eager)", 0.11)]
    for device, shown in (("cpu", "2.20 (2.20) (eager)"), ("cuda: NVIDIA H100 80GB HBM3", "1.20 (1.20) (compiled)")):
        text = markdown({"meta": {"device": device}, "rope": rope})
        assert f"| 2048 | float32 | interleaved | 0.050 | {shown} |" in text, text
    recorded = [
        row("floor", 0.05, "triton"),
        row("posenc out= (triton)", 0.055, "triton"),
        row("posenc out= (compiled)", 0.06, "triton"),
        row("posenc out= (eager)", 0.11, "triton"),
    ]
    text = markdown({"meta": {"device": "cuda: NVIDIA H100 80GB HBM3"}, "rope": recorded})
    assert "| 2048 | float32 | interleaved | 0.050 | 1.10 (1.10) (triton) |" in text, text
    assert "| triton 1.10, compiled 1.20, eager 2.20 |" in text, text
    recorded = [{**r, "auto_backend": "eager"} for r in rope]
    text = markdown({"meta": {"device": "cpu"}, "rope": recorded})
    assert "| 2048 | float32 | interleaved | 0.050 | 2.20 (2.20) (eager) |" in text, text


def test_markdown_sets_in_place_beside_the_in_place_floor():
    """The in-place column shows posenc's in-place ratio beside the in-place floor's (both against
    the copy floor), and posenc's alone for a run recorded before that floor existed."""
    from posenc.bench.report import markdown

    def row(case, x):
        return {
            "kind": "steady",
            "L": 2048,
            "dtype": "float32",
            "layout": "half",
            "case": case,
            "median_ms": 0.05 * x,
            "x_floor": x,
            "x_floor_best": x,
        }

    rope = [row("floor", 1.0), row("posenc out= (eager)", 2.1), row("posenc in-place (eager)", 0.8)]
    assert "| 2.10 (2.10) (eager) | - | 0.80 (0.80) | 2.10 (2.10) |" in markdown({"meta": {}, "rope": rope})
    text = markdown({"meta": {}, "rope": [*rope, row("floor, in place", 0.6)]})
    assert "| 2.10 (2.10) (eager) | - | 0.80 (0.80) / 0.60 | 2.10 (2.10) |" in text, text


def test_every_rope_case_is_checked_against_the_reference_before_timing(monkeypatch):
    """A fast path that does not rotate (here: a copy) must stop the benchmark, not be timed at
    1.0x the floor; peers' errors are kept in their rows."""
    from posenc.bench import rope as bench_rope_module
    from posenc.kernels import compiled

    rows = bench_rope_module.bench_rope((64,), (torch.float32,), ("half",), min_run_time=0.01, peers=False)
    steady = {r["case"]: r for r in rows if r["kind"] == "steady"}
    assert steady["posenc out= (compiled)"]["max_error"] < 1e-5 and steady["floor"]["max_error"] is None
    assert steady["posenc backward"]["max_error"] < 1e-5  # against the inverse rotation
    assert {"posenc new tensors", "posenc Rope.rotate", "floor, new tensors", "floor, in place"} <= set(steady)
    for backend in ("compiled", "eager", "reference"):  # each backend forced, out= and in place
        assert (
            steady[f"posenc out= ({backend})"]["backend"]
            == steady[f"posenc in-place ({backend})"]["backend"]
            == backend
        )
    assert steady["posenc new tensors"]["backend"] == steady["floor"]["auto_backend"] == "eager"  # 2^14 elements
    assert steady["posenc out= (compiled)"]["tolerance"] < 5e-6  # two float32 units in the last place, not 1e-3

    def not_a_rotation(x, cos, sin, out, layout, inverse):
        out.copy_(x)
        return True

    monkeypatch.setattr(compiled, "rotate_into", not_a_rotation)
    with pytest.raises(RuntimeError, match=r"posenc out= \(compiled\) does not match apply_rope at L=64 float32 half"):
        bench_rope_module.bench_rope((64,), (torch.float32,), ("half",), min_run_time=0.01, peers=False)


def test_a_broken_or_missing_peer_is_reported_not_fatal(monkeypatch):
    from posenc.bench import rope as bench_rope_module

    def broken(q, k, layout):
        raise RuntimeError("API drift")

    def missing(q, k, layout):
        raise ImportError("no module", name="nothere")

    monkeypatch.setattr(bench_rope_module, "PEERS", {"drifted": broken, "absent": missing})
    found, skipped = bench_rope_module.rope_peers(
        torch.zeros(1, 1, 4, 8), torch.zeros(1, 1, 4, 8), "half", with_skipped=True
    )
    assert found == {} and skipped == {
        "drifted": "failed: RuntimeError: API drift",
        "absent": "not installed (nothere): pip install 'posenc[bench]'",
    }


def test_without_a_compiler_no_row_says_compiled(monkeypatch):
    """Where compiling fails (the compiled backend then says so and hands every call to the eager
    one), no row claims a compiled timing: the forced compiled cases are listed as not timed."""
    from posenc.bench import rope as bench_rope_module
    from posenc.kernels import compiled

    monkeypatch.setattr(compiled, "rotate_into", lambda *args: False)  # what a failed compile returns
    monkeypatch.setattr(compiled, "available", lambda: False)
    monkeypatch.setattr(compiled, "error", lambda: "no C++ compiler (test)")
    rows = bench_rope_module.bench_rope((64,), (torch.float32,), ("half",), min_run_time=0.01, peers=False)
    assert not any("compiled" in r["case"] for r in rows if r["kind"] in ("steady", "one-time"))
    assert not any(r.get("backend") == "compiled" for r in rows)
    skipped = [r for r in rows if r["kind"] == "skipped"]
    assert len(skipped) == 2 and "compilation is not available here (no C++ compiler (test))" in skipped[0]["reason"]
    from posenc.bench.report import markdown

    assert "(eager) |" in markdown({"meta": {}, "rope": rows})


def test_an_interrupted_run_keeps_the_sections_it_finished(tmp_path, capsys, monkeypatch):
    from posenc.bench import bias

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bias, "bench_bias", interrupted)
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--quick",
            "--sections",
            "rope,bias",
            "--no-peers",
            "--dtypes",
            "float32",
            "--lengths",
            "64",
            "--json",
            str(out),
        ]
    )
    assert code == 130
    data = json.loads(out.read_text())
    assert "rope" in data and "bias" not in data and data["meta"]["quick"] is True
    assert f"the sections finished are in {out}" in " ".join(capsys.readouterr().out.split())


def test_training_rows_report_the_first_step_apart():
    """bench_training gives each scheme's steady median, its overhead against none and its first
    step (one-time costs: tables and caches built) apart; the markdown table shows all three."""
    from posenc.bench.report import markdown
    from posenc.bench.train import bench_training

    rows = bench_training(("none", "rope"), batch=2, seq=8, min_run_time=0.02, rounds=2)
    assert [r["case"] for r in rows] == ["train step none", "train step rope"]
    assert rows[0]["overhead_vs_none"] == 0.0
    assert all(r["first_step_ms"] > 0 and r["median_ms"] > 0 for r in rows)
    table = markdown({"meta": {}, "training": rows})
    assert "| first step ms (one-time costs) |" in table and "| rope |" in table


def test_output_paths_under_a_file_name_the_file(tmp_path, capsys, monkeypatch):
    """``--markdown afile/p.md`` with ``afile`` a file: the error says that ``afile`` is a file
    (it said "File exists", or "Not a directory" one folder deeper), one line, exit 2."""
    calls = []
    monkeypatch.setattr(report, "run", lambda **kw: calls.append(kw) or {"meta": {}, "rope": []})
    afile = tmp_path / "afile"
    afile.write_text("")
    for option, path in (("--markdown", afile / "p.md"), ("--json", afile / "sub" / "p.json")):
        assert main(["bench", "--sections", "rope", option, str(path)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines == [f"error: {option}: cannot write {path}: {afile} is a file, not a folder"], lines
    assert calls == [] and afile.read_text() == ""


def test_bench_reruns_itself_with_freed_memory_reused():
    """``posenc bench`` started from the command line runs again under the allocator settings that
    keep new tensors from page-faulting; not when they are set already, nor when called from Python."""
    import platform
    import sys

    from posenc.bench.allocator import TUNABLES, rerun_command

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        assert rerun_command(["/usr/bin/posenc", "bench"], {}) is None
        return
    command, env = rerun_command(["/venv/bin/posenc", "bench", "--quick"], {"GLIBC_TUNABLES": "glibc.a=1", "X": "y"})
    assert command == [sys.executable, "-m", "posenc", "bench", "--quick"]
    assert env == {"GLIBC_TUNABLES": f"glibc.a=1:{TUNABLES}", "X": "y"}
    assert rerun_command(["/venv/bin/posenc", "bench"], {"GLIBC_TUNABLES": TUNABLES}) is None
    assert rerun_command(["/venv/bin/pytest", "bench"], {}) is None


def test_terminal_output_fits_100_columns_and_names_the_extra_of_missing_peers(capsys, monkeypatch):
    """Piped, ``posenc bench`` prints at most 100 columns; a peer that is not installed is listed once,
    with the shapes it missed and the extra that installs it."""
    from posenc.bench import rope as bench_rope_module

    def absent(q, k, layout):
        raise ImportError("no module named 'torchtune'", name="torchtune")

    monkeypatch.setattr(bench_rope_module, "PEERS", {"torchtune": absent})
    code = main(
        ["bench", "--quick", "--sections", "rope", "--dtypes", "float32", "--lengths", "64", "--allocator", "system"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert max(len(line) for line in out.splitlines()) <= 100
    lines = out.splitlines()
    assert "not installed, not timed: peer torchtune" in lines
    assert (
        lines[lines.index("not installed, not timed: peer torchtune") + 1]
        == "  pip install 'posenc[bench]' installs them"
    )


def test_missing_bias_peers_are_named_with_their_extra(capsys, monkeypatch):
    """The bias section's peers (transformers' T5 bias, x-transformers' ALiBi) missing: each is a
    skipped row naming the extra, listed under the table, not left out in silence."""
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] in ("transformers", "x_transformers")]:
        monkeypatch.setitem(sys.modules, name, None)  # submodules imported by earlier tests too
    monkeypatch.setitem(sys.modules, "transformers", None)  # an import of it raises ImportError
    monkeypatch.setitem(sys.modules, "x_transformers", None)
    monkeypatch.setitem(report.QUICK, "bias_lengths", (16,))
    code = main(["bench", "--quick", "--sections", "bias", "--min-run-time", "0.01", "--allocator", "system"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert max(len(line) for line in out.splitlines()) <= 100
    lines = out.splitlines()
    missing = "not installed, not timed: peer transformers T5 compute_bias, peer x-transformers ALiBi (build)"
    assert missing in lines
    assert lines[lines.index(missing) + 1] == "  pip install 'posenc[bench]' installs them"
    from posenc.bench.bias import bench_bias

    rows = bench_bias((8,), heads=2, min_run_time=0.01)
    skipped = {r["case"]: r["reason"] for r in rows if r["kind"] == "skipped"}
    assert set(skipped) == {"peer transformers T5 compute_bias", "peer x-transformers ALiBi (build)"}
    assert all(
        why.startswith("not installed (") and why.endswith(": pip install 'posenc[bench]'") for why in skipped.values()
    )
    assert "Not timed: peer transformers T5 compute_bias" in report.markdown({"meta": {}, "bias": rows})


def test_a_section_without_its_library_ends_in_one_line_naming_the_extra(capsys, monkeypatch):
    """``--sections transformers`` without transformers: exit 1 and the extra, not a traceback."""
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] == "transformers"]:
        monkeypatch.setitem(sys.modules, name, None)  # submodules imported by earlier tests too
    monkeypatch.setitem(sys.modules, "transformers", None)
    code = main(["bench", "--sections", "transformers", "--allocator", "system"])
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err
    assert "pip install 'posenc[transformers]'" in captured.err and "Traceback" not in captured.err


def test_auto_backend_times_out_and_in_place_with_the_dispatch_backend_only():
    from posenc.bench import rope as bench_rope_module

    rows = bench_rope_module.bench_rope(
        (64,), (torch.float32,), ("half",), min_run_time=0.01, peers=False, all_backends=False
    )
    cases = {r["case"] for r in rows if r["kind"] == "steady"}
    assert {"posenc out= (eager)", "posenc in-place (eager)", "posenc Rope.rotate"} <= cases
    assert not any("(reference)" in c or "(compiled)" in c for c in cases)
    faults = {r["case"]: r["page_faults_per_call"] for r in rows if r["kind"] == "steady"}
    assert faults["floor"] == 0 and faults["posenc out= (eager)"] is None  # recorded for the floors and new tensors
