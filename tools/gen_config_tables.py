"""Write ``src/posenc/config/generated.py``: per-model-type tables read from the installed transformers.

For every model type of ``transformers.CONFIG_MAPPING`` whose modelling source defines a rotary
embedding (a class ``*RotaryEmbedding`` or a function ``apply_rotary*``, read as text), the text
config class (``get_text_config(decoder=True)`` of the class's defaults) gives the values a
config.json may leave out: ``hidden_size``, ``num_attention_heads`` and ``max_position_embeddings``,
each under the name the class stores it by (its ``attribute_map``: DBRX's ``d_model``), and
``head_dim`` where the class fixes it (it stays put when ``hidden_size`` doubles), again under its
stored name (JetMoE's ``kv_channels``); ``qk_rope_head_dim``, ``rotary_dim`` and
``original_max_position_embeddings`` where it has them (``CLASS_DEFAULTS``). Its RoPE defaults
(``ROPE_DEFAULTS``, ``PARTIAL_DEFAULTS``): the class is built with a sentinel base in each field it
may build ``rope_parameters`` from; where the sentinel reaches a plain dict the class builds it from
its fields (its default ``rope_theta`` and added ``partial_rotary_factor`` are recorded), else the
dict is its own (recorded whole, with its ``default_theta``). The aliases of its ``attribute_map``
(``FIELD_ALIASES``). A multimodal wrapper's text model type without a class of its own gets the
wrapper's entries. The MRoPE sections each rotary module falls back to when a config has none (its
``config.rope_parameters.get("mrope_section", [...])``, read from the modelling source). And the
pair layout each type's attention applies (``PAIR_LAYOUTS``), read numerically: basis vectors rotated
by the type's own rotary module and apply function (``tools/hf_rotary.py``, the harness that
``tests/test_rope_config_sweep.py`` compares posenc with) show which features pair. And whether
each type's rotary path reads ``partial_rotary_factor`` (``READS_PARTIAL``): its rotary module
built with the factor 0.5 and 1.0, and its apply function run on a whole head with the narrower
tables (a wrapper whose text model is another type's, GLM-ASR's Llama, read from that type's code).

Run from the repository root, with the transformers to read installed:

    python tools/gen_config_tables.py            # rewrites the module
    python tools/gen_config_tables.py --check    # exit 1 and name the types that differ

``tests/config/test_generated_tables.py`` fails when the committed module disagrees with the
installed transformers.
"""

from __future__ import annotations

import argparse
import copy
import pprint
import re
import sys
import warnings
from pathlib import Path
from typing import Any

TARGET = Path(__file__).resolve().parent.parent / "src" / "posenc" / "config" / "generated.py"
_RULE = re.compile(r"^class \w*RotaryEmbedding\w*\(|^def apply_rotary\w*\(", re.M)
_SIZES = ("hidden_size", "num_attention_heads", "max_position_embeddings")
#: Widths and lengths a class may default: the multi-head-latent rotated slice, GPT-J's rotated
#: features, Phi-3's pretraining length.
_WIDTHS = ("qk_rope_head_dim", "rotary_dim", "original_max_position_embeddings")


#: A ``rope_theta`` no config class uses: a class whose ``rope_parameters`` do not take it gives its own.
_SENTINEL_THETA = 12_345.0
_DEFAULT_THETA = 10_000.0  # RotaryEmbeddingConfigMixin.default_theta
#: Base fields a class may pop from its keywords without keeping them as attributes.
_LEGACY_BASES = ("rotary_emb_base", "rope_local_base_freq", "global_rope_theta", "local_rope_theta")


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


def _aliases(cls: type) -> dict[str, str]:
    """``{stored name: standard name}`` of the fields posenc reads that ``cls`` stores under another
    name (its ``attribute_map``: GPT-J's ``n_positions``, JetMoE's ``kv_channels``)."""
    read = (*_SIZES, "head_dim", *_WIDTHS)
    found = dict(getattr(cls, "attribute_map", {}) or {})
    return {stored: name for name, stored in sorted(found.items()) if name in read and stored != name}


def _get(config: Any, name: str) -> Any:
    """``config.name``; the stored global value where the class refuses to give one (a per-layer
    attribute of a heterogeneous config, Gemma 4's ``head_dim``)."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - transformers' heterogeneous configs raise their own error
        return vars(config).get(name)


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


def _flat(params: dict[str, Any]) -> bool:
    return not any(isinstance(v, dict) or v is None for v in params.values())


def _base_fields(text: Any) -> list[str]:
    """The fields a class may build its RoPE base from: ``rope_theta`` and each float field of its
    defaults named like a base (GPT-NeoX's ``rotary_emb_base``, ModernBERT's ``global_rope_theta``,
    Gemma 3's ``rope_local_base_freq``)."""
    named = {n for n, v in vars(text).items() if ("theta" in n or "base" in n) and isinstance(v, float)}
    return ["rope_theta", *sorted((named | set(_LEGACY_BASES)) - {"rope_theta"})]


def _probe_params(text: Any) -> dict[str, Any] | None:
    """``rope_parameters`` of the class built with a sentinel base in one of :func:`_base_fields`:
    the first that carries it (the class builds its dict from that field), else None (the class
    gives a dict of its own whatever those fields say)."""
    for name in _base_fields(text):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                params = copy.deepcopy(getattr(type(text)(**{name: _SENTINEL_THETA}), "rope_parameters", None))
        except Exception:  # noqa: BLE001 - a class that refuses the keyword: try the next field
            continue
        if repr(_SENTINEL_THETA) in repr(params):
            return params
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rope_entry(text: Any) -> tuple[dict[str, Any], float | None]:
    """``(rope defaults, default partial_rotary_factor)`` of one text config. A class that builds
    its ``rope_parameters`` from its fields (a sentinel base reaches a plain dict, or each layer
    type's dict that has no base of its own) gives ``rope_theta``
    where its base is not 10000 (the built dict's, else ``default_theta``) and the
    ``partial_rotary_factor`` it adds (GLM's and Bamba's 0.5, GPT-NeoX's 0.25); a class with a dict
    of its own (a scaling, a dict per layer type, an MRoPE section) gives that dict as
    ``rope_parameters``, with its ``default_theta``. Vision (``axial``) RoPE is left out."""
    params = copy.deepcopy(getattr(text, "rope_parameters", None))
    if not isinstance(params, dict) or not params or params.get("rope_type") == "axial":
        return {}, None
    probe = _probe_params(text)
    plain = probe is not None and _flat(probe)
    plain = plain and {k: v for k, v in probe.items() if k != "partial_rotary_factor"} == {
        "rope_type": "default",
        "rope_theta": _SENTINEL_THETA,
    }
    theta = _number(params.get("rope_theta")) if plain else _number(getattr(type(text), "default_theta", None))
    values: dict[str, Any] = {"rope_theta": theta} if theta is not None and theta != _DEFAULT_THETA else {}
    if probe is None or (_flat(probe) and not plain):  # a dict of its own (GPT-OSS's yarn takes a base only)
        values["rope_parameters"] = params
    partial = _number(probe.get("partial_rotary_factor")) if plain else None
    return values, (partial if partial is not None and 0 < partial < 1 else None)


def entry(model_type: str) -> tuple[str | None, dict[str, Any], dict[str, Any], float | None, dict[str, str]]:
    """``(text model type, sizes, rope defaults, default partial factor, field aliases)`` of one
    model type's config class."""
    from transformers import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            text = _text(CONFIG_MAPPING[model_type]())
        except Exception:  # noqa: BLE001 - classes that need arguments have no defaults to record
            return None, {}, {}, None, {}
        cls = type(text)
        values = {}
        for name in _SIZES + _WIDTHS:
            value = _get(text, name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                values[_stored(cls, name)] = value
        head_dim = _fixed_head_dim(text)
        rope, partial = rope_entry(text)
    if head_dim is not None:
        values[_stored(cls, "head_dim")] = head_dim
    return getattr(text, "model_type", None), values, rope, partial, _aliases(cls)


#: The tables :func:`class_tables` fills, in :func:`entry`'s order after the text model type.
_CLASS_TABLES = ("CLASS_DEFAULTS", "ROPE_DEFAULTS", "PARTIAL_DEFAULTS", "FIELD_ALIASES")


def build() -> dict[str, dict[str, Any]]:
    """Every generated table by name. posenc is imported first: the layout and partial-factor
    probes read head widths with it, and would silently read nothing if it failed to import."""
    import posenc  # noqa: F401 - fails loudly here, not inside a probe's broad except

    return {
        **class_tables(),
        "MROPE_SECTIONS": mrope_sections(),
        "PAIR_LAYOUTS": pair_layouts(),
        "READS_PARTIAL": partial_readers(),
    }


def class_tables() -> dict[str, dict[str, Any]]:
    """What each rotary type's config class gives (a multimodal wrapper's text model type too)."""
    import transformers

    transformers.logging.set_verbosity_error()
    tables: dict[str, dict[str, Any]] = {name: {} for name in _CLASS_TABLES}
    wrapped: dict[str, str] = {}  # text model type -> the first wrapper that gives it
    for model_type in rotary_model_types():
        text_type, *found = entry(model_type)
        for name, value in zip(_CLASS_TABLES, found, strict=True):
            if value:
                tables[name][model_type] = value
        if text_type and text_type != model_type:
            wrapped.setdefault(text_type, model_type)
    for text_type, wrapper in wrapped.items():
        if text_type in tables["CLASS_DEFAULTS"]:  # a class of its own: its own defaults, not the wrapper's
            continue
        for table in tables.values():
            if wrapper in table:
                table[text_type] = table[wrapper]
    return {name: dict(sorted(table.items())) for name, table in tables.items()}


def class_defaults() -> dict[str, dict[str, Any]]:
    return class_tables()["CLASS_DEFAULTS"]


_HEADER = """What each rotary model type's config class gives the fields a config.json may leave out:
``CLASS_DEFAULTS``: the sizes (``hidden_size``, ``num_attention_heads``, ``max_position_embeddings``,
and ``head_dim`` where the class fixes it), under the names the class stores them by;
``ROPE_DEFAULTS``: ``rope_theta`` where its default base is not 10000, and ``rope_parameters`` where
the class gives its own (a scaling, a dict per layer type, an MRoPE section);
``PARTIAL_DEFAULTS``: the ``partial_rotary_factor`` it adds to the dict it builds from ``rope_theta``;
``FIELD_ALIASES``: ``{stored name: standard name}`` of the fields it stores under other names;
``MROPE_SECTIONS``: the ``mrope_section`` each MRoPE rotary module falls back to;
``PAIR_LAYOUTS``: the pair layout each type's own rotary path applies, read off its rotation of
basis vectors (``half``: ``rotate_half``, pairs ``(i, i + d/2)``; ``interleaved``: ``(2i, 2i+1)``);
``READS_PARTIAL``: whether each type's own rotary path reads ``partial_rotary_factor`` (its rotary
module's tables narrow with the factor and its ``apply_rotary_pos_emb`` rotates only that much)."""


def render(tables: dict[str, dict[str, Any]]) -> str:
    import transformers

    def table(name: str, kind: str) -> str:
        return f"{name}: {kind} = {pprint.pformat(tables[name], width=118, sort_dicts=True)}\n"

    return (
        '"""Generated by ``tools/gen_config_tables.py`` from transformers '
        f"{transformers.__version__}: do not edit.\n\n{_HEADER}" + '"""\n\n'
        "from typing import Any\n\n"
        f'TRANSFORMERS_VERSION = "{transformers.__version__}"\n\n'
        + table("CLASS_DEFAULTS", "dict[str, dict[str, Any]]")
        + "\n"
        + table("ROPE_DEFAULTS", "dict[str, dict[str, Any]]")
        + "\n"
        + table("PARTIAL_DEFAULTS", "dict[str, float]")
        + "\n"
        + table("FIELD_ALIASES", "dict[str, dict[str, str]]")
        + "\n"
        + table("MROPE_SECTIONS", "dict[str, list[int]]")
        + "\n"
        + table("PAIR_LAYOUTS", "dict[str, str]")
        + "\n"
        + table("READS_PARTIAL", "dict[str, bool]")
    )


#: The position the layout probe rotates at: every frequency's angle there is far from 0 and pi.
_PROBE_POSITION = 1000


def _hf_rotary():
    """``tools/hf_rotary.py``, the harness that runs each type's own rotary path."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import hf_rotary

    return hf_rotary


def _probe_width(config: Any) -> int:
    """The head width posenc reads for ``config`` (the layout aside): the width to probe with."""
    import posenc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return posenc.rope_from_config(config.to_dict(), layout="half", layer_type=_probe_layer(config)).config.dim


def _probe_layer(config: Any) -> str | None:
    params = getattr(config.get_text_config(decoder=True), "rope_parameters", None) or {}
    kinds = sorted(k for k, v in params.items() if isinstance(v, dict))
    return kinds[0] if kinds and not _flat(params) else None


def _partners(rotated: Any) -> dict[int, int]:
    """``{input feature: the one other input feature whose rotation reaches the same outputs}``."""
    import torch

    support = [frozenset(torch.nonzero(row.abs() > 1e-9).flatten().tolist()) for row in rotated]
    found = {}
    for j, outputs in enumerate(support):
        if len(outputs) == 2:
            others = [k for k, o in enumerate(support) if o == outputs and k != j]
            if len(others) == 1:
                found[j] = others[0]
    return found


def pair_layout(model_type: str) -> str | None:
    """The pair layout ``model_type``'s own attention applies, read off its rotation: each basis
    vector ``e_j`` rotated at one position by transformers' rotary module and apply function
    (``tools/hf_rotary.py``) reaches two outputs; the feature it shares them with is ``j + 1``
    (pairs ``(2i, 2i+1)``: ``interleaved``) or ``j + d/2`` for every pair (``rotate_half``:
    ``half``). None where the path cannot be run (a type whose model is another type's: its
    modelling module is not its own) or the pairs are neither."""
    import torch

    hf_rotary = _hf_rotary()
    try:
        config, _, module, rotary = hf_rotary.build(model_type)
        width = _probe_width(config)
        basis = torch.eye(width)[None, :, None, :]  # [1, h = width, s = 1, width]: head j is e_j
        positions = torch.tensor([_PROBE_POSITION])
        rotated = hf_rotary.rotate(model_type, module, rotary, basis, basis, positions, _probe_layer(config))[0]
    except Exception:  # noqa: BLE001 - a path the harness cannot run: not derived
        return None
    partners = _partners(rotated[0, :, 0, :])
    if len(partners) < 4:
        return None
    first = min(partners)
    step = partners[first] - first
    if step == 1:
        return "interleaved"
    together = all(abs(partner - j) == step for j, partner in partners.items())
    return "half" if together else None  # Gemma 4's proportional RoPE: pairs (i, i + 256) of 512


def _set_partial(factor: float):
    """A ``prepare`` for :func:`hf_rotary.build`: ``partial_rotary_factor`` set to ``factor`` at the
    text config's top level and in each of its ``rope_parameters`` dicts."""

    def prepare(text: Any) -> None:
        params = getattr(text, "rope_parameters", None)
        if isinstance(params, dict):
            for inner in [v for v in params.values() if isinstance(v, dict)] or [params]:
                inner["partial_rotary_factor"] = factor
        text.partial_rotary_factor = factor

    return prepare


def _text_model_type(model_type: str) -> str:
    """The model type whose modelling code runs ``model_type``'s text model: the text config's own
    type where its package is another one (GLM-ASR's text model is a Llama), else ``model_type``."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text_type = getattr(_text(CONFIG_MAPPING[model_type]()), "model_type", None) or model_type
    same = model_type_to_module_name(text_type) == model_type_to_module_name(model_type)
    return model_type if same or text_type not in CONFIG_MAPPING else text_type


def reads_partial(model_type: str) -> bool | None:
    """Whether ``model_type``'s own rotary path reads ``partial_rotary_factor``, read numerically:
    its rotary module built with the factor 0.5 gives narrower tables than with 1.0, and its
    ``apply_rotary_pos_emb`` rotates only that much (:func:`_applies_narrow`). None where the path
    cannot be run (a type whose model is another type's; complex tables) or transformers cannot
    apply the narrower tables it builds (its attention applies them to the whole head and raises).
    A wrapper whose text model is another type's (GLM-ASR's Llama) is read from that type's code."""
    import torch

    hf_rotary = _hf_rotary()
    runs = _text_model_type(model_type)
    try:
        config, _, module, half = hf_rotary.build(runs, _set_partial(0.5))
        full = hf_rotary.build(runs, _set_partial(1.0))[3]
        layer = _probe_layer(config)
        width = _probe_width(hf_rotary.build(runs)[0])
        extra, position = ([layer] if layer else []), torch.tensor([[7]])
        with torch.no_grad():
            cos, sin = half(torch.zeros(1), position, *extra)
            wide = full(torch.zeros(1), position, *extra)[0].shape[-1]
    except Exception:  # noqa: BLE001 - a path the harness cannot run: not derived
        return None
    if cos.shape[-1] >= wide:
        return False
    return _applies_narrow(model_type, module, cos, sin, width)


#: The attention of these passes its apply function only the rotated features (``rotary_ndims``).
_SLICES_ROTARY = re.compile(r"\[\.\.\., : ?self\.rotary_ndims\]")


def _applies_narrow(model_type: str, module: Any, cos: Any, sin: Any, width: int) -> bool | None:
    """Whether ``module``'s apply function rotates only the features narrower tables span: it
    applies them to a whole head and leaves the rest as it was, or its attention slices the
    rotated features off first (:data:`_SLICES_ROTARY`); None where it cannot apply them to a whole
    head and the attention does not slice (transformers raises there)."""
    import inspect

    import torch

    hf_rotary = _hf_rotary()
    name = "apply_rotary_pos_emb_interleave" if model_type in hf_rotary._INTERLEAVE_APPLY else "apply_rotary_pos_emb"
    apply = getattr(module, name, None)
    if apply is None:
        return None
    q = torch.randn(1, 1, 1, width, generator=torch.Generator().manual_seed(0))
    try:
        out = apply(q, q, cos, sin)[0]
    except (TypeError, RuntimeError):
        try:  # Gemma 3n / 4 rotate one tensor at a time
            out = apply(q, cos, sin)
        except (TypeError, RuntimeError):
            return True if _SLICES_ROTARY.search(inspect.getsource(module)) else None
    r = cos.shape[-1]
    return out.shape[-1] == width and torch.equal(out[..., r:], q[..., r:])


def _per_type(probe: Any) -> dict[str, Any]:
    """``probe(model_type)`` of every rotary model type, where it gives an answer (not None)."""
    import transformers

    transformers.logging.set_verbosity_error()
    found = {}
    for model_type in rotary_model_types():
        answer = probe(model_type)
        if answer is not None:
            found[model_type] = answer
    return found


def partial_readers() -> dict[str, bool]:
    """:func:`reads_partial` of every rotary model type, where it is read."""
    return _per_type(reads_partial)


def pair_layouts() -> dict[str, str]:
    """:func:`pair_layout` of every rotary model type, where it is read."""
    return _per_type(pair_layout)


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
