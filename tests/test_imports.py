"""``import posenc`` needs torch and the standard library only (docs/design.md, "Layers").

Checked in fresh interpreters, since the test process itself has imported the peers already. torch
2.13 imports numpy by itself when numpy is installed, so the check is twofold: posenc adds none of
the heavy modules to those ``import torch`` loads, and posenc works with all of them made unimportable.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("matplotlib", "numpy", "typer", "rich", "scipy", "pandas", "transformers")

USE = "posenc.create('rope', dim=8); posenc.Attention(8, 2, encoding='t5')(torch.randn(1, 3, 8))"


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def _heavy_loaded_by_stage() -> dict[str, list[str]]:
    """Heavy modules loaded after ``import torch``, after posenc is imported and used, and after ``import rich``."""
    code = (
        "import sys, json\n"
        f"heavy = lambda: sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "import torch\nstages = {'torch': heavy()}\n"
        f"import posenc\n{USE}\nstages['posenc'] = heavy()\n"
        "import rich\nstages['rich'] = heavy()\n"
        "print(json.dumps(stages))"
    )
    return json.loads(_run(code))


def test_import_posenc_adds_no_heavy_module_to_torch() -> None:
    stages = _heavy_loaded_by_stage()
    assert sorted(set(stages["posenc"]) - set(stages["torch"])) == []
    assert "rich" in set(stages["rich"]) - set(stages["posenc"])  # the check does see a heavy import


def test_posenc_works_with_heavy_modules_unimportable() -> None:
    """A meta-path finder refuses every heavy package; posenc still imports and runs a forward."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {HEAVY!r}:\n"
        "            raise ModuleNotFoundError(f'blocked {name}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import warnings; warnings.simplefilter('ignore')\n"  # torch warns that numpy is missing
    )
    assert _run(f"{blocker}import torch, posenc\n{USE}\nprint('ok')") == "ok"
