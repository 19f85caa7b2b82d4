"""``posenc.rope_from_config`` on every rotary model type of the installed transformers (issue 25).

Which types: a model type of ``transformers.CONFIG_MAPPING`` is *rotary* when the modelling source
of its package (``transformers/models/<module>/modeling_*.py``, ``<module>`` from
``model_type_to_module_name``) defines a class named ``*RotaryEmbedding`` or a function named
``apply_rotary*`` (read as text, nothing imported). Each rotary type is either covered here or
listed in :data:`NOT_READ` with the reason; a rotary type in neither fails the sweep.

What is compared, per covered type: the type's config class with its defaults
(``CONFIG_MAPPING[t]()``, its text config for multimodal wrappers), written out as
``config.to_dict()`` (what ``save_pretrained`` writes) and read by posenc; transformers' own
rotary module of that type built from the same config, and the function its attention applies
(``apply_rotary_pos_emb``; ``apply_rotary_pos_emb_interleave`` for the multi-head-latent types of
:data:`_INTERLEAVE_APPLY`, whose output HF writes in half order; the complex ``apply_rotary_emb``
of Llama 4 and DeepSeek-V2; GPT-J's ``sin, cos`` tables). Queries and keys rotated by both at
positions ``[0, 1, 7, 4095, 32767]`` and 100..115 agree for every layer type the rotary module has,
to ``8 * (2e-6 + 1.5e-7 * largest angle)`` absolute (times the attention scale when above 1): HF
forms ``position * inv_freq`` in float32, posenc in float64, and float32 angles near 32767 carry
errors of about 1.5e-7 of their size (the bound of ``tests/test_rope_config_models.py``).

Where posenc deliberately differs (float64 frequencies and angles, reduced mod 2π before the cast),
the referee is a float64 evaluation of transformers' own formula: its rotary module built and run,
and its apply function run, with every float32 (complex64) it asks for promoted to float64
(complex128) (:func:`float64_evaluation`), so the frequencies come from its own rope init function
and the ``position * inv_freq`` products, cos/sin, attention scaling and rotation are its own code
in float64. At the large positions 4095, 32767 and 1_000_003 (GPT-J and CodeGen: 1024 and 2047,
the last row of their 2048-row tables, past which their module cannot index) posenc's rotated
queries and keys must be at least as close to that referee as transformers' float32 ones (plus
1e-9 for ties), strictly closer at the largest position, where transformers' float32 angles are
measurably off (its error there above 1e-5), and within 2e-6 of it (float32 rounding of the
rotation, times the attention scale when above 1). Every covered type and layer type is compared
this way; :data:`_FLOAT64_FAMILIES` says why the evaluation is meaningful for each special family.

Shapes: q, k ``[b, h, s, hd]``; HF's cos, sin ``[b, s, r]`` (r the rotated width; ``r / 2`` for
GPT-OSS's ``_apply_rotary_emb`` and the complex ``freqs_cis``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import sys
import warnings
import zlib
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

import posenc

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.auto.configuration_auto import model_type_to_module_name  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import hf_rotary  # noqa: E402
from hf_rotary import _COMPLEX, _HALF_TABLES, _INTERLEAVE_APPLY, _SIN_COS  # noqa: E402, F401

POSITIONS = torch.tensor([0, 1, 7, 4095, 32767, *range(100, 116)])
#: Where transformers' float32 angles are measurably off: the float64 referee's positions.
LARGE_POSITIONS = torch.tensor([4095, 32767, 1_000_003])
#: GPT-J and CodeGen index a table of max_position_embeddings (2048) rows: its middle and last row.
TABLE_POSITIONS = torch.tensor([1024, 2047])

_MROPE = "MRoPE ((t, h, w) positions): tests/parity/test_mrope_transformers.py"
_VISION = "vision RoPE over 2-D patch coordinates (issue 25 item 7), not a 1-D text RoPE"
_AUDIO_VISION_PART = "a vision or audio sub-config of a multimodal model, with no text RoPE of its own"
_VISION_ONLY = (
    "multimodal model whose package's only rotary module is its vision encoder's (2-D); its text "
    "model is another model type"
)
_AUDIO_VISION_PART = (
    "vision, audio or codec sub-config without RoPE fields (no rope_parameters or "
    "max_position_embeddings): the package's rotary module serves its text config"
)
_COMPOSITE = "composite config (encoder-decoder or wrapper) whose RoPE parts are model types of their own, covered here"
_UNUSED = "defines apply_rotary_pos_emb but never calls it and has no rotary module: no RoPE"
_CLVP = "ClvpRotaryPositionalEmbedding, built from sizes rather than rope fields; not read yet"

#: How many rotary model types the sweep covers (transformers 5.24), quoted by the README.
COVERED_COUNT = 208

#: Rotary model types posenc does not read, and why.
NOT_READ: dict[str, str] = {
    "cohere_compass": _MROPE,
    "cohere_compass_text": _MROPE,
    "ernie4_5_vl_moe": _MROPE,
    "ernie4_5_vl_moe_text": _MROPE,
    "glm4v": _MROPE,
    "glm4v_text": _MROPE,
    "glm4v_moe": _MROPE,
    "glm4v_moe_text": _MROPE,
    "glm_image": _MROPE,
    "glm_image_text": _MROPE,
    "glm_ocr": _MROPE,
    "glm_ocr_text": _MROPE,
    "hunyuan_vl": _MROPE,
    "hunyuan_vl_text": _MROPE,
    "hy_v4_vl": _MROPE,
    "hy_v4_vl_text": _MROPE,
    "neomme": _MROPE,
    "paddleocr_vl": _MROPE,
    "paddleocr_vl_text": _MROPE,
    "qwen2_5_omni": _MROPE,
    "qwen2_5_omni_talker": _MROPE,
    "qwen2_5_omni_text": _MROPE,
    "qwen2_5_omni_thinker": _MROPE,
    "qwen2_5_vl": _MROPE,
    "qwen2_5_vl_text": _MROPE,
    "qwen2_vl": _MROPE,
    "qwen2_vl_text": _MROPE,
    "qwen3_omni_moe": _MROPE,
    "qwen3_omni_moe_talker_code_predictor": _MROPE,
    "qwen3_omni_moe_talker_text": _MROPE,
    "qwen3_omni_moe_text": _MROPE,
    "qwen3_omni_moe_thinker": _MROPE,
    "qwen3_vl": _MROPE,
    "qwen3_vl_text": _MROPE,
    "qwen3_vl_moe": _MROPE,
    "qwen3_vl_moe_text": _MROPE,
    "qwen4_exp": _MROPE,
    "qwen4_exp_text": _MROPE,
    "dinov3_vit": _VISION,
    "eomt_dinov3": _VISION,
    "efficientloftr": _VISION,
    "edgetam_video": _VISION,
    "edgetam_video_mask_decoder": _VISION,
    "edgetam_video_prompt_encoder": _VISION,
    "sam2_video": _VISION,
    "sam2_video_mask_decoder": _VISION,
    "sam2_video_prompt_encoder": _VISION,
    "sam3": _VISION,
    "sam3_detr_decoder": _VISION,
    "sam3_detr_encoder": _VISION,
    "sam3_geometry_encoder": _VISION,
    "sam3_mask_decoder": _VISION,
    "sam3_tracker_video": _VISION,
    "sam3_tracker_video_mask_decoder": _VISION,
    "sam3_tracker_video_prompt_encoder": _VISION,
    "sam3_vision_model": _VISION,
    "sam3_vit_model": _VISION,
    "pixtral": _VISION,
    "mlcd": _VISION,
    "mlcd_vision_model": _VISION,
    "gemma4_vision": _VISION,
    "inkling2_vision": _VISION,
    "kimi_k25_vision": _VISION,
    "lfm3_vl_vision": _VISION,
    "llama4_vision_model": _VISION,
    "minimax_m3_vl_vision": _VISION,
    "muse_glimmer_vision": _VISION,
    "muse_spark_vision": _VISION,
    "paddleocr_vl_vision": _VISION,
    "step3p5_vision": _VISION,
    "video_llama_3_vision": _VISION,
    "dots3_note_vision_encoder": _VISION,
    "lightglue": _VISION,
    "sapiens2": _VISION,
    "sapiens2_head": _VISION,
    "unlimited_ocr_sam_vision_model": _VISION,
    "deepseek_ocr2_sam_vision_model": _VISION,
    "cohere_compass_vision": _VISION,
    "ernie4_5_vl_moe_vision": _VISION,
    "exaone4_5_vision": _VISION,
    "glm4v_moe_vision": _VISION,
    "glm4v_vision": _VISION,
    "glm5_next_vision": _VISION,
    "glm_ocr_vision": _VISION,
    "qwen2_5_vl_vision": _VISION,
    "qwen2_vl_vision": _VISION,
    "qwen3_5_moe_vision": _VISION,
    "qwen3_5_vision": _VISION,
    "qwen3_vl_moe_vision": _VISION,
    "qwen3_vl_vision": _VISION,
    "qwen4_exp_vision": _VISION,
    "esmfold2": "RoPE over 3-D spatial coordinates (num_spatial_rope_pairs_per_axis), not token positions",
    "exaone4_5": _VISION_ONLY,
    "glm5_next": _VISION_ONLY,
    "glm5_next_text": _VISION_ONLY,
    "inkling2": _VISION_ONLY,
    "inkling2_text": _VISION_ONLY,
    "kimi_k25": _VISION_ONLY,
    "lfm3_vl": _VISION_ONLY,
    "video_llama_3": _VISION_ONLY,
    "apertus1p5_vision_tokenizer": _AUDIO_VISION_PART,
    "chameleon_vqgan": _AUDIO_VISION_PART,
    "emu3_vqgan": _AUDIO_VISION_PART,
    "glm_image_vqmodel": _AUDIO_VISION_PART,
    "glm_image_vision": _AUDIO_VISION_PART,
    "cosmos3_edge_vision": _AUDIO_VISION_PART,
    "deepseek_ocr2_vision": _AUDIO_VISION_PART,
    "gemma3n_audio": _AUDIO_VISION_PART,
    "gemma3n_vision": _AUDIO_VISION_PART,
    "gemma4_audio": _AUDIO_VISION_PART,
    "gemma4_unified_audio": _AUDIO_VISION_PART,
    "gemma4_unified_vision": _AUDIO_VISION_PART,
    "granite_docling_vision": _AUDIO_VISION_PART,
    "hunyuan_vl_vision": _AUDIO_VISION_PART,
    "hy_v4_vl_vision": _AUDIO_VISION_PART,
    "idefics_perciever": _AUDIO_VISION_PART,
    "idefics_vision": _AUDIO_VISION_PART,
    "mllama_vision_model": _AUDIO_VISION_PART,
    "molmo2_adapter": _AUDIO_VISION_PART,
    "molmo2_vision": _AUDIO_VISION_PART,
    "muse_spark_audio": _AUDIO_VISION_PART,
    "phi4_multimodal_audio": _AUDIO_VISION_PART,
    "phi4_multimodal_vision": _AUDIO_VISION_PART,
    "qwen2_5_omni_audio_encoder": _AUDIO_VISION_PART,
    "qwen2_5_omni_bigvgan": _AUDIO_VISION_PART,
    "qwen2_5_omni_token2wav": _AUDIO_VISION_PART,
    "qwen2_5_omni_vision_encoder": _AUDIO_VISION_PART,
    "qwen3_omni_moe_audio_encoder": _AUDIO_VISION_PART,
    "qwen3_omni_moe_vision_encoder": _AUDIO_VISION_PART,
    "unlimited_ocr_vision": _AUDIO_VISION_PART,
    "unlimited_ocr_vision_encoder": _AUDIO_VISION_PART,
    "nemotron3_5_transcribe_audio": _AUDIO_VISION_PART,
    "moshi_depth": _AUDIO_VISION_PART,
    "moonshine_streaming_encoder": _AUDIO_VISION_PART,
    "blt": _COMPOSITE,
    "dia": _COMPOSITE,
    "t5gemma": _COMPOSITE,
    "t5gemma2": _COMPOSITE,
    "lasr_ctc": _COMPOSITE,
    "pe_audio": _COMPOSITE,
    "pe_audio_video": _COMPOSITE,
    "pe_video": _COMPOSITE,
    "nemo_speechlm": _COMPOSITE,
    "nemotron3_diarization": _COMPOSITE,
    "jamba": _UNUSED,
    "nemotron_h": _UNUSED,
    "parakeet_ctc": _UNUSED,
    "parakeet_encoder": _UNUSED,
    "parakeet_rnnt": _UNUSED,
    "parakeet_tdt": _UNUSED,
    "nemotron_asr_streaming": _UNUSED,
    "nemotron_asr_streaming_encoder": _UNUSED,
    "clvp": _CLVP,
    "clvp_decoder": _CLVP,
    "clvp_encoder": _CLVP,
    "moonshine": "encoder-decoder config whose sizes are encoder_* and decoder_* fields; not read yet",
    "nanochat": (
        "rotates by minus the angle (its rotate_half returns (x2, -x1)), which posenc's rope does not "
        "offer from a config"
    ),
    "musicflamingo": "2-D axial RoPE over audio window starts and times (apply_rotary_time_emb), not token positions",
}

#: What "transformers' formula in float64" is for the families applied by their own rule; none is
#: left out of the float64 comparison.
_FLOAT64_FAMILIES: dict[frozenset[str], str] = {
    _SIN_COS: (
        "create_sinusoidal_positions builds the sin/cos table with float64 inv_freq (int64 / int "
        "divides in the default dtype) and positions (.float()); compared at rows 1024 and 2047, "
        "the table ending at max_position_embeddings"
    ),
    _COMPLEX: (
        "freqs_cis = polar(1, position * inv_freq) in complex128, and apply_rotary_emb multiplies "
        "view_as_complex(x.double()) by it"
    ),
    _HALF_TABLES: "half-width float64 tables; _apply_rotary_emb rotates the two halves in float64",
    _INTERLEAVE_APPLY: "apply_rotary_pos_emb_interleave's pair reordering is exact; its rotation runs in float64",
    frozenset({"deepseek_v4"}): "half-width float64 tables rotating the trailing slice of each head",
}

_MODELS = Path(transformers.__file__).parent / "models"
_RULE = re.compile(r"^class \w*RotaryEmbedding\w*\(|^def apply_rotary\w*\(", re.M)


def _source(model_type: str) -> str:
    folder = _MODELS / model_type_to_module_name(model_type)
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("modeling_*.py")))


@functools.cache
def rotary_model_types() -> tuple[str, ...]:
    """Every model type whose modelling source defines ``*RotaryEmbedding`` or ``apply_rotary*``."""
    return tuple(t for t in sorted(CONFIG_MAPPING.keys()) if _RULE.search(_source(t)))


#: Bases and linear factors the random draws pick from.
_THETAS = (5_000.0, 10_000.0, 150_000.0, 500_000.0, 1_000_000.0, 25_000_000.0)
_FACTORS = (2.0, 4.0, 8.0)


#: Types whose classes refuse a linear scaling: PhiMoE's validator requires short/long mscales for
#: any scaled RoPE; RecurrentGemma's rotary module computes the default frequencies only.
_NO_RANDOM_LINEAR = ("phimoe", "recurrent_gemma")


def _randomize(text, model_type: str, seed: int) -> None:
    """Draw the RoPE of ``text`` at random (seeded per type): each rope dict's base from
    :data:`_THETAS`, and an unscaled one made ``linear`` with a factor from :data:`_FACTORS` half
    the time. The dicts are changed in place, so transformers' rotary module and ``to_dict()`` (what
    posenc reads) see the same draw."""
    rng = random.Random(zlib.crc32(f"{model_type}:{seed}".encode()))
    params = getattr(text, "rope_parameters", None)
    if not isinstance(params, dict):
        return
    dicts = [v for v in params.values() if isinstance(v, dict)] or [params]
    for rope in dicts:
        if "rope_theta" in rope:
            rope["rope_theta"] = rng.choice(_THETAS)
        linear = model_type not in _NO_RANDOM_LINEAR and rng.random() < 0.5
        if rope.get("rope_type", "default") == "default" and linear:
            rope["rope_type"], rope["factor"] = "linear", rng.choice(_FACTORS)


def _hf(model_type: str, seed: int | None = None):
    """``(config, text config, modelling module, rotary module)`` of ``model_type``'s defaults, or
    of a random draw of its RoPE (:func:`_randomize`) when ``seed`` is given."""
    return hf_rotary.build(
        model_type, None if seed is None else functools.partial(_randomize, model_type=model_type, seed=seed)
    )


def _layer_types(config, rotary) -> list[str | None]:
    """The layer types the rotary module serves that have RoPE parameters (None: a single one)."""
    layer_types = sorted(set(getattr(rotary, "layer_types", None) or [None]), key=str)
    params = getattr(config.get_text_config(decoder=True), "rope_parameters", None) or {}
    return [t for t in layer_types if t is None or params.get(t) is not None]  # Beam: NoPE full attention


def _posenc_rotate(model_type, rope, q, k, positions):
    """q and k rotated by posenc, in the feature order of transformers' output."""
    got_q, got_k = rope.rotate(q, k, positions, positions)
    if model_type in _INTERLEAVE_APPLY and rope.config.layout == "interleaved":
        perm = posenc.functional.rope_layout_permutation(rope.config.dim, source="interleaved", target="half")
        got_q, got_k = got_q[..., perm], got_k[..., perm]
    return got_q, got_k


def check_parity(model_type: str, seed: int | None = None) -> list[str | None]:
    """Rotate q and k with posenc and with transformers for each layer type (the type's defaults, or
    the random draw ``seed``); returns the layer types."""
    config, text, module, rotary = _hf(model_type, seed)
    layer_types = _layer_types(config, rotary)
    read = config.to_dict() if seed is None else text.to_dict()  # the draw is on the text config the module read
    positions = POSITIONS[POSITIONS < 2048] if model_type in _SIN_COS else POSITIONS
    for layer_type in layer_types:
        rope = posenc.rope_from_config(read, layer_type=layer_type)
        head_dim = rope.config.dim
        q, k = torch.randn(2, 1, 2, positions.numel(), head_dim, generator=torch.Generator().manual_seed(0)).unbind(0)
        want_q, want_k = hf_rotary.rotate(model_type, module, rotary, q, k, positions, layer_type)
        got_q, got_k = _posenc_rotate(model_type, rope, q, k, positions)
        seq_len = int(positions.max()) + 1
        largest = float(positions.max()) * float(rope.inv_freq_at(seq_len).max())
        tol = 8 * (2e-6 + 1.5e-7 * largest) * max(rope.attention_scale, 1.0)
        where = f"{model_type} layer_type={layer_type}"
        torch.testing.assert_close(got_q, want_q.to(got_q.dtype), rtol=0, atol=tol, msg=lambda m: f"{where}: {m}")
        torch.testing.assert_close(got_k, want_k.to(got_k.dtype), rtol=0, atol=tol, msg=lambda m: f"{where}: {m}")
    return layer_types


_PROMOTED = {torch.float32: torch.float64, torch.complex64: torch.complex128}


class _Float64(TorchFunctionMode):
    """Every torch call with a float32 or complex64 ``dtype`` argument gets float64 or complex128,
    and ``Tensor.float()`` is ``Tensor.double()``: transformers' code as written, in float64. A
    float32 request it misses would show in :func:`check_float64_referee`'s checks that every
    floating buffer and both rotated outputs are float64 (complex128)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {n: _PROMOTED.get(v, v) if isinstance(v, torch.dtype) else v for n, v in (kwargs or {}).items()}
        args = tuple(_PROMOTED.get(a, a) if isinstance(a, torch.dtype) else a for a in args)
        return func(*args, **kwargs) if func is not torch.Tensor.float else args[0].double(**kwargs)


@contextlib.contextmanager
def float64_evaluation():
    """Run transformers' rotary code in float64: float32 requests promoted (:class:`_Float64`), and
    float64 the default dtype (for tensors made without a dtype and for integer true division)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Float64():
            yield
    finally:
        torch.set_default_dtype(previous)


def _errors(got: list[torch.Tensor], reference: list[torch.Tensor]) -> torch.Tensor:
    """Largest absolute error ``[s]`` of rotated q and k at each position."""
    return torch.stack(
        [(x.double() - ref).abs().amax(dim=(0, 1, 3)) for x, ref in zip(got, reference, strict=True)]
    ).amax(0)


def check_float64_referee(model_type: str) -> dict[str | None, tuple[list[float], list[float]]]:
    """Compare posenc and transformers' float32 rotation with transformers' formula run in float64
    at the large positions; returns ``{layer type: (transformers' errors, posenc's errors)}``."""
    config, _, module, rotary = _hf(model_type)  # fresh: dynamic scalings keep state between calls
    with float64_evaluation():
        rotary64 = _hf(model_type)[3]
    floating = {n: b.dtype for n, b in rotary64.named_buffers() if b.is_floating_point() or b.is_complex()}
    assert set(floating.values()) <= {torch.float64, torch.complex128}, f"{model_type}: not in float64: {floating}"
    positions = TABLE_POSITIONS if model_type in _SIN_COS else LARGE_POSITIONS
    found = {}
    for layer_type in _layer_types(config, rotary):
        rope = posenc.rope_from_config(config.to_dict(), layer_type=layer_type)
        q, k = torch.randn(
            2, 1, 2, positions.numel(), rope.config.dim, generator=torch.Generator().manual_seed(1)
        ).unbind(0)
        with torch.no_grad(), float64_evaluation():
            reference = hf_rotary.rotate(model_type, module, rotary64, q.double(), k.double(), positions, layer_type)
        assert [x.dtype for x in reference] == [torch.float64] * 2, f"{model_type}: referee in {reference[0].dtype}"
        hf = _errors(hf_rotary.rotate(model_type, module, rotary, q, k, positions, layer_type), reference)
        ours = _errors(_posenc_rotate(model_type, rope, q, k, positions), reference)
        where = f"{model_type} layer_type={layer_type} at {positions.tolist()}: transformers {hf.tolist()}, posenc {ours.tolist()}"
        assert bool((ours <= hf + 1e-9).all()), f"{where}: posenc farther from the float64 referee"
        assert float(hf[-1]) > 1e-5, f"{where}: transformers' float32 error is not measurable at the largest position"
        assert float(ours[-1]) < float(hf[-1]), f"{where}: posenc not strictly closer at the largest position"
        assert float(ours.max()) <= 2e-6 * max(rope.attention_scale, 1.0), f"{where}: posenc off by more than 2e-6"
        found[layer_type] = (hf.tolist(), ours.tolist())
    return found


@pytest.mark.slow
@pytest.mark.parametrize("model_type", [t for t in rotary_model_types() if t not in NOT_READ])
def test_every_rotary_model_type_rotates_as_transformers_does(model_type):
    with warnings.catch_warnings():  # the default configs of Ministral 3 and Mistral 4: pinned in test_rope_config.py
        warnings.filterwarnings("ignore", message=r"config rope scaling 'yarn' does not take \['llama_4_scaling_beta'")
        check_parity(model_type)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", [t for t in rotary_model_types() if t not in NOT_READ])
def test_every_rotary_model_type_is_closer_than_transformers_to_its_formula_in_float64(model_type):
    with warnings.catch_warnings():  # as above
        warnings.filterwarnings("ignore", message=r"config rope scaling 'yarn' does not take \['llama_4_scaling_beta'")
        assert check_float64_referee(model_type)


#: The draw of the random sweep: ``POSENC_SWEEP_SEED``, else a new one per run (printed on failure).
SWEEP_SEED = int(os.environ.get("POSENC_SWEEP_SEED", random.SystemRandom().randrange(2**31)))


@pytest.mark.parametrize("model_type", [t for t in rotary_model_types() if t not in NOT_READ])
def test_every_rotary_model_type_rotates_a_random_config_as_transformers_does(model_type):
    with warnings.catch_warnings():  # as above
        warnings.filterwarnings("ignore", message=r"config rope scaling 'yarn' does not take \['llama_4_scaling_beta'")
        try:
            check_parity(model_type, SWEEP_SEED)
        except Exception as err:
            raise AssertionError(f"{model_type} with POSENC_SWEEP_SEED={SWEEP_SEED}: {err}") from err


def test_not_read_has_no_stale_entry():
    """Every type listed as not read is a rotary type of the installed transformers that posenc
    indeed does not read (its parity check raises), or, for MRoPE, a type whose modelling code reads
    ``mrope_section`` (its parity is ``tests/parity/test_mrope_transformers.py``'s)."""
    rotary = set(rotary_model_types())
    assert sorted(set(NOT_READ) - rotary) == []
    for model_type, reason in NOT_READ.items():
        if reason == _MROPE:
            assert "mrope" in _source(model_type).lower(), model_type
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with pytest.raises((AssertionError, ValueError, TypeError, IndexError, KeyError), match=r".") as err:
                check_parity(model_type)
        assert err.value is not None, model_type


def test_the_float64_families_are_covered_types():
    """Each family :data:`_FLOAT64_FAMILIES` explains is a set of covered rotary types, so the
    float64 comparison runs on each of its types (none is in :data:`NOT_READ`)."""
    covered = {t for t in rotary_model_types() if t not in NOT_READ}
    for family in _FLOAT64_FAMILIES:
        assert sorted(family - covered) == []


def test_the_sweep_covers_the_model_types_posenc_knows():
    """The covered types: every rotary type not in NOT_READ (the count the README quotes), and every
    type in ``MODEL_LAYOUTS`` that the rule finds is among them."""
    covered = [t for t in rotary_model_types() if t not in NOT_READ]
    assert len(covered) == COVERED_COUNT, (len(covered), sorted(covered))
    known = set(posenc.config.MODEL_LAYOUTS)
    assert sorted(known & set(NOT_READ)) == []
