"""The criteria for a position code of the articles posenc was founded on, made into measurements.

Shape legend: ``n`` positions, ``d`` code width.

Every check takes a scheme (registered name, built :class:`~posenc.PositionalEncoding`, or a
reference name such as ``"index"``) plus config keys, builds the encoding matrix of
:func:`~posenc.analysis.encoding_matrix` (rows = positions ``0..n-1``) and returns a
:class:`CheckResult` with a number, its threshold and a sentence saying what was found. The
criteria: Pim 2023 ("Understanding positional embeddings in transformer models": unique,
distance-reflecting, bounded, length-invariant, deterministic); Kazemnejad 2019 ("Transformer Architecture: The Positional Encoding": the
linear map ``PE(p) -> PE(p+k)`` and the offset-only dot product); Vaswani et al. 2017, section 3.5
(the hypothesis that a fixed linear map serves every offset); decay with distance (Su et al. 2021,
section 3.4.3; Press et al. 2022) and extrapolation ("A Brief Summary on Positional Encoding Methods": a learned table has nothing past its
maximum length).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..schemes import PositionalEncoding
from ..schemes.learned import Learned
from .encodings import atlas_config, build_scheme, encoding_matrix, is_reference, scheme_family, unit_query
from .matrices import distance_from, distance_matrix

__all__ = [
    "CheckResult",
    "check_unique",
    "check_bounded",
    "check_deterministic",
    "check_length_invariant",
    "check_linear_offset_map",
    "check_offset_similarity",
    "check_distance_monotone",
    "check_decays_with_distance",
    "check_extrapolates",
    "scheme_label",
]


@dataclass(frozen=True)
class CheckResult:
    """One measured criterion: ``passed`` is ``value <comparison> threshold``.

    ``detail`` explains the finding in words; ``data`` holds the extra numbers (tensors or floats)
    a figure or table may want.
    """

    name: str
    value: float
    threshold: float
    passed: bool
    detail: str
    comparison: str = "<="
    scheme: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (tensors in ``data`` left as they are)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def scheme_label(scheme: str | PositionalEncoding) -> str:
    """The name shown for ``scheme``: its registry name, or the reference name."""
    return scheme.name if isinstance(scheme, PositionalEncoding) else str(scheme)


def _max_positions(scheme: str | PositionalEncoding, n: int, config: dict[str, Any]) -> int:
    """``n`` capped at what the scheme can encode (a learned table has ``max_len`` rows)."""
    if isinstance(scheme, Learned):
        return min(n, scheme.config.max_len)
    if scheme == "learned":
        return min(n, int(atlas_config("learned", **config)["max_len"]))
    return n


def _matrix(scheme: str | PositionalEncoding, n: int, seed: int, config: dict[str, Any], **kw: Any) -> Tensor:
    return encoding_matrix(scheme, _max_positions(scheme, n, config), seed=seed, **kw, **config)


def _first_collision(D: Tensor, atol: float) -> tuple[int, int] | None:
    """The pair ``(i, j)``, ``i < j``, with the smallest ``j`` (then ``i``) whose codes are within ``atol``."""
    close = torch.triu(D <= atol, diagonal=1)  # [n, n]
    if not bool(close.any()):
        return None
    j = int(close.any(dim=0).nonzero()[0])
    i = int(close[:, j].nonzero()[0])
    return i, j


def check_unique(
    scheme: str | PositionalEncoding, *, n: int = 512, atol: float = 1e-6, seed: int = 0, **config: Any
) -> CheckResult:
    """Smallest Euclidean distance between the codes of two distinct positions in ``0..n-1``, in
    float64 and after rounding the code to float32; passes when both exceed ``atol``.

    ``data``: ``min_distance_float64``, ``min_distance_float32``, ``collision_float64`` and
    ``collision_float32`` (the first pair ``(i, j)`` within ``atol``, or None), ``n``.
    """
    E = _matrix(scheme, n, seed, config)  # [n, d] float64
    out: dict[str, Any] = {"n": E.shape[0]}
    for tag, M in (("float64", E), ("float32", E.float())):
        D = distance_matrix(M)  # [n, n]
        out[f"collision_{tag}"] = _first_collision(D, atol)
        out[f"min_distance_{tag}"] = float(D.fill_diagonal_(float("inf")).min()) if E.shape[0] > 1 else float("inf")
    value = min(out["min_distance_float64"], out["min_distance_float32"])
    passed = value > atol
    if passed:
        detail = f"all {E.shape[0]} positions get distinct codes (closest pair {value:.3g} apart)"
    else:
        tag = "float64" if out["collision_float64"] is not None else "float32"
        i, j = out[f"collision_{tag}"]
        what = "distances" if scheme_family(scheme) in ("bias", "relative") else "positions"  # rows: distance t
        detail = f"{what} {i} and {j} get the same code in {tag} (distance {out[f'min_distance_{tag}']:.3g})"
    return CheckResult("unique", value, atol, passed, detail, ">", scheme_label(scheme), out)


def check_bounded(
    scheme: str | PositionalEncoding, *, n: int = 1024, threshold: float = 1.0, seed: int = 0, **config: Any
) -> CheckResult:
    """Largest ``|value|`` of any code at positions ``0..n-1``; passes when it is at most ``threshold``
    (the articles' "bounded between -1 and 1"). Rotary schemes are measured on both the rotated
    unit query and key: xPos shrinks one and grows the other. ``data``: ``largest``, ``largest_half``
    (the same over a separate build of ``n/2`` positions: a sequence half as long), ``grows``
    (whether doubling the length raised the largest value by more than 1%), ``n``.
    """
    scale = _attention_scale(scheme, seed, config)

    def largest_of(length: int) -> tuple[float, int]:
        Q, K = _query_key_codes(scheme, _max_positions(scheme, length, config), seed, config)  # [n, d] each
        return (max(float(Q.abs().max()), float(K.abs().max())) / scale if Q.numel() else 0.0), Q.shape[0]

    largest, count = largest_of(n)
    half = max(count // 2, 1)
    largest_half = largest_of(half)[0]
    grows = largest > largest_half * 1.01 + 1e-12  # more than 1%: (n-1)/n creeping towards 1 is not growth
    passed = largest <= threshold + 1e-12
    trend = "grows with the length" if grows else "does not grow with the length"
    detail = f"largest |value| {largest:.4g} over {count} positions ({largest_half:.4g} over {half}): it {trend}"
    if scale != 1.0:
        detail += f" (after the scaling's constant attention factor {scale:.4g}, which multiplies every logit alike)"
    data = {"largest": largest, "largest_half": largest_half, "grows": grows, "n": count, "attention_scale": scale}
    return CheckResult("bounded", largest, threshold, passed, detail, "<=", scheme_label(scheme), data)


def _attention_scale(scheme: str | PositionalEncoding, seed: int, config: dict[str, Any]) -> float:
    """A rotary scaling's constant factor on cos and sin (YaRN's ``0.1 ln s + 1``, LongRoPE's): 1 elsewhere."""
    if scheme_family(scheme) != "rotary":
        return 1.0
    return float(getattr(build_scheme(scheme, seed=seed, **config), "attention_scale", 1.0)) or 1.0


def _rebuild(scheme: str | PositionalEncoding, seed: int) -> str | PositionalEncoding:
    """A fresh module from a built one's config, initialised from ``seed``; names pass through."""
    if isinstance(scheme, PositionalEncoding):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return type(scheme)(scheme.config)
    return scheme


def check_deterministic(scheme: str | PositionalEncoding, *, n: int = 256, seed: int = 0, **config: Any) -> CheckResult:
    """The codes at ``0..n-1`` do not change from one initialisation to another (Pim 2023: a code
    "shouldn't change from one initialisation of a network to another"): builds with ``seed`` and
    ``seed + 1`` agree exactly, and so do two builds with the same seed (a built module is rebuilt
    from its config). ``value`` is the largest difference between any two (threshold 0).

    ``data["seed_dependent"]``: whether the other seed's build differs — true for learned tables and
    biases, whose values are random draws until training sets them (the articles' objection).
    """
    first = _matrix(_rebuild(scheme, seed), n, seed, config)  # a built module with config raises here
    second = _matrix(_rebuild(scheme, seed), n, seed, config)
    other = _matrix(_rebuild(scheme, seed + 1), n, seed + 1, config)
    value = float(max((first - second).abs().max(), (first - other).abs().max())) if first.numel() else 0.0
    seed_dependent = not torch.equal(first, other)
    passed = torch.equal(first, second) and not seed_dependent
    if not torch.equal(first, second):
        detail = f"two builds with seed {seed} differ by up to {value:.3g}"
    elif seed_dependent:
        detail = f"builds with seeds {seed} and {seed + 1} give codes differing by up to {value:.3g}"
    else:
        detail = "every build gives exactly the same codes, whatever the seed"
    return CheckResult(
        "deterministic",
        value,
        0.0,
        passed,
        detail,
        "<=",
        scheme_label(scheme),
        {"seed_dependent": seed_dependent, "n": first.shape[0]},
    )


def check_length_invariant(
    scheme: str | PositionalEncoding,
    *,
    lengths: tuple[int, int] = (32, 256),
    atol: float = 1e-12,
    seed: int = 0,
    **config: Any,
) -> CheckResult:
    """A position gets the same code in sequences of the two ``lengths``: the largest difference over
    the shorter sequence's positions, passing at most ``atol``. ``data``: ``lengths``, ``diff_per_position [n_short]``.
    """
    short, long = sorted(int(x) for x in lengths)
    switch = _switch_length(scheme, seed, config)
    if switch is not None and not short <= switch < long:  # both sides of a dynamic/longrope switch
        short, long = min(short, switch), max(long, 2 * switch)
    long = _max_positions(scheme, long, config)
    extra = {"seq_len": short} if is_reference(scheme) else {}
    a = _matrix(scheme, short, seed, config, **extra)  # [short, d]
    extra = {"seq_len": long} if is_reference(scheme) else {}
    b = _matrix(scheme, long, seed, config, **extra)[: a.shape[0]]  # [short, d]
    diff = (a - b).abs().amax(dim=-1)  # [short]
    value = float(diff.max()) if diff.numel() else 0.0
    passed = value <= atol
    if passed:
        detail = f"positions 0..{short - 1} get the same codes in sequences of {short} and {long}"
    else:
        p = int(diff.argmax())
        detail = f"position {p} changes by {value:.3g} between sequences of {short} and {long}"
    return CheckResult(
        "length_invariant",
        value,
        atol,
        passed,
        detail,
        "<=",
        scheme_label(scheme),
        {"lengths": (short, long), "diff_per_position": diff},
    )


def _switch_length(scheme: str | PositionalEncoding, seed: int, config: dict[str, Any]) -> int | None:
    """The length past which a rotary scaling's frequencies change (dynamic, longrope), else None."""
    if scheme_family(scheme) != "rotary":
        return None
    return getattr(build_scheme(scheme, seed=seed, **config), "original_length", None)


def check_linear_offset_map(
    scheme: str | PositionalEncoding,
    *,
    n: int = 512,
    offsets: tuple[int, ...] = (1, 5, 25),
    threshold: float = 1e-6,
    seed: int = 0,
    **config: Any,
) -> CheckResult:
    """Is ``PE(p + k)`` a fixed linear function of ``PE(p)``? For each offset ``k`` the least-squares
    map ``M`` with ``PE(p) M ≈ PE(p + k)`` is fitted on the even positions ``p`` and tested on the odd
    ones (``p < n - max(offsets)``); ``value`` is the largest relative test residual ``|PE M - PE'| / |PE'|`` over the offsets.

    For the sinusoid ``M`` is the block rotation by ``k·ω_i`` (Vaswani et al. 2017, section 3.5;
    Kazemnejad 2019, "Relative Positioning"), so the residual is rounding (~1e-14).
    ``data``: ``residuals`` (offset -> residual), ``n``.
    """
    E = _matrix(scheme, n, seed, config)  # [n, d]
    m = E.shape[0] - max(offsets)  # positions p with p + k inside the matrix for every k
    if m < 4 or min(offsets) < 1:
        raise ValueError(f"offsets {list(offsets)} must be positive and leave positions in n={E.shape[0]}")
    X_fit, X_test = E[0:m:2], E[1:m:2]  # [m/2, d] each: PE(p) for even / odd p
    targets = torch.cat([E[k : m + k : 2] for k in offsets], dim=-1)  # [m/2, d * len(offsets)]: PE(p + k)
    maps = torch.linalg.lstsq(X_fit, targets, driver="gelsd").solution  # [d, d * len(offsets)], one SVD
    residuals = {}
    for i, k in enumerate(offsets):
        M = maps[:, i * E.shape[1] : (i + 1) * E.shape[1]]  # [d, d]: PE(p) M ≈ PE(p + k) on the even p
        Y_test = E[k + 1 : m + k : 2]  # [m/2, d]
        scale = float(Y_test.norm())
        residuals[k] = float((X_test @ M - Y_test).norm()) / scale if scale > 0 else 0.0
    value = max(residuals.values())
    worst = max(residuals, key=residuals.get)
    passed = value < threshold
    detail = (
        f"a fixed linear map takes PE(p) to PE(p+k) (largest relative residual {value:.2g}, offsets {list(offsets)})"
        if passed
        else f"no linear map takes PE(p) to PE(p+{worst}): relative residual {value:.3g} on held-out positions"
    )
    return CheckResult(
        "linear_offset_map",
        value,
        threshold,
        passed,
        detail,
        "<",
        scheme_label(scheme),
        {"residuals": residuals, "n": E.shape[0]},
    )


def _query_key_codes(
    scheme: str | PositionalEncoding, n: int, seed: int, config: dict[str, Any], probe: str = "unit"
) -> tuple[Tensor, Tensor]:
    """Rotary schemes: a query and a key rotated to ``0..n-1`` (xPos scales them oppositely), both the
    unit query (``probe="unit"``: the cos and sin of each angle, the code itself) or two different
    random unit vectors (``"random"``, fixed draws: a rotation that is not orthogonal, or that
    treats the second feature of a pair wrongly, makes their product depend on more than ``m - n``);
    other schemes: the code twice."""
    if scheme_family(scheme) != "rotary":
        E = _matrix(scheme, n, seed, config)
        return E, E
    module = build_scheme(scheme, seed=seed, **config)
    c = module.config
    positions = torch.arange(n, device=module.inv_freq.device)
    if probe == "unit":
        q = k = unit_query(c.dim, c.rotary_width, c.layout)
    else:
        q, k = torch.randn(2, c.dim, generator=torch.Generator().manual_seed(1234), dtype=torch.float64)
        q, k = q / q.norm(), k / k.norm()
    q, k = (t.to(positions.device).expand(1, 1, n, c.dim) for t in (q, k))  # [1, 1, n, hd]
    with torch.no_grad():
        q, k = module.rotate(q, k, positions, positions)
    return q[0, 0], k[0, 0]  # [n, hd] each


def check_offset_similarity(
    scheme: str | PositionalEncoding,
    *,
    n: int = 256,
    offsets: tuple[int, ...] = (1, 5, 25),
    threshold: float = 1e-6,
    seed: int = 0,
    **config: Any,
) -> CheckResult:
    """How far ``PE(p + k) · PE(p)`` varies with ``p`` at fixed ``k``: ``(max - min) / mean |PE|^2`` over
    ``p``, the largest over ``offsets``; passes below ``threshold`` (the score depends on the offset alone).

    Rotary schemes use the actual logit between a query at ``p + k`` and a key at ``p``, two
    different random unit vectors (for xPos the two sides carry opposite decays), relative to
    ``|q||k|``. Kazemnejad 2019 ("Other details"): the sinusoid's dot product is
    ``Σ_i cos(k·ω_i)``. Bias schemes use the bias itself, ``b(p + k, p)`` for each head, over
    ``p = 0 .. 8n - 1`` (2048 at the default: past FIRE's threshold ``L = 512``, where its
    normaliser ``ψ(max(L, i))`` starts to follow the query), relative to the mean ``|b|``: a bias
    of the distance alone (ALiBi, T5, KERPLE) spreads by exactly 0. ``data``: ``spread`` (offset
    -> spread), ``dots`` (offset -> ``[n - k]`` tensor of products; for biases ``[h, 8n]``).
    """
    if scheme_family(scheme) == "bias":
        return _bias_offset_similarity(scheme, n=8 * n, offsets=offsets, threshold=threshold, seed=seed, **config)
    Q, K = _query_key_codes(scheme, _max_positions(scheme, n, config), seed, config, probe="random")  # [n, d] each
    norm = float((Q.norm(dim=-1) * K.norm(dim=-1)).mean())
    spread, dots = {}, {}
    for k in offsets:
        if k >= Q.shape[0]:
            raise ValueError(f"offset {k} is not below the {Q.shape[0]} positions; use a larger n")
        dots[k] = (Q[k:] * K[: Q.shape[0] - k]).sum(-1)  # [n - k]
        spread[k] = float(dots[k].max() - dots[k].min()) / norm if norm > 0 else 0.0
    value = max(spread.values())
    passed = value < threshold
    worst = max(spread, key=spread.get)
    detail = (
        "PE(p+k)·PE(p) depends on the offset k alone"
        if passed
        else f"PE(p+{worst})·PE(p) varies with p by {value:.3g} of the mean squared norm"
    )
    return CheckResult(
        "offset_similarity",
        value,
        threshold,
        passed,
        detail,
        "<",
        scheme_label(scheme),
        {"spread": spread, "dots": dots},
    )


def _bias_offset_similarity(
    scheme: str | PositionalEncoding, *, n: int, offsets: tuple[int, ...], threshold: float, seed: int, **config: Any
) -> CheckResult:
    """:func:`check_offset_similarity` for a bias: how far ``b(p + k, p)`` varies with ``p < n``."""
    module = build_scheme(scheme, seed=seed, **config)
    device = next(iter([*module.parameters(), *module.buffers()]), torch.empty(0)).device
    keys = torch.arange(n, device=device)[:, None]  # [n, 1]: one (query, key) pair per row
    spread, dots = {}, {}
    with torch.no_grad():
        for k in offsets:
            bias = module.bias(keys + k, keys)[:, :, 0, 0].T.to(torch.float64).cpu()  # [h, n]
            scale = float(bias.abs().mean())
            dots[k] = bias
            spread[k] = float((bias.amax(-1) - bias.amin(-1)).max()) / scale if scale > 0 else 0.0
    value = max(spread.values())
    passed = value < threshold
    worst = max(spread, key=spread.get)
    if passed:
        detail = f"the bias b(p+k, p) depends on the offset k alone (queries up to {n - 1 + max(offsets)})"
    else:
        where = int(
            (dots[worst] - dots[worst][:, :1])
            .abs()
            .amax(0)
            .gt(threshold * float(dots[worst].abs().mean()))
            .nonzero()[0]
        )
        detail = (
            f"the bias b(p+{worst}, p) varies with p by {value:.3g} of its mean size: it depends on the query "
            f"position, not on the distance alone (first at p = {where}, over p < {n})"
        )
    return CheckResult(
        "offset_similarity",
        value,
        threshold,
        passed,
        detail,
        "<",
        scheme_label(scheme),
        {"spread": spread, "dots": dots},
    )


def _rank_correlation(values: Tensor) -> float:
    """Spearman's rank correlation of ``values [m]`` with their index ``0..m-1``; tied values share
    their average rank (a plateau, such as distances past a clipping point, is no trend either
    way); 0 for a constant sequence."""
    m = values.shape[0]
    if m < 3 or float(values.max() - values.min()) <= 1e-12 * max(1.0, float(values.abs().max())):
        return 0.0
    below = (values[None, :] < values[:, None]).sum(1)  # [m]: how many values lie below each
    equal = (values[None, :] == values[:, None]).sum(1)  # [m]: its ties, itself included
    ranks = (below + (equal - 1) / 2).to(torch.float64)
    index = torch.arange(m, dtype=torch.float64)
    ranks, index = ranks - ranks.mean(), index - index.mean()
    return float((ranks * index).sum() / (ranks.norm() * index.norm()))


def check_distance_monotone(
    scheme: str | PositionalEncoding,
    *,
    n: int = 256,
    start: int = 1,
    threshold: float = 0.5,
    seed: int = 0,
    **config: Any,
) -> CheckResult:
    """Does the cosine distance from position ``start`` grow with the offset? ``value`` is Spearman's
    rank correlation between the distance to ``start + k`` and ``k`` over every offset up to
    ``n - 1 - start``; passes at ``threshold`` or above. A rank trend over all offsets, not the first
    dip: the fastest pairs' ripple (amplitude ~4/d) does not decide it.

    Pim 2023 ("Examining distances between positional embeddings") plots this from position 1 for
    the sinusoid at d = 1024 and finds it roughly monotone up to 250 (there ``value`` is 1.0; at
    d = 128, 0.88; learned rows about 0, binary digits 0.44). ``data``: ``distances`` (from ``start``
    to ``start..n-1``, ``[n - start]``), ``start``.
    """
    E = _matrix(scheme, n, seed, config)  # [n, d]
    d = distance_from(E, start)[start:]  # [n - start]; d[k] = distance to start + k
    if bool(d.isnan().any()):
        return CheckResult(
            "distance_monotone",
            0.0,
            threshold,
            False,
            "cosine distance is undefined (a zero code)",
            ">=",
            scheme_label(scheme),
            {"distances": d, "start": start},
        )
    value = _rank_correlation(d[1:])  # offsets 1.. (offset 0 is the position itself)
    passed = value >= threshold
    if float(d.max()) <= 1e-9:
        detail = f"the cosine distance from position {start} is 0 at every offset: it does not grow"
    else:
        how = "grows with" if passed else "does not grow steadily with"
        detail = (
            f"the cosine distance from position {start} {how} the offset (rank correlation {value:.2f} over "
            f"offsets 1..{d.shape[0] - 1}; {threshold} asked for)"
        )
    return CheckResult(
        "distance_monotone",
        value,
        threshold,
        passed,
        detail,
        ">=",
        scheme_label(scheme),
        {"distances": d, "start": start},
    )


def _scores_by_distance(scheme: str | PositionalEncoding, n: int, seed: int, config: dict[str, Any]) -> Tensor:
    """The attention score between positions ``t`` apart for ``t = 0..n-1`` (float64 ``[n]``): the
    bias (mean over heads) of the query at ``n - 1`` and the key ``t`` behind it for bias schemes; for rotary ones the logit of the same content as query
    and key, averaged over random draws (:func:`~posenc.analysis.logits.logits_vs_distance`); for
    codes added to the input, ``PE(start) · PE(start + t)`` from position ``start = 1``."""
    from .logits import logits_vs_distance

    family = scheme_family(scheme)
    if family == "bias":  # the query at n - 1 against the keys behind it (FIRE's bias follows the query too)
        from .bias import bias_at_query

        return bias_at_query(build_scheme(scheme, seed=seed, **config), n - 1).mean(0)  # [n]
    if family == "rotary":
        kw = {} if isinstance(scheme, PositionalEncoding) else config
        return logits_vs_distance(scheme, max_distance=n, num_samples=64, seed=seed, **kw)["logits"].mean(0).cpu()
    E = _matrix(scheme, n + 1, seed, config)  # [n + 1, d]
    return E[1:] @ E[1]  # [n]: position 1 against 1 .. n


def check_decays_with_distance(
    scheme: str | PositionalEncoding, *, n: int = 256, threshold: float = -0.5, seed: int = 0, **config: Any
) -> CheckResult:
    """Does the attention score fall as query and key move apart? ``value`` is Spearman's rank
    correlation between the score at distance ``t`` and ``t`` over ``t = 0..n-1``; passes at
    ``threshold`` or below. The score: ALiBi's and T5's bias (Press et al. 2022: a penalty linear in
    the distance; T5's learned buckets are random until trained); RoPE's and xPos's logit for the
    same content as query and key (Su et al. 2021, section 3.4.3, long-term decay; Sun et al. 2022);
    an added code's dot product ``PE(1)·PE(1+t)`` (Σ cos(t·ω_i) for the sinusoid: Kazemnejad 2019).
    A scheme whose values are random draws (learned tables, T5's buckets, the MLPs of FIRE and DPB)
    is measured at eight seeds and ``value`` is the weakest trend: by chance one draw can fall (T5's
    last bucket holds every distance past ``max_distance``; a random MLP falls at about half the
    seeds, and at all of the first five for FIRE), a formula falls at every seed. ``data``: ``scores [n]``
    (at ``seed``), ``per_seed`` (the trends).
    """
    scores = _scores_by_distance(scheme, n, seed, config)
    trends = [_rank_correlation(scores)]
    random_draws = not isinstance(scheme, PositionalEncoding) and not torch.equal(
        _matrix(scheme, 64, seed, config), _matrix(scheme, 64, seed + 1, config)
    )  # its values depend on the seed
    if random_draws:
        trends += [_rank_correlation(_scores_by_distance(scheme, n, seed + i, config)) for i in range(1, 8)]
    value = max(trends)
    passed = value <= threshold
    what = {"bias": "the bias", "rotary": "the logit of the same content"}.get(scheme_family(scheme), "PE(1)·PE(1+t)")
    how = "falls with" if passed else "does not fall steadily with"
    seeds = f", the weakest of {len(trends)} initialisations" if len(trends) > 1 else ""
    detail = (
        f"{what} {how} the distance t (rank correlation {value:.2f} over t = 0..{scores.shape[0] - 1}{seeds}; "
        f"{threshold} asked for)"
    )
    return CheckResult(
        "decays_with_distance",
        value,
        threshold,
        passed,
        detail,
        "<=",
        scheme_label(scheme),
        {"scores": scores, "per_seed": trends},
    )


def check_extrapolates(
    scheme: str | PositionalEncoding, *, n: int = 1024, factor: int = 4, seed: int = 0, **config: Any
) -> CheckResult:
    """Is there a code (or a bias) for positions past ``n``, up to ``factor * n``, and is it finite?
    "A Brief Summary on Positional Encoding Methods": a learned table has "no position embeddings beyond the maximum length", so a longer
    input has no code; a formula extends to any position (whether a model trained on short inputs
    then does well is the ``length`` experiment's question). ``value`` is the furthest position
    coded (threshold ``factor * n - 1``). ``data``: ``furthest``, ``n``.
    """
    furthest, want = -1, factor * n - 1
    try:
        E = encoding_matrix(scheme, torch.arange(n, factor * n), seed=seed, **config)  # [(factor - 1) n, d]
        if bool(torch.isfinite(E).all()):
            furthest = want
    except ValueError as err:
        if "outside" not in str(err) and "max_len" not in str(err):
            raise
        furthest = _max_positions(scheme, factor * n, config) - 1
    passed = furthest >= want
    detail = (
        f"codes exist and are finite at positions {n}..{want}"
        if passed
        else f"no code past position {furthest}: positions {furthest + 1}..{want} cannot be encoded"
    )
    return CheckResult(
        "extrapolates",
        float(furthest),
        float(want),
        passed,
        detail,
        ">=",
        scheme_label(scheme),
        {"furthest": furthest, "n": n},
    )
