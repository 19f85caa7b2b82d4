"""Shared test settings: deterministic, single-threaded torch for repeatable numbers."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
