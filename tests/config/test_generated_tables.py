"""The committed ``posenc/config/generated.py`` agrees with the installed transformers
(``tools/gen_config_tables.py`` regenerates it; the failure names the new and changed types)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

from posenc.config import generated  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_config_tables.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gen_config_tables", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_config_tables", module)
    spec.loader.exec_module(module)
    return module


def test_the_generated_table_names_the_installed_transformers_and_agrees_with_it():
    tool = _tool()
    diff = tool.all_differences(vars(generated), tool.build())
    assert not diff, (
        f"posenc/config/generated.py (transformers {generated.TRANSFORMERS_VERSION}) disagrees with the "
        f"installed transformers {transformers.__version__}; run python tools/gen_config_tables.py:\n" + "\n".join(diff)
    )
    assert generated.TRANSFORMERS_VERSION == transformers.__version__


def test_differences_name_new_changed_and_gone_types():
    tool = _tool()
    old = {"a": {"hidden_size": 8}, "b": {"hidden_size": 8}}
    new = {"a": {"hidden_size": 16}, "c": {"hidden_size": 8}}
    assert tool.differences(old, new) == [
        "new: c {'hidden_size': 8}",
        "gone: b",
        "changed: a {'hidden_size': 8} -> {'hidden_size': 16}",
    ]
    assert tool.all_differences({"MROPE_SECTIONS": {}}, {"MROPE_SECTIONS": {"x": [1, 2, 3]}}) == [
        "MROPE_SECTIONS new: x [1, 2, 3]"
    ]


def test_no_hand_written_override_repeats_or_shadows_a_generated_value():
    """The hand-written overrides in ``posenc.config.tables`` hold only what the generator does
    not read: one that equals the generated value is dead weight, and the table of class defaults
    that the generator replaced (``_HF_DEFAULTS``) stays gone."""
    from posenc.config import tables

    assert not hasattr(tables, "_HF_DEFAULTS")
    repeated = [
        f"{model_type}: {value}"
        for model_type, value in tables._DEFAULT_PARTIAL.items()
        if generated.PARTIAL_DEFAULTS.get(model_type) == value
    ]
    assert not repeated, "hand-written partial factors the generated table already gives: " + "; ".join(repeated)
    judged = sorted(set(tables._PARTIAL_OVERRIDES) & set(generated.READS_PARTIAL))
    assert not judged, f"hand-written partial readers the generated READS_PARTIAL already judges: {judged}"


def _cited_entries(name: str) -> dict[str, str]:
    """``{model type: the comment above it}`` of a hand-written table in ``tables.py``'s source."""
    import inspect
    import re

    from posenc.config import tables

    source = inspect.getsource(tables)
    body = source[source.index(f"{name} = {{") :]
    body = body[: body.index("\n}\n")]
    found, comment = {}, ""
    for line in body.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            comment += stripped + " "
        elif (key := re.match(r'"([^"]+)":', stripped)) is not None:
            found[key.group(1)], comment = comment, ""
    return found


@pytest.mark.parametrize("name", ["_DEFAULT_PARTIAL", "_LAYOUT_OVERRIDES", "_PARTIAL_OVERRIDES"])
def test_every_hand_written_override_cites_the_transformers_line_it_mirrors(name):
    from posenc.config import tables

    cited = _cited_entries(name)
    assert sorted(cited) == sorted(getattr(tables, name))
    package = Path(transformers.__file__).parent
    for model_type, comment in cited.items():
        path = re.search(r"transformers/(\S+\.py)", comment)
        assert path is not None, f"{name}[{model_type!r}] cites no transformers file: {comment!r}"
        source = (package / path.group(1)).read_text(encoding="utf-8")
        quoted = re.search(r"``([^`]+)``", comment)
        assert quoted is not None and quoted.group(1) in source, (
            f"{name}[{model_type!r}]: the quoted line is not in {path.group(1)}: {comment!r}"
        )


@pytest.mark.parametrize(
    ("model_type", "field", "want"),
    [
        ("sarvam_moe", "base", 8_000_000.0),  # SarvamMoeConfig: rope_theta 8e6
        ("voxtral_realtime", "base", 1_000_000.0),  # its text config's default
        ("minimax_m3_vl", "base", 5_000_000.0),
        ("qwen2_vl", "base", 1_000_000.0),  # MRoPE
        ("cosmos3_edge_text", "base", 100_000_000.0),  # its own rope dict, MRoPE section in it
        ("dots3_note_audio_encoder", "rotary_width", 32),  # its class adds partial_rotary_factor 0.5
        ("gemma4_unified", "dim", 256),  # its sliding layers: the text model's head_dim, not 2304 / 8
    ],
)
def test_a_bare_config_takes_what_the_generated_tables_read_from_its_class(model_type, field, want):
    """Model types whose class defaults posenc's hand-written table lacked (it gave base 10000, the
    whole head, ``hidden_size / num_attention_heads``) read as transformers' class gives them; each
    value is also the installed class's own."""
    import warnings

    from transformers import CONFIG_MAPPING

    import posenc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = CONFIG_MAPPING[model_type]().get_text_config(decoder=True)
        rope = posenc.rope_from_config(
            {"model_type": model_type}, layer_type="sliding_attention" if field == "dim" else None
        )
    params = text.rope_parameters.get("sliding_attention", text.rope_parameters)
    hf = {
        "base": params["rope_theta"],
        "rotary_width": int(rope.config.dim * params.get("partial_rotary_factor", 1.0)),
        "dim": vars(text).get("head_dim"),
    }[field]
    got = getattr(rope.config, field) if field != "rotary_width" else rope.config.rotary_width
    assert got == hf == want


@pytest.mark.parametrize(
    ("model_type", "want"),
    [("llama", "half"), ("gptj", "interleaved"), ("deepseek_v3", "interleaved"), ("llama4_text", "interleaved")],
)
def test_the_layout_probe_reads_the_pairs_each_rotary_path_rotates(model_type, want):
    """Rotate-half (Llama), rotate-every-two (GPT-J's sin/cos tables), DeepSeek-V3's
    ``apply_rotary_pos_emb_interleave`` (output in half order) and Llama 4's complex ``freqs_cis``
    are told apart from transformers' own rotation, and the probe says which features pair."""
    assert _tool().pair_layout(model_type) == want


def test_the_probed_layouts_agree_with_the_mrope_table_and_the_overrides_are_not_probed():
    """The MRoPE families' layouts (``posenc.config.mrope._MROPE_TYPES``, written from their
    ``apply_rotary_pos_emb``) are what the probe reads from the same code; a hand-written layout
    override is only for a type the probe cannot run."""
    from posenc.config import mrope, tables

    disagree = {
        t: (layout, generated.PAIR_LAYOUTS[t])
        for t, (_, layout, _) in mrope._MROPE_TYPES.items()
        if t in generated.PAIR_LAYOUTS and generated.PAIR_LAYOUTS[t] != layout
    }
    assert not disagree
    assert sorted(set(tables._LAYOUT_OVERRIDES) & set(generated.PAIR_LAYOUTS)) == []


@pytest.mark.parametrize(
    ("model_type", "want", "posenc_reads"),
    [
        ("glm", True, True),  # GlmRotaryEmbedding's tables span int(head_dim * factor), the rest passes through
        ("phi", True, True),  # PhiAttention passes apply_rotary_pos_emb query_states[..., : self.rotary_ndims]
        ("llama", False, False),  # LlamaRotaryEmbedding: dim = head_dim whatever the factor
        ("glmasr", False, False),  # its text model is a Llama (GlmAsrRotaryEmbedding serves the audio encoder)
        ("solar_open", None, True),  # narrower tables its attention applies to the whole head: HF raises
        ("llama4_text", None, False),  # complex freqs_cis: not judged
    ],
)
def test_the_partial_probe_reads_which_rotary_paths_honour_the_factor(model_type, want, posenc_reads):
    """``reads_partial`` tells a rotary path that narrows its tables with ``partial_rotary_factor``
    and rotates only that share from one that ignores it, and leaves undecided (None) the paths
    transformers cannot run with a factor; posenc's set is the probe's reading, with the cited
    hand-written list for undecided types."""
    from posenc.config import tables

    assert _tool().reads_partial(model_type) is want
    assert (model_type in tables._READS_PARTIAL) is posenc_reads
