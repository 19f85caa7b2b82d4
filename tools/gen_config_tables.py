"""Write ``src/posenc/config/generated.py``: per-model-type defaults read from the installed transformers.

For every model type of ``transformers.CONFIG_MAPPING`` whose modelling source defines a rotary
embedding (a class ``*RotaryEmbedding`` or a function ``apply_rotary*``, read as text), the text
config class (``get_text_config(decoder=True)`` of the class's defaults) gives the values a
config.json may leave out: ``hidden_size``, ``num_attention_heads`` and ``max_position_embeddings``,
each under the name the class stores it by (its ``attribute_map``: DBRX's ``d_model``), and
``head_dim`` where the class fixes it (it stays put when ``hidden_size`` doubles), again under its
stored name (JetMoE's ``kv_channels``). A multimodal wrapper gets its text model's entry. And the
MRoPE sections each rotary module falls back to when a config has none (its
``config.rope_parameters.get("mrope_section", [...])``, read from the modelling source).

Run from the repository root, with the transformers to read installed:

    python tools/gen_config_tables.py            # rewrites the module
    python tools/gen_config_tables.py --check    # exit 1 and name the types that differ

``tests/config/test_generated_tables.py`` fails when the committed module disagrees with the
installed transformers.
"""

from __future__ import annotations

import argparse
import pprint
import re
import sys
import warnings
from pathlib import Path
from typing import Any

TARGET = Path(__file__).resolve().parent.parent / "src" / "posenc" / "config" / "generated.py"
_RULE = re.compile(r"^class \w*RotaryEmbedding\w*\(|^def apply_rotary\w*\(", re.M)
_SIZES = ("hidden_size", "num_attention_heads", "max_position_embeddings")


_MROPE_DEFAULT = re.compile(r'get\("mrope_section", \[(\d+), (\d+), (\d+)\]\)')


def sources() -> dict[str, str]:
    """The modelling source of every model type (its package's ``modeling_*.py`` files)."""
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    models = Path(transformers.__file__).parent / "models"
    found = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        folder = models / model_type_to_module_name(model_type)
        if not any(folder.glob("modeling_*.py")):  # a config of its own over another type's model (EXAONE: Llama's)
            folder = _borrowed_model_folder(model_type) or folder
        found[model_type] = "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("modeling_*.py")))
    return found


def _borrowed_model_folder(model_type: str) -> Path | None:
    """The folder of the model class that ``AutoModel`` builds for a type without modelling code."""
    import importlib

    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(model_type)
    name = name[0] if isinstance(name, (tuple, list)) else name
    if not name:
        return None
    cls = getattr(transformers, name, None)
    module = importlib.import_module(cls.__module__) if cls is not None else None
    return Path(module.__file__).parent if module is not None else None


def rotary_model_types() -> list[str]:
    """Model types whose modelling source defines ``*RotaryEmbedding`` or ``apply_rotary*``."""
    return [model_type for model_type, source in sources().items() if _RULE.search(source)]


def mrope_sections() -> dict[str, list[int]]:
    """The ``mrope_section`` each MRoPE rotary module falls back to, where one number list is read."""
    table = {}
    for model_type, source in sources().items():
        found = {tuple(int(n) for n in m) for m in _MROPE_DEFAULT.findall(source)}
        if len(found) == 1:
            table[model_type] = list(found.pop())
    return table


def _stored(cls: type, name: str) -> str:
    """The name under which ``cls`` stores the field ``name`` (its ``attribute_map``)."""
    return dict(getattr(cls, "attribute_map", {}) or {}).get(name, name)


def _get(config: Any, name: str) -> Any:
    """``config.name``, None where the class refuses to give one value (a per-layer attribute)."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - transformers' heterogeneous configs raise their own error
        return None


def _text(config: Any) -> Any:
    try:
        return config.get_text_config(decoder=True)
    except (AttributeError, ValueError):
        return config


def _fixed_head_dim(text: Any) -> int | None:
    """``head_dim`` of the class when it does not follow ``hidden_size`` (None where it does)."""
    head_dim = _get(text, "head_dim")
    if not isinstance(head_dim, int) or isinstance(head_dim, bool):
        return None
    try:
        wider = type(text)(**{"hidden_size": 2 * text.hidden_size})
    except Exception:  # noqa: BLE001 - a class that cannot be rebuilt: no fixed width recorded
        return None
    return head_dim if _get(wider, "head_dim") == head_dim else None


def entry(model_type: str) -> tuple[str | None, dict[str, Any]]:
    """``(text model type, defaults)`` of one model type's config class."""
    from transformers import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            text = _text(CONFIG_MAPPING[model_type]())
        except Exception:  # noqa: BLE001 - classes that need arguments have no defaults to record
            return None, {}
        cls = type(text)
        values = {}
        for name in _SIZES:
            value = _get(text, name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                values[_stored(cls, name)] = value
        head_dim = _fixed_head_dim(text)
    if head_dim is not None:
        values[_stored(cls, "head_dim")] = head_dim
    return getattr(text, "model_type", None), values


def build() -> dict[str, dict[str, Any]]:
    """Every generated table by name."""
    return {"CLASS_DEFAULTS": class_defaults(), "MROPE_SECTIONS": mrope_sections()}


def class_defaults() -> dict[str, dict[str, Any]]:
    import transformers

    transformers.logging.set_verbosity_error()
    table = {}
    for model_type in rotary_model_types():
        text_type, values = entry(model_type)
        if values:
            table[model_type] = values
            if text_type and text_type != model_type:
                table.setdefault(text_type, values)
    return dict(sorted(table.items()))


def render(tables: dict[str, dict[str, Any]]) -> str:
    import transformers

    body = pprint.pformat(tables["CLASS_DEFAULTS"], width=118, sort_dicts=True)
    sections = pprint.pformat(tables["MROPE_SECTIONS"], width=118, sort_dicts=True)
    return (
        '"""Generated by ``tools/gen_config_tables.py`` from transformers '
        f"{transformers.__version__}: do not edit.\n\n"
        "What each rotary model type's config class gives the sizes a config.json may leave out\n"
        "(``hidden_size``, ``num_attention_heads``, ``max_position_embeddings``, and ``head_dim`` where the\n"
        "class fixes it), under the names the class stores them by; the ``mrope_section`` each MRoPE\n"
        'rotary module falls back to."""\n\n'
        "from typing import Any\n\n"
        f'TRANSFORMERS_VERSION = "{transformers.__version__}"\n\n'
        f"CLASS_DEFAULTS: dict[str, dict[str, Any]] = {body}\n\n"
        f"MROPE_SECTIONS: dict[str, list[int]] = {sections}\n"
    )


def differences(old: dict[str, Any], new: dict[str, Any], table: str = "") -> list[str]:
    """The model types that are new, gone or changed between two tables."""
    where = f"{table} " if table else ""
    out = [f"{where}new: {t} {new[t]}" for t in sorted(set(new) - set(old))]
    out += [f"{where}gone: {t}" for t in sorted(set(old) - set(new))]
    out += [f"{where}changed: {t} {old[t]} -> {new[t]}" for t in sorted(set(old) & set(new)) if old[t] != new[t]]
    return out


def all_differences(committed: dict[str, Any], tables: dict[str, dict[str, Any]]) -> list[str]:
    return [line for name, table in tables.items() for line in differences(committed.get(name, {}), table, name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed module; write nothing")
    args = parser.parse_args(argv)
    table = build()
    if args.check:
        namespace: dict[str, Any] = {}
        exec(TARGET.read_text(encoding="utf-8"), namespace)  # the committed module, our own file
        diff = all_differences(namespace, table)
        print("\n".join(diff) or "generated.py is current")
        return 1 if diff else 0
    TARGET.write_text(render(table), encoding="utf-8")
    print(f"wrote {TARGET} ({len(table['CLASS_DEFAULTS'])} model types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
