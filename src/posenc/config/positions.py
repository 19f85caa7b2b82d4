"""MRoPE positions for mixed text, image and video tokens: what transformers' ``get_rope_index``
gives Qwen2-VL, Qwen2.5-VL and Qwen3-VL / Qwen3.5 (Wang et al. 2024, Qwen2-VL, arXiv 2409.12191,
section 2.1; transformers ``Qwen2VLModel.get_rope_index`` / ``get_vision_position_ids``,
``Qwen2_5_VLModel.get_rope_index``, ``Qwen3VLModel.get_rope_index``).

Shape legend: ``b`` batch, ``s`` sequence, ``n`` images or videos; positions are ``[b, s, 3]``,
coordinates ``(t, h, w)`` in posenc's convention (transformers returns ``[3, b, s]``:
``positions.permute(2, 0, 1)``).

Each row is read as runs of one token type (0 text, 1 image, 2 video: HF's ``mm_token_type_ids``).
A text run continues from the current position ``p`` with ``t = h = w = p, p + 1, ...``. A vision
run takes the next grid ``(T, H, W)`` of its kind (in order over the whole batch) and holds
``T * (H / m) * (W / m)`` tokens (``m`` the spatial merge size) in ``t, h, w`` order, at
``(p + floor(k * interval), p + i, p + j)`` for frame ``k``, row ``i``, column ``j``; the next run
starts at ``p + max(H, W) / m``. ``interval`` is 1, except for Qwen2.5-VL videos:
``tokens_per_second * second_per_grid_ts`` (the product formed in float32, as HF forms it).
Qwen3-VL separates the frames of a video by timestamp text, so each frame is a grid of its own
(``split_video_frames=True``: grid ``(T, H, W)`` read as ``T`` grids ``(1, H, W)``); Qwen3.5,
GLM-4V and GLM-OCR use the same ``get_rope_index`` code as Qwen3-VL, PaddleOCR-VL Qwen2-VL's.
Ernie 4.5 VL merges ``temporal_merge_size`` frames of a video into one (its resampler): a video
grid ``(T, H, W)`` holds ``T / temporal_merge_size`` frames of tokens (``temporal_merge_size=2``,
its ``vision_config.temporal_merge_size``; ``Ernie4_5_VLMoeModel.get_vision_position_ids``).

``rope_deltas [b, 1]`` is ``1 + the largest position - the row's token count``: a token generated
after the prompt, at cache index ``c``, has ``t = h = w = c + delta`` (:func:`decode_positions`).
Padding (``attention_mask == 0``) is skipped and left at position 0, as in transformers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ..functional._checks import check_bool, check_positive_int

__all__ = ["mrope_positions", "token_types", "decode_positions", "TEXT", "IMAGE", "VIDEO"]

TEXT, IMAGE, VIDEO = 0, 1, 2


def token_types(input_ids: Tensor, *, image_token_id: int, video_token_id: int | None = None) -> Tensor:
    """Token types ``[*ids]`` (0 text, 1 image, 2 video; HF's ``mm_token_type_ids``) from token ids
    and the ids of the image and video pad tokens (Qwen2-VL's ``<|image_pad|>`` 151655 and
    ``<|video_pad|>`` 151656, the config's ``image_token_id`` / ``video_token_id``)."""
    if not isinstance(input_ids, Tensor) or input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be an integer tensor [b, s], got {input_ids!r:.80}")
    for name, value in (("image_token_id", image_token_id), ("video_token_id", video_token_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an integer token id (such as 151655), got {value!r}")
    types = torch.zeros_like(input_ids)
    types[input_ids == image_token_id] = IMAGE
    if video_token_id is not None:
        types[input_ids == video_token_id] = VIDEO
    return types


def _grids(grid_thw: Tensor | None, what: str) -> list[tuple[int, int, int]]:
    if grid_thw is None:
        return []
    accepted = (
        f"{what} must be positive whole numbers [n, 3] (temporal, height, width patches of each {what.split('_')[0]})"
    )
    if isinstance(grid_thw, (str, bytes)):
        raise TypeError(f"{accepted}, got {grid_thw!r:.80}")
    try:
        grid = torch.as_tensor(grid_thw)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{accepted}, got {grid_thw!r:.80}") from None
    if grid.device.type == "meta":
        raise ValueError(f"{what} is on the meta device (shapes only, no values): its patch counts are read")
    if (
        grid.dim() != 2
        or grid.shape[-1] != 3
        or grid.is_floating_point()
        or grid.is_complex()
        or grid.dtype == torch.bool
        or (grid.numel() and grid.min() < 1)
    ):
        raise ValueError(f"{accepted}, got {tuple(grid.shape)} {grid.dtype}")
    return [tuple(row) for row in grid.tolist()]


def _runs(types: list[int]) -> list[tuple[int, int]]:
    """``(token type, length)`` of each run of equal types."""
    runs: list[tuple[int, int]] = []
    for kind in types:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + 1)
        else:
            runs.append((kind, 1))
    return runs


def _vision(start: int, grid: tuple[int, int, int], merge: int, interval: Tensor | float) -> Tensor:
    """Coordinates ``[T * H/m * W/m, 3]`` of one grid starting at ``start`` (HF ``get_vision_position_ids``)."""
    t, h, w = grid[0], grid[1] // merge, grid[2] // merge
    frames = (torch.arange(t) * interval).long() + start  # [T]: scaled before the offset, as in HF
    tt, hh, ww = torch.meshgrid(frames, torch.arange(h) + start, torch.arange(w) + start, indexing="ij")
    return torch.stack((tt, hh, ww), dim=-1).reshape(-1, 3)  # [T h w, 3]


def _seconds(second_per_grid_ts: Tensor | Sequence[float] | None, videos: int) -> list[float]:
    if second_per_grid_ts is None:
        return [1.0] * videos
    if isinstance(second_per_grid_ts, (str, bytes)):
        raise TypeError(f"second_per_grid_ts must be numbers, one per video, got {second_per_grid_ts!r}")
    try:
        seconds = torch.as_tensor(second_per_grid_ts, dtype=torch.float64).flatten().tolist()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"second_per_grid_ts must be numbers, one per video, got {second_per_grid_ts!r:.80}") from None
    if len(seconds) != videos:
        raise ValueError(f"second_per_grid_ts has {len(seconds)} entries for {videos} videos: one per video")
    if not all(math.isfinite(s) and s > 0 for s in seconds):
        raise ValueError(f"second_per_grid_ts must be finite positive seconds, got {seconds}")
    return seconds


def _check_rate(tokens_per_second: object) -> float | None:
    if tokens_per_second is None:
        return None
    if isinstance(tokens_per_second, bool) or not isinstance(tokens_per_second, (int, float)):
        raise TypeError(f"tokens_per_second must be a number (Qwen2.5-VL: 2) or None, got {tokens_per_second!r}")
    if not (math.isfinite(tokens_per_second) and tokens_per_second > 0):
        raise ValueError(f"tokens_per_second must be a finite positive number, got {tokens_per_second!r}")
    return float(tokens_per_second)


def _check_types(types: object, attention_mask: object) -> tuple[Tensor, Tensor | None]:
    """Token types ``[b, s]`` and the mask ``[b, s]`` (or None), each given as ``[b, s]`` or ``[s]``."""
    if not isinstance(types, Tensor) or types.dim() not in (1, 2) or types.is_floating_point():
        raise ValueError(
            f"token types must be an integer tensor [b, s] or [s] (0 text, 1 image, 2 video), got "
            f"{tuple(types.shape) if isinstance(types, Tensor) else type(types).__name__}"
        )
    if types.device.type == "meta":
        raise ValueError(
            "token types are on the meta device (shapes only, no values): types are read, pass them on the CPU"
        )
    types = types[None] if types.dim() == 1 else types  # [b, s]
    if attention_mask is None:
        return types, None
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"attention_mask must be a tensor [b, s] of 0 and 1, got {type(attention_mask).__name__}")
    attention_mask = attention_mask[None] if attention_mask.dim() == 1 else attention_mask
    if attention_mask.shape != types.shape:
        raise ValueError(
            f"attention_mask of shape {tuple(attention_mask.shape)} must match the token types, {tuple(types.shape)}"
        )
    return types, attention_mask


class _Builder:
    """Positions of one row after another, taking grids from the queues of images and videos."""

    def __init__(self, queues: dict[int, list], merge: int, rate: float | None, temporal_merge: int) -> None:
        self.queues, self.merge, self.rate, self.temporal_merge = queues, merge, rate, temporal_merge

    def vision(self, row: int, kind: int, length: int, current: int) -> tuple[Tensor, int]:
        """The coordinates of one run of ``length`` vision tokens, and the position after it."""
        name = "image" if kind == IMAGE else "video"
        if not self.queues[kind]:
            raise ValueError(f"row {row} of types has more runs of {name} tokens than {name}_grid_thw has grids")
        grid, seconds = self.queues[kind].pop(0)
        if kind == VIDEO and self.temporal_merge > 1:
            grid = (grid[0] // self.temporal_merge, grid[1], grid[2])
        tokens = grid[0] * (grid[1] // self.merge) * (grid[2] // self.merge)  # counted before allocating
        if tokens != length:
            raise ValueError(
                f"row {row} of types: a run of {length} {name} tokens, but its grid {list(grid)} in {name}_grid_thw "
                f"with spatial_merge_size={self.merge} holds {tokens} tokens (T * H/m * W/m)"
            )
        interval = 1 if kind == IMAGE or self.rate is None else self.rate * seconds
        return _vision(current, grid, self.merge, interval), current + max(grid[1], grid[2]) // self.merge

    def row(self, row: int, kinds: list[int]) -> Tensor | None:
        """Positions ``[kept, 3]`` of one row's kept tokens (None for an empty row)."""
        pieces, current = [], 0
        for kind, length in _runs(kinds):
            if kind == TEXT:
                pieces.append(torch.arange(current, current + length)[:, None].expand(-1, 3))  # [length, 3]
                current += length
            elif kind in self.queues:
                coords, current = self.vision(row, kind, length, current)
                pieces.append(coords)
            else:
                raise ValueError(f"token types must be 0 (text), 1 (image) or 2 (video), got {kind} in row {row}")
        return torch.cat(pieces) if pieces else None


def mrope_positions(
    types: Tensor,
    image_grid_thw: Tensor | None = None,
    video_grid_thw: Tensor | None = None,
    *,
    spatial_merge_size: int = 2,
    attention_mask: Tensor | None = None,
    tokens_per_second: float | None = None,
    second_per_grid_ts: Tensor | Sequence[float] | None = None,
    split_video_frames: bool = False,
    temporal_merge_size: int = 1,
) -> tuple[Tensor, Tensor]:
    """MRoPE positions ``[b, s, 3]`` (t, h, w) and ``rope_deltas [b, 1]`` for token types ``[b, s]``
    (or ``[s]``, giving ``[s, 3]`` and ``[1, 1]``; 0 text, 1 image, 2 video: :func:`token_types`), as transformers' ``get_rope_index``.

    * Qwen2-VL: ``spatial_merge_size`` (its ``vision_config.spatial_merge_size``, 2);
    * Qwen2.5-VL: also ``tokens_per_second`` (``vision_config.tokens_per_second``, 2) and
      ``second_per_grid_ts [n_videos]`` (seconds per temporal patch; 1 when None) for videos;
    * Qwen3-VL / Qwen3.5: ``split_video_frames=True``;
    * Ernie 4.5 VL: ``temporal_merge_size=2`` (video frames merged in pairs).

    ``image_grid_thw`` / ``video_grid_thw`` ``[n, 3]`` are the patch grids of the images and videos
    in order of appearance over the batch. Each run of vision tokens must hold exactly its grid's
    ``T * (H / m) * (W / m)`` tokens, and there must be one grid per run.
    """
    merge = check_positive_int("spatial_merge_size", spatial_merge_size)
    temporal_merge = check_positive_int("temporal_merge_size", temporal_merge_size)
    check_bool("split_video_frames", split_video_frames)
    rate = _check_rate(tokens_per_second)
    squeeze = isinstance(types, Tensor) and types.dim() == 1
    types, attention_mask = _check_types(types, attention_mask)
    images = _grids(image_grid_thw, "image_grid_thw")
    videos = _grids(video_grid_thw, "video_grid_thw")
    seconds = _seconds(second_per_grid_ts, len(videos))
    if split_video_frames:  # Qwen3-VL: each frame its own grid (its timestamp text sits between them)
        videos = [(1, h, w) for t, h, w in videos for _ in range(t)]
        seconds = [1.0] * len(videos)
    builder = _Builder(
        {IMAGE: [(g, 1.0) for g in images], VIDEO: list(zip(videos, seconds))}, merge, rate, temporal_merge
    )
    b, s = types.shape
    positions = torch.zeros(b, s, 3, dtype=torch.long)
    deltas = torch.zeros(b, 1, dtype=torch.long)
    for row in range(b):
        keep = attention_mask[row].bool().cpu() if attention_mask is not None else torch.ones(s, dtype=torch.bool)
        kinds = types[row].cpu()[keep].tolist()
        row_positions = builder.row(row, kinds)  # [kept, 3]
        if row_positions is not None:
            positions[row, keep] = row_positions
            deltas[row, 0] = int(row_positions.max()) + 1 - len(kinds)
    left = [
        f"{len(builder.queues[k])} {name} ({name}_grid_thw)"
        for k, name in ((IMAGE, "image"), (VIDEO, "video"))
        if builder.queues[k]
    ]
    if left:
        raise ValueError(
            f"grids left over after every run of vision tokens in types: {', '.join(left)}; one grid per run"
        )
    positions, deltas = positions.to(types.device), deltas.to(types.device)
    return (positions[0], deltas) if squeeze else (positions, deltas)


def decode_positions(rope_deltas: Tensor, start: int, length: int = 1) -> Tensor:
    """Positions ``[b, length, 3]`` of ``length`` text tokens at cache indices ``start ..`` after an
    MRoPE prompt: ``t = h = w = index + delta`` (transformers' ``text_positions + rope_deltas``)."""
    if not isinstance(rope_deltas, Tensor) or rope_deltas.dim() != 2 or rope_deltas.shape[-1] != 1:
        raise ValueError(f"rope_deltas must be a tensor [b, 1] (from mrope_positions), got {rope_deltas!r:.80}")
    length = check_positive_int("length", length)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise TypeError(f"start must be a cache index, a whole number >= 0, got {start!r}")
    index = torch.arange(start, start + length, device=rope_deltas.device)  # [length]
    return (index + rope_deltas)[..., None].expand(-1, -1, 3)  # [b, length, 3]
