"""The interactive explorer: ``explorer.html`` beside the atlas, computed and drawn in the browser.

A reader picks a scheme (sinusoidal; RoPE with each scaling posenc has: default, linear, ntk,
dynamic, yarn, llama3, longrope, proportional; ALiBi; T5's buckets) and sets the head width, base,
scaling parameters and lengths, each with a slider and an exact number box beside it (a value out
of range or not a number is shown as an error, never clamped); the encoding heatmap, the
dot-product and cosine-distance matrices, the clock of the sin/cos pairs, the logit-vs-distance
curve and a table of every frequency (ALiBi: every slope; T5: every bucket) are recomputed in the
page. A real model's RoPE comes from a preset (the RoPE fields of published config.json files:
Llama 3.1 8B, Qwen2.5 with YaRN, DeepSeek-V3, Phi-3 mini 128k, Gemma 3 local and global, GPT-OSS)
or from a config.json pasted into the page, read with ``JSON.parse`` as
:func:`posenc.rope_from_config` reads it (the model types whose reading needs more than the common
fields are named and left to posenc).

Shape legend (of the page's panels): ``n`` positions, ``d`` width, ``r`` rotated width, ``h`` heads,
``L`` distances.

The page is one self-contained file: the template ``assets/explorer.html`` with two inline
scripts, the vendored plotly.js cartesian bundle (``assets/plotly-cartesian.min.js``, MIT, license
in ``assets/plotly-LICENSE.txt``) and ``assets/explorer.js``, whose first part ports posenc's
formulas (:mod:`posenc.functional.sinusoidal`, :mod:`posenc.functional.rope_scaling`,
:func:`posenc.functional.alibi_slopes`, :func:`posenc.functional.t5_relative_bucket`,
:func:`posenc.rope_from_config`) and names the Python function each port mirrors; the model tables
of :mod:`posenc.config` are written into it (:func:`model_tables`).
``tests/report/test_explorer.py`` types into every control, loads every preset and pasted configs
in headless Chromium and checks the page's numbers against posenc at float64 precision. Nothing
is fetched from the network.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .._files import replaced_whole

__all__ = ["explorer_html", "write_explorer", "model_tables", "EXPLORER_FILE"]

#: The explorer's file name, beside the atlas's ``index.html``.
EXPLORER_FILE = "explorer.html"

_ASSETS = ("explorer.html", "plotly-cartesian.min.js", "explorer.js")


def _asset(name: str) -> str:
    return resources.files("posenc.report").joinpath("assets", name).read_text(encoding="utf-8")


def _inline_script(code: str) -> str:
    """``code`` safe inside ``<script>``: a literal ``</script`` would end the element early."""
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _special_model_types() -> dict[str, str]:
    """Why the page leaves a model type to :func:`posenc.rope_from_config`: its reading rules beyond
    the common fields, which the page's port (``readConfig`` in ``assets/explorer.js``) lacks."""
    from ..config import families, fields, mrope, scaling, tables
    from ..config.generated import FIELD_ALIASES

    reasons = (
        (mrope._MROPE_TYPES, "multimodal RoPE (MRoPE sections per axis)"),
        (mrope._MROPE_REFUSED, "a multimodal RoPE that posenc refuses"),
        (families._CLASS_BUILT_ROPE, "its config class builds the rope dicts from other fields"),
        (scaling._MSCALE_TYPES, "short_mscale and long_mscale scale cos and sin"),
        (scaling._NTK_ALPHA_TYPES, "a dynamic scaling with 'alpha' is NTK-alpha scaling"),
        (families._GLOBAL_LOCAL, "global_rope_theta and local_rope_theta give two RoPEs"),
        (fields._TRAILING_ROPE, "the trailing features of each head rotate"),
        (FIELD_ALIASES, "its fields have other names (d_model, n_heads)"),
        (("zamba2",), "its heads are attention_head_dim wide, else 2 * hidden_size / num_attention_heads"),
        (fields._HEAD_DIM_FROM_WIDTH, "its heads are hidden_size / num_attention_heads wide whatever head_dim says"),
        (tables._LAYER_PARTIAL_ONLY, "partial_rotary_factor is read per layer type only"),
        (tables._GEMMA4, "its full-attention heads are global_head_dim wide, with per-layer overrides"),
        (tables._NEOX, "the base and share come only from rotary_emb_base and rotary_pct"),
        (tables._ROTARY_DIM_TYPES, "rotary_dim features rotate"),
        (tables._FIXED_PARTIAL, "its config class fixes partial_rotary_factor"),
    )
    special: dict[str, str] = {}
    for types, reason in reasons:
        for model_type in types:
            special.setdefault(model_type, reason)
    return special


def model_tables() -> dict:
    """posenc.config's tables that the page's config reader needs, as JSON-ready data."""
    from ..config import families, tables
    from ..config.generated import CLASS_DEFAULTS, PARTIAL_DEFAULTS, ROPE_DEFAULTS
    from ..functional.rope_scaling import SCALING_KEYS

    return {
        "layouts": tables.MODEL_LAYOUTS,
        "interleaveFlag": list(families._ROPE_INTERLEAVE_FLAG),
        # the class's sizes under the class's own field names, then its rope defaults: as
        # posenc.config.rope merges them before reading a config
        "defaults": {
            model_type: {**CLASS_DEFAULTS.get(model_type, {}), **ROPE_DEFAULTS.get(model_type, {})}
            for model_type in sorted(set(CLASS_DEFAULTS) | set(ROPE_DEFAULTS))
        },
        "readsPartial": sorted(tables._READS_PARTIAL),
        "defaultPartial": {**PARTIAL_DEFAULTS, **tables._DEFAULT_PARTIAL},
        "layerTyped": families._LAYER_TYPED,
        "yarnIsLongrope": list(tables._YARN_IS_LONGROPE),
        "scalingKeys": {
            kind: [sorted(required), sorted(optional)] for kind, (required, optional) in SCALING_KEYS.items()
        },
        "special": _special_model_types(),
    }


def explorer_html() -> str:
    """The explorer page as one string: the template with plotly.js and the explorer's script inlined,
    the script holding posenc's model tables (:func:`model_tables`)."""
    template, plotly, script = (_asset(name) for name in _ASSETS)
    for text, marker in ((template, "/*@PLOTLY@*/"), (template, "/*@EXPLORER@*/"), (script, _TABLES_MARKER)):
        if text.count(marker) != 1:
            raise RuntimeError(f"the explorer's assets must hold {marker} once (posenc's package data is damaged)")
    script = script.replace(_TABLES_MARKER, json.dumps(model_tables(), sort_keys=True, allow_nan=False))
    return template.replace("/*@PLOTLY@*/", _inline_script(plotly)).replace("/*@EXPLORER@*/", _inline_script(script))


_TABLES_MARKER = "/*@MODEL_TABLES@*/null"


def write_explorer(out_dir: str | Path) -> Path:
    """Write ``out_dir/explorer.html`` (about 1.6 MB, self-contained) and return its path.

    The folder is created if needed; an earlier page stays whole until the new one replaces it.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EXPLORER_FILE
    with replaced_whole(path) as tmp:
        tmp.write_text(explorer_html(), encoding="utf-8")
    return path
