"""Small training experiments that put the claims about positional encodings to the test.

``posenc experiment NAME`` runs one of :data:`EXPERIMENTS` (``length``, ``learned-vs-sinusoidal``,
``add-vs-concat``, ``probe``, ``extend``); results go to ``DIR/results.json`` (schema in
:mod:`posenc.experiments.results`) and figures to ``DIR/figures`` (:mod:`posenc.experiments.plots`,
which reads results files and never trains). Everything here needs torch alone.
"""

from .model import ModelConfig, TinyTransformer
from .results import add_record, load_results
from .runner import run_experiment, run_job
from .suite import EXPERIMENTS, Settings, plan
from .tasks import TASKS, get_task
from .train import TrainConfig, TrainResult, train

__all__ = [
    "EXPERIMENTS",
    "TASKS",
    "ModelConfig",
    "Settings",
    "TinyTransformer",
    "TrainConfig",
    "TrainResult",
    "add_record",
    "get_task",
    "load_results",
    "plan",
    "run_experiment",
    "run_job",
    "train",
]
