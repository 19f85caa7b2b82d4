"""Training under ``torch.distributed.run`` with 2 CPU processes (gloo, loopback) equals one process.

Each rank draws the same global batch and trains on its half; DDP averages the gradients, so both
ranks hold the same model, and that model is the one a single process trains on the whole batch
(up to the order of float sums: 1e-5).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch

from posenc.experiments import ModelConfig, TrainConfig, get_task, train

SCRIPT = textwrap.dedent("""
    import sys, torch
    torch.set_num_threads(1)
    from posenc.experiments import ModelConfig, TrainConfig, get_task, train
    from posenc.experiments.train import distributed_context
    import torch.distributed as dist
    task = get_task(sys.argv[2])
    model = ModelConfig(vocab_size=task.vocab_size, scheme="t5", dim=32, num_heads=2, num_layers=1, causal=task.causal)
    result = train(model, task, TrainConfig(steps=6, batch_size=8, warmup=2, max_length=int(sys.argv[3])))
    rank, world = distributed_context()
    torch.save({"state": result.model.state_dict(), "losses": result.losses, "world": world},
               f"{sys.argv[1]}/rank{rank}.pt")
    dist.destroy_process_group()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize(("task_name", "length"), [("copy", 4), ("text-mlm", 16)])
def test_two_cpu_processes_train_the_single_process_model(tmp_path, task_name, length):
    """text-mlm scores a random ~15% of bytes, so the ranks hold unequal numbers of scored tokens:
    the loss must be the global batch's token mean, not the mean of the ranks' means (which had
    drifted from the single-process run by 1.4e-4 after 5 steps)."""
    script = tmp_path / "train_ddp.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}
    # Retried: the free port may be taken between the probe and torchrun's bind, and gloo's
    # threads now and then abort a rank at exit ("terminate called without an active exception",
    # about 1 run in 10 on this machine, after training has finished)
    for _attempt in range(3):
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(_free_port()),
            str(script),
            str(tmp_path),
            task_name,
            str(length),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        flaky = ("address already in use", "terminate called without an active exception")
        if done.returncode == 0 or not any(text in done.stderr.lower() for text in flaky):
            break
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert ranks[0]["world"] == ranks[1]["world"] == 2
    for name, value in ranks[0]["state"].items():
        assert torch.equal(value, ranks[1]["state"][name]), name

    torch.set_num_threads(1)
    task = get_task(task_name)
    model = ModelConfig(vocab_size=task.vocab_size, scheme="t5", dim=32, num_heads=2, num_layers=1, causal=task.causal)
    single = train(model, task, TrainConfig(steps=6, batch_size=8, warmup=2, max_length=length))
    assert ranks[0]["losses"] == pytest.approx(single.losses, abs=1e-5)
    # Adam divides by the root of the squared gradients: for a byte seen once or twice, float-order
    # differences of its tiny gradient show up to ~3e-5 in its embedding after 6 steps
    atol = 1e-5 if task_name == "copy" else 1e-4
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(ranks[0]["state"][name], value, atol=atol, rtol=1e-5)


def _torchrun_env(monkeypatch: pytest.MonkeyPatch, local_rank: int) -> None:
    for name, value in {"WORLD_SIZE": "2", "RANK": str(local_rank), "LOCAL_RANK": str(local_rank)}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("device, backend", [("cpu", "gloo"), ("cuda", "nccl")])
def test_backend_follows_the_training_device_not_the_machine(monkeypatch, device, backend):
    """CPU training on a machine with GPUs joins with gloo (nccl would need each rank on its own
    GPU: two ranks on a one-GPU machine died with 'invalid device ordinal'); CUDA training with nccl,
    each rank on the GPU of its LOCAL_RANK."""
    import torch.distributed as dist

    from posenc.experiments.train import distributed_context

    _torchrun_env(monkeypatch, 1)
    joined, placed = [], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", placed.append)
    monkeypatch.setattr(dist, "is_initialized", lambda: bool(joined))
    monkeypatch.setattr(dist, "init_process_group", joined.append)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    assert distributed_context(device) == (1, 2)
    assert joined == [backend]
    assert placed == ([torch.device("cuda", 1)] if device == "cuda" else [])


def test_more_cuda_ranks_than_gpus_is_a_clear_error(monkeypatch):
    from posenc.experiments.train import rank_device

    _torchrun_env(monkeypatch, 1)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"cuda:1, but this machine has 1 GPU.*device='cpu'"):
        rank_device("cuda")
    assert rank_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_device("cuda") == torch.device("cuda")  # one process: the device as named
