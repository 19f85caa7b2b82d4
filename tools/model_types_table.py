"""Write ``docs/model-types.md``: every rotary model type of the installed transformers, read by
``posenc.rope_from_config`` from random draws of its config, with the verdict per type.

A type is *rotary* when its modelling source defines ``*RotaryEmbedding`` or ``apply_rotary*``
(``tests/test_rope_config_sweep.py``'s rule). Verdicts:

* ``pass``: posenc's rotation equals transformers' own rotary module and apply function on q and k
  (``check_parity`` of ``tests/test_rope_config_sweep.py``) for the class defaults and for each
  random draw (bases, and linear scaling of unscaled RoPEs; ``--draws`` seeds from ``--seed``);
  MRoPE types: their config reads as MRoPE (parity: ``tests/parity/test_mrope_transformers.py``);
* ``refused``: posenc refuses the type with a ValueError saying why, or it is listed as not read;
* ``not applicable``: no 1-D text RoPE (vision encoders, sub-configs, composite wrappers);
* ``FAIL``: anything else (a bug: the table says which draw).

Run from the repository root: ``python tools/model_types_table.py --seed 0 --draws 2``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "model-types.md"


def _sweep():
    sys.path[:0] = [str(ROOT), str(ROOT / "src")]
    from tests import test_rope_config_sweep as sweep

    return sweep


def verdict(sweep, model_type: str, seeds: list[int]) -> tuple[str, str]:
    import posenc

    reason = sweep.NOT_READ.get(model_type)
    if reason == sweep._MROPE:
        from transformers import CONFIG_MAPPING

        try:
            rope = posenc.rope_from_config(CONFIG_MAPPING[model_type]().to_dict())
        except ValueError as err:
            return "refused", str(err).split("; supported")[0]
        return ("pass", "MRoPE") if type(rope).__name__ == "MRope" else ("FAIL", "read as plain RoPE")
    if reason is not None:
        applicable = reason not in (
            sweep._VISION,
            sweep._VISION_ONLY,
            sweep._AUDIO_VISION_PART,
            sweep._COMPOSITE,
            sweep._UNUSED,
        ) and not reason.startswith(("RoPE over 3-D", "2-D axial"))
        return ("refused" if applicable else "not applicable"), reason
    for seed in [None, *seeds]:
        try:
            sweep.check_parity(model_type, seed)
        except Exception as err:  # noqa: BLE001 - reported in the table
            draw = "defaults" if seed is None else f"draw {seed}"
            return "FAIL", f"{draw}: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    return "pass", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the first random draw")
    parser.add_argument("--draws", type=int, default=2, help="random draws per type besides the defaults")
    args = parser.parse_args(argv)
    sweep = _sweep()
    import transformers

    transformers.logging.set_verbosity_error()
    seeds = list(range(args.seed, args.seed + args.draws))
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in sweep.rotary_model_types():
            rows.append((model_type, *verdict(sweep, model_type, seeds)))
    counts = {v: sum(1 for r in rows if r[1] == v) for v in ("pass", "refused", "not applicable", "FAIL")}
    lines = [
        "# Model types",
        "",
        f"Every rotary model type of transformers {transformers.__version__} ({len(rows)}), read by",
        "`posenc.rope_from_config`; written by `python tools/model_types_table.py "
        f"--seed {args.seed} --draws {args.draws}` (see that script for what each verdict means).",
        "",
        "Counts: " + ", ".join(f"{v} {n}" for v, n in counts.items()) + ".",
        "",
        "| model type | verdict | reason |",
        "| --- | --- | --- |",
        *(f"| `{t}` | {v} | {r.replace('|', '/')} |" for t, v, r in rows),
        "",
    ]
    TARGET.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {TARGET}: " + ", ".join(f"{v} {n}" for v, n in counts.items()))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
