"""``posenc.config.mrope_positions`` against transformers' ``get_rope_index`` (issue 25, item 3).

Reference: ``Qwen2VLModel.get_rope_index``, ``Qwen2_5_VLModel.get_rope_index`` and
``Qwen3VLModel.get_rope_index`` (and Qwen3.5's and GLM-4V's, the same code) of the installed transformers, called unbound on a stand-in that
holds only what they read (``config.vision_config`` and the class's ``get_vision_position_ids``):
no model is built and nothing is downloaded. Positions and deltas must be equal exactly.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from posenc.config import decode_positions, mrope_positions, token_types

transformers = pytest.importorskip("transformers")
from transformers.models.glm4v.modeling_glm4v import Glm4vModel  # noqa: E402
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel  # noqa: E402
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel  # noqa: E402
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Model  # noqa: E402
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel  # noqa: E402

IMAGE_PAD, VIDEO_PAD, START, END = 151655, 151656, 151652, 151653  # Qwen2-VL's vision token ids


def _stand_in(model_class, **vision):
    """What ``get_rope_index`` reads of ``self``."""
    vision_config = SimpleNamespace(spatial_merge_size=2, **vision)
    return SimpleNamespace(
        config=SimpleNamespace(vision_config=vision_config),
        get_vision_position_ids=lambda *a, **k: model_class.get_vision_position_ids(None, *a, **k),
    )


def _prompt(parts: list[tuple[str, int]]) -> list[int]:
    """Token ids: ("text", n) n text tokens, ("image"/"video", n) a start token, n pads, an end token."""
    ids: list[int] = []
    for kind, n in parts:
        if kind == "text":
            ids += list(range(100, 100 + n))
        else:
            ids += [START] + [IMAGE_PAD if kind == "image" else VIDEO_PAD] * n + [END]
    return ids


def _batch(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids [b, s] and their attention mask."""
    s = max(map(len, rows))
    ids = torch.tensor([[0] * (s - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (s - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


# row 0: text, an image 4x6 patches (2x3 merged = 6 tokens), text, a video of 3 frames 4x4 (3*2*2 = 12),
# text; row 1: text, an image 8x4 patches (4x2 = 8 tokens), text (shorter: left padding)
IMAGES = torch.tensor([[1, 4, 6], [1, 8, 4]])
VIDEOS = torch.tensor([[3, 4, 4]])
ROWS = [
    _prompt([("text", 5), ("image", 6), ("text", 3), ("video", 12), ("text", 4)]),
    _prompt([("text", 2), ("image", 8), ("text", 7)]),
]


def _check(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor]) -> None:
    positions, deltas = got
    assert torch.equal(positions, want[0].permute(1, 2, 0))  # [3, b, s] -> [b, s, 3]
    assert torch.equal(deltas, want[1])


def test_qwen2_vl_matches_get_rope_index():
    ids, mask = _batch(ROWS)
    types = token_types(ids, image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD)
    want = Qwen2VLModel.get_rope_index(_stand_in(Qwen2VLModel), ids, types, IMAGES, VIDEOS, attention_mask=mask)
    got = mrope_positions(types, IMAGES, VIDEOS, spatial_merge_size=2, attention_mask=mask)
    _check(got, want)
    # pinned: row 0's image starts after 5 text tokens and its start token: t = 6, h = 6 + row, w = 6 + column
    first = int((ids[0] == IMAGE_PAD).nonzero()[0])
    assert got[0][0, first : first + 6].tolist() == [[6, 6, 6], [6, 6, 7], [6, 6, 8], [6, 7, 6], [6, 7, 7], [6, 7, 8]]


@pytest.mark.parametrize("seconds", [None, torch.tensor([0.5]), torch.tensor([1.3])])
def test_qwen2_5_vl_matches_get_rope_index_with_seconds_per_grid(seconds):
    ids, mask = _batch(ROWS)
    types = token_types(ids, image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD)
    stand_in = _stand_in(Qwen2_5_VLModel, tokens_per_second=2)
    want = Qwen2_5_VLModel.get_rope_index(stand_in, ids, types, IMAGES, VIDEOS, seconds, attention_mask=mask)
    got = mrope_positions(types, IMAGES, VIDEOS, attention_mask=mask, tokens_per_second=2, second_per_grid_ts=seconds)
    _check(got, want)
    if seconds is not None and float(seconds) == 1.3:  # frames at floor(k * 2.6): 0, 2, 5 after the start
        video = got[0][0, ids[0] == VIDEO_PAD]
        assert sorted(set((video[:, 0] - video[0, 0]).tolist())) == [0, 2, 5]


@pytest.mark.parametrize("model_class", [Qwen3VLModel, Qwen3_5Model, Glm4vModel])
def test_qwen3_vl_matches_get_rope_index_with_frames_as_grids(model_class):
    """Qwen3-VL puts timestamp text between the frames of a video: each frame is its own grid
    (Qwen3.5 and GLM-4V share the rule: their ``get_rope_index`` is the same code)."""
    frames = [("text", 2), ("video", 4), ("text", 2), ("video", 4), ("text", 2), ("video", 4)]
    rows = [_prompt([("text", 3), ("image", 6), *frames, ("text", 1)]), _prompt([("text", 4), ("image", 8)])]
    ids, mask = _batch(rows)
    types = token_types(ids, image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD)
    videos = torch.tensor([[3, 4, 4]])
    want = model_class.get_rope_index(_stand_in(model_class), ids, types, IMAGES, videos.clone(), mask)
    _check(mrope_positions(types, IMAGES, videos, attention_mask=mask, split_video_frames=True), want)


def test_text_only_rows_are_plain_positions_with_zero_delta():
    types = torch.zeros(2, 7, dtype=torch.long)
    positions, deltas = mrope_positions(types)
    assert torch.equal(positions, torch.arange(7)[None, :, None].expand(2, 7, 3))
    assert deltas.tolist() == [[0], [0]]


def test_decoding_continues_at_cache_index_plus_delta():
    """HF's generation: new token at cache index c gets ``c + rope_deltas`` on all three axes."""
    ids, mask = _batch(ROWS)
    types = token_types(ids, image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD)
    positions, deltas = mrope_positions(types, IMAGES, VIDEOS, attention_mask=mask)
    s = ids.shape[1]
    step = decode_positions(deltas, s, 2)  # [b, 2, 3]
    assert step.shape == (2, 2, 3)
    # the first generated token is one past the largest prompt position, in each row
    assert step[:, 0, 0].tolist() == (positions.amax(dim=(1, 2)) + 1 + (s - mask.sum(1))).tolist()
    assert torch.equal(step[:, 1] - step[:, 0], torch.ones(2, 3, dtype=torch.long))


def test_bad_inputs_name_what_is_wrong():
    types = torch.tensor([0, 0, 1, 1, 1, 0])
    with pytest.raises(ValueError, match=r"a run of 3 image tokens, but its grid \[1, 4, 4\] .* holds 4 tokens"):
        mrope_positions(types, torch.tensor([[1, 4, 4]]))
    with pytest.raises(ValueError, match="more runs of image tokens than image_grid_thw has grids"):
        mrope_positions(types)
    with pytest.raises(ValueError, match="grids left over .* 1 image"):
        mrope_positions(torch.zeros(4, dtype=torch.long), torch.tensor([[1, 2, 2]]))
    with pytest.raises(ValueError, match=r"image_grid_thw must be positive whole numbers \[n, 3\]"):
        mrope_positions(types, torch.tensor([1, 2, 6]))
    with pytest.raises(ValueError, match="token types must be 0 .text., 1 .image. or 2 .video., got 5"):
        mrope_positions(torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="second_per_grid_ts has 2 entries for 1 videos"):
        mrope_positions(torch.tensor([2] * 4), video_grid_thw=torch.tensor([[1, 4, 4]]), second_per_grid_ts=[1.0, 2.0])
    with pytest.raises(ValueError, match="token types must be an integer tensor"):
        mrope_positions(torch.zeros(2, 3, 4, dtype=torch.long))
