"""All checks for one scheme, and the side-by-side verdict of every scheme against the criteria.

Which checks apply depends on the family: absolute codes and the references get all of them; rotary
schemes all of them on their rotated query and key (see :mod:`posenc.analysis.checks`); biases and
Shaw's relative embeddings are functions of the distance by construction, so *unique* (are
distances told apart), *bounded*, *deterministic* and *extrapolates* are measured, and for biases
*decays with distance*; ``none`` has no code to relate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..schemes import PositionalEncoding, available, scheme_class
from . import checks as C
from .encodings import is_data_dependent, scheme_family
from .references import REFERENCE_ENCODINGS

__all__ = [
    "CRITERIA",
    "CHECKS",
    "WHY",
    "WHY_PASSES",
    "applicable_checks",
    "run_checks",
    "verdict_table",
    "default_schemes",
]

#: Criterion name -> check function, in the order the tables show them.
CHECKS: dict[str, Callable[..., C.CheckResult]] = {
    "unique": C.check_unique,
    "bounded": C.check_bounded,
    "deterministic": C.check_deterministic,
    "length_invariant": C.check_length_invariant,
    "linear_offset_map": C.check_linear_offset_map,
    "offset_similarity": C.check_offset_similarity,
    "distance_monotone": C.check_distance_monotone,
    "decays_with_distance": C.check_decays_with_distance,
    "extrapolates": C.check_extrapolates,
}
CRITERIA = tuple(CHECKS)

_APPLICABLE = {
    "none": ("unique", "bounded", "deterministic", "length_invariant"),
    "absolute": CRITERIA,
    "reference": CRITERIA,
    "rotary": CRITERIA,
    "bias": ("unique", "bounded", "deterministic", "decays_with_distance", "extrapolates"),
    "relative": ("unique", "bounded", "deterministic", "extrapolates"),
}

_NOT_APPLICABLE = {
    "none": "no position code: nothing to relate between positions",
    "bias": "a relative bias: a function of the distance by construction, not a code per position",
    "relative": "relative embeddings indexed by the clipped distance, not a code per position",
}

#: The articles' explanations, shown beside a measured failure (or a notable pass).
WHY: dict[tuple[str, str], str] = {
    ("index", "bounded"): "PE(p) = p grows without limit: large positions swamp the token embedding",
    ("index", "distance_monotone"): "every code points the same way, so the cosine distance between any two is 0",
    ("index", "linear_offset_map"): "PE(p+k) = PE(p) + k is affine, not linear: no matrix adds the constant k",
    ("fraction", "length_invariant"): "p / L changes with the sequence length L: position 1 is 1/5 in a 5-word "
    "sentence and 1/30 in a 30-word one",
    ("fraction", "distance_monotone"): "every code points the same way, so the cosine distance between any two is 0",
    ("fraction", "linear_offset_map"): "PE(p+k) = PE(p) + k/L is affine, not linear",
    ("sine_only", "linear_offset_map"): (
        "sin(ω(p+k)) needs cos(ωp), which a sine-only code lacks (and no linear map sends PE(0) = 0 to PE(k)): "
        "why the paper pairs sines with cosines"
    ),
    ("sine_only", "offset_similarity"): "without the cosine partner, PE(p)·PE(p+k) depends on p, not only on k",
    ("binary", "linear_offset_map"): "carrying digits is not linear: adding k flips bits depending on p",
    ("binary", "distance_monotone"): "bits are discrete: p and p+1 differ in one bit or in every bit up to a carry "
    "(7 -> 8 flips four)",
    ("learned", "linear_offset_map"): "independent random rows: nothing ties PE(p+k) to PE(p) until training does",
    ("learned", "offset_similarity"): "independent random rows: their dot products are noise",
    ("learned", "distance_monotone"): "independent random rows are all about equally far apart",
    ("sinusoidal", "linear_offset_map"): "each (sin, cos) pair turns by the fixed angle k·ω_i: PE(p+k) = R(k) PE(p)",
    ("sinusoidal", "offset_similarity"): "PE(p)·PE(p+k) = Σ_i cos(k·ω_i): a function of k alone",
    ("rope", "offset_similarity"): "rotations by m·θ and n·θ leave q·k depending on m − n alone",
    ("xpos", "offset_similarity"): "the query decay ζ^(m/B) and key decay ζ^(−n/B) combine to ζ^((m−n)/B)",
    ("alibi", "bounded"): "the penalty −m·distance grows linearly by design: it is a logit bias, not an input",
    ("kerple", "bounded"): "the penalty −r1·log(1 + r2·distance) grows without limit by design (logarithmically): "
    "a logit bias, not an input",
    ("kerple", "deterministic"): "r1 and r2 are learned per head, drawn uniformly at initialisation (GPT-NeoX "
    "ParallelKerpleLog) until training sets them",
    ("sandwich", "bounded"): "the penalty Σ cos((i − j)ω_k) − d'/2 reaches about −d'/2 for distant keys by design, "
    "scaled per head by H/8h: a logit bias, not an input",
    ("t5", "unique"): "by design, past the exact buckets each log-spaced bucket holds several distances (all past "
    "max_distance share the last)",
    ("xpos", "bounded"): "the key's scale ζ^(−n/B) grows without limit along the sequence (the query's shrinks)",
    ("shaw", "unique"): "by design, distances past max_relative_position share the edge embedding",
    ("none", "unique"): "no position code: every position looks the same",
    ("learned", "deterministic"): "a learned table starts as random draws: its codes depend on the initialisation "
    "until training sets them",
    (
        "learned",
        "extrapolates",
    ): "a table has no position embeddings beyond its maximum length (“A Brief Summary on Positional Encoding Methods”)",
    ("learned", "decays_with_distance"): "independent random rows: PE(1)·PE(1+t) is noise at every t",
    ("t5", "deterministic"): "one learned scalar per bucket and head: random until training sets them",
    ("t5", "decays_with_distance"): "the buckets' biases are learned: random at initialisation, so no decay yet",
    ("shaw", "deterministic"): "learned embeddings per clipped distance: random until training sets them",
    ("alibi", "decays_with_distance"): "the penalty −m·t falls linearly with the distance (Press et al. 2022)",
    ("rope", "decays_with_distance"): "the same content rotated t apart: pairs turning at different speeds fall out "
    "of step, RoFormer's long-term decay (section 3.4.3)",
    ("sinusoidal", "decays_with_distance"): "PE(p)·PE(p+t) = Σ_i cos(t·ω_i): the slow pairs keep it high only for "
    "short distances",
}


#: The entries of :data:`WHY` that explain a pass; the others explain a failure. Each is shown only
#: beside the verdict it explains (``rope`` at d = 8 can fail to decay, a learned table long enough
#: for the positions asked can extrapolate).
WHY_PASSES = frozenset(
    {
        ("sinusoidal", "linear_offset_map"),
        ("sinusoidal", "offset_similarity"),
        ("rope", "offset_similarity"),
        ("xpos", "offset_similarity"),
        ("alibi", "decays_with_distance"),
        ("rope", "decays_with_distance"),
        ("sinusoidal", "decays_with_distance"),
    }
)


def default_schemes() -> list[str]:
    """Every registered sequence scheme followed by the reference codes: the default verdict rows.

    Schemes for grids (class attribute ``n_axes > 1``: ``sinusoidal_nd``, ``rope_axial``) are left
    out: the criteria are stated for positions on a line (pass them explicitly to measure axis 0).
    Data-dependent schemes (class attribute ``data_dependent``: CoPE, forgetting attention) are left
    out too: they have no code from positions alone to measure.
    """
    return [
        name
        for name in available()
        if getattr(scheme_class(name), "n_axes", 1) == 1 and not getattr(scheme_class(name), "data_dependent", False)
    ] + list(REFERENCE_ENCODINGS)


def applicable_checks(scheme: str | PositionalEncoding) -> tuple[str, ...]:
    """The criteria measured for ``scheme`` (by family; see the module docstring)."""
    if is_data_dependent(scheme):
        return ()  # no code from positions alone to measure (CoPE, forgetting attention)
    return _APPLICABLE[scheme_family(scheme)]


def run_checks(scheme: str | PositionalEncoding, *, seed: int = 0, **config: Any) -> list[C.CheckResult]:
    """Every applicable check for ``scheme`` with its default sizes, in :data:`CRITERIA` order."""
    kw = {} if isinstance(scheme, PositionalEncoding) else config
    if isinstance(scheme, PositionalEncoding) and config:
        raise ValueError(f"config {sorted(config)} cannot be applied to an already built {type(scheme).__name__}")
    return [CHECKS[name](scheme, seed=seed, **kw) for name in applicable_checks(scheme)]


def _reason(label: str, criterion: str, result: C.CheckResult | None, family: str) -> str:
    if result is None:
        if label in available() and is_data_dependent(label):
            return "data-dependent: the position term needs queries, keys or the layer input"
        return _NOT_APPLICABLE.get(family, "not measured for this family")
    why = WHY.get((label, criterion)) if ((label, criterion) in WHY_PASSES) == result.passed else None
    if result.passed:
        return why or result.detail
    return f"{why} ({result.detail})" if why else result.detail


def verdict_table(schemes: Iterable[str | PositionalEncoding] | None = None, *, seed: int = 0) -> list[dict[str, Any]]:
    """One row per scheme (default: :func:`default_schemes`) against :data:`CRITERIA`.

    Each row: ``{"scheme": name, "family": family, "reference": bool, "results": {criterion:
    CheckResult or None}, "verdict": {criterion: "pass" | "fail" | "n/a"}, "reasons": {criterion:
    str}}``; a reason says why it failed in the articles' terms with the measured detail, why it
    passes where the articles explain it, or why the criterion does not apply.
    """
    rows = []
    for scheme in default_schemes() if schemes is None else schemes:
        label, family = C.scheme_label(scheme), scheme_family(scheme)
        measured = {r.name: r for r in run_checks(scheme, seed=seed)}
        results = {name: measured.get(name) for name in CRITERIA}
        verdict = {name: "n/a" if r is None else "pass" if r.passed else "fail" for name, r in results.items()}
        reasons = {name: _reason(label, name, r, family) for name, r in results.items()}
        rows.append(
            {
                "scheme": label,
                "family": family,
                "reference": family == "reference",
                "results": results,
                "verdict": verdict,
                "reasons": reasons,
            }
        )
    return rows
