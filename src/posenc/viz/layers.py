"""The layer schedule of a model's config drawn as a strip of layers: which layers rotate with which
RoPE, which have none (NoPE), which scale their queries by position.

Shape legend: ``L`` layers.

The data is :func:`posenc.layer_schedule` / :func:`posenc.query_scales_from_config` (the rules of
each family and their sources are cited in :mod:`posenc.config.schedules`), and for each RoPE its base, its
rotated width and its scaling as :func:`posenc.rope_from_config` reads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._mpl import new_figure

__all__ = ["layer_strip_data", "layer_strip_figure"]

#: Colours of the schedule entries: NoPE grey, a single RoPE blue, local (sliding-window) RoPE
#: green, global (full-attention) RoPE red; other layer types take the next tab10 colours.
_COLOURS = {"none": "0.8", "rope": "C0", "sliding_attention": "C2", "full_attention": "C3"}
_OTHER_COLOURS = ("C4", "C1", "C5", "C6", "C8", "C9")


def layer_strip_data(
    config: Mapping[str, Any] | str | os.PathLike[str], *, layout: str | None = None
) -> dict[str, Any]:
    """``{"schedule": [L] entries, "temperature": [L] bools, "ropes": {entry: description}}``: each
    RoPE described as ``base 1e+06, 128 of 128 dims, yarn`` (its base, rotated and head width,
    scaling type). ``layout`` as for :func:`posenc.rope_from_config`; the description does not
    depend on it, so model types it cannot place are described with ``"half"``."""
    from ..config import MODEL_LAYOUTS
    from ..config.fields import _load
    from ..config.schedules import NOPE, encodings_from_config, layer_schedule, query_scales_from_config

    config = _load(config)
    schedule = layer_schedule(config)
    text = config.get("text_config")
    types = {config.get("model_type"), text.get("model_type") if isinstance(text, Mapping) else None}
    known = any(t in MODEL_LAYOUTS for t in types)
    encodings = encodings_from_config(config, layout=layout or (None if known else "half"))
    ropes = {}
    for entry, encoding in zip(schedule, encodings, strict=True):
        if entry != NOPE and entry not in ropes:
            rope = encoding.config
            scaling = (rope.scaling or {}).get("rope_type", "no scaling")
            ropes[entry] = f"base {rope.base:g}, {rope.rotary_width} of {rope.dim} dims, {scaling}"
    temperature = [scale is not None for scale in query_scales_from_config(config)]
    return {"schedule": schedule, "temperature": temperature, "ropes": ropes}


def layer_strip_figure(
    config: Mapping[str, Any] | str | os.PathLike[str], *, title: str | None = None, layout: str | None = None
) -> Any:
    """A row of ``L`` cells, one per layer (layer 0 on the left), coloured by its schedule entry
    (legend: each RoPE's base, width and scaling; NoPE grey), hatched where the layer scales its
    queries by position (Llama 4's NoPE layers, Mistral's ``llama_4_scaling_beta``). ``title``
    defaults to the config's model type."""
    from matplotlib.patches import Patch, Rectangle

    data = layer_strip_data(config, layout=layout)
    schedule, temperature = data["schedule"], data["temperature"]
    others = iter(_OTHER_COLOURS * (1 + len(set(schedule)) // len(_OTHER_COLOURS)))
    colours = {entry: _COLOURS.get(entry) or next(others) for entry in dict.fromkeys(schedule)}
    layers = len(schedule)
    figure = new_figure(max(4.0, min(14.0, 0.28 * layers + 2.0)), 2.2)
    ax = figure.subplots()
    for i, (entry, hot) in enumerate(zip(schedule, temperature, strict=True)):
        ax.add_patch(
            Rectangle((i, 0), 1, 1, facecolor=colours[entry], edgecolor="white", hatch="///" if hot else None, lw=1.0)
        )
    ax.set_xlim(0, layers)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    step = max(1, layers // 12)
    ax.set_xticks([i + 0.5 for i in range(0, layers, step)], [str(i) for i in range(0, layers, step)])
    ax.set_xlabel("layer")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    handles = [
        Patch(facecolor=colour, label="NoPE" if entry == "none" else f"{entry}: {data['ropes'][entry]}")
        for entry, colour in colours.items()
    ]
    if any(temperature):
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="query temperature"))
    # "outside": constrained layout makes room for it below the strip
    figure.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)), fontsize=8, frameon=False)
    name = title if title is not None else _model_type(config)
    counts = ", ".join(f"{schedule.count(e)} {'NoPE' if e == 'none' else e}" for e in colours)
    ax.set_title(f"{name}: {layers} layers ({counts})", fontsize=10)
    return figure


def _model_type(config: Mapping[str, Any] | str | os.PathLike[str]) -> str:
    from ..config.fields import _load

    return str(_load(config).get("model_type", "config"))
