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
from .encodings import build_scheme, is_data_dependent, scheme_family
from .references import REFERENCE_ENCODINGS

__all__ = [
    "CRITERIA",
    "CHECKS",
    "DEFINITIONS",
    "WHY",
    "WHY_PASSES",
    "FOR_ANY_INPUT",
    "INPUT",
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

#: Each criterion in one line, with the article it comes from: what the atlas shows above its tables.
DEFINITIONS: dict[str, str] = {
    "unique": "no two positions share a code (smallest distance between two codes > 0). "
    "Pim 2023, “Understanding positional embeddings in transformer models”.",
    "bounded": "every value stays within a fixed bound however far the positions go, so the code cannot swamp "
    "the token embedding. Pim 2023.",
    "deterministic": "the same positions get the same code for every initialisation (a learned table does not). "
    "Pim 2023.",
    "length_invariant": "a position's code does not depend on how long the sequence is (p / L does). Pim 2023.",
    "linear_offset_map": "one fixed matrix M_k maps PE(p) to PE(p + k) for every p (Vaswani et al. 2017, §3.5's "
    "hypothesis; proved for the sinusoid in Kazemnejad 2019, “Transformer Architecture: "
    "The Positional Encoding”).",
    "offset_similarity": "the score between two positions depends on their offset alone, not on where they are. "
    "Kazemnejad 2019, “Other details”.",
    "distance_monotone": "codes further apart in position are further apart in cosine distance. Pim 2023.",
    "decays_with_distance": "the score of the same content falls as query and key move apart (Su et al. 2021, "
    "RoFormer §3.4.3; Press et al. 2022, ALiBi).",
    "extrapolates": "there is a finite code (or bias) for positions past the ones it was built for (“A Brief Summary "
    "on Positional Encoding Methods”: a learned table has no row past its maximum length).",
}

_APPLICABLE = {
    "none": ("unique", "bounded", "deterministic", "length_invariant"),
    "absolute": CRITERIA,
    "reference": CRITERIA,
    "rotary": CRITERIA,
    "bias": ("unique", "bounded", "deterministic", "offset_similarity", "decays_with_distance", "extrapolates"),
    "relative": ("unique", "bounded", "deterministic", "extrapolates"),
}

_NOT_APPLICABLE = {
    "none": "no position code: nothing to relate between positions",
    "bias": "a relative bias: no code per position to compare (offset similarity measures whether the bias "
    "depends on the distance alone)",
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
    ("fire", "offset_similarity"): "past the threshold L the normaliser ψ(max(L, i)) follows the query position i, "
    "so that the bias spans [0, i] at any length (Li et al. 2024, §3.2): a function of i − j alone only for i <= L",
    ("fire", "deterministic"): "the MLP f, c and L are learned: f is a random draw until training sets it",
    ("fire", "decays_with_distance"): "f is a random MLP at initialisation: whether the bias falls with the distance "
    "is up to the draw (it does at about half the seeds) until training shapes it",
    ("dpb", "deterministic"): "the MLP of the distance is learned: a random draw until training sets it",
    ("dpb", "decays_with_distance"): "the MLP of the distance is random at initialisation: it rises or falls with the "
    "draw until training shapes it",
    ("dpb", "bounded"): "the MLP of the raw distance i − j (log_distance=False) grows about linearly with it, "
    "without limit",
    ("kerple", "decays_with_distance"): "r1, r2 > 0: −r1·log(1 + r2·t) falls with t whatever they are (Chi et al. "
    "2022, §4.2)",
    ("sandwich", "decays_with_distance"): "Σ_k cos(t·ω_k) falls, wiggling, from d'/2 as the pairs fall out of step "
    "(Chi et al. 2023, §5)",
    ("forgetting", "decays_with_distance"): "every log f_t < 0 (f_t = σ(·) < 1): the bias Σ_{j<t≤i} log f_t falls "
    "as the key moves back, whatever the input (Lin et al. 2025, §2)",
    ("forgetting", "deterministic"): "the forget gates' weights w_h are random draws until training sets them",
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
        ("kerple", "decays_with_distance"),
        ("sandwich", "decays_with_distance"),
        ("forgetting", "decays_with_distance"),
    }
)

#: Criteria that the formula of a data-dependent scheme settles for every input (the reason is in
#: :data:`WHY`): measured on random inputs all the same. The input decides the others.
FOR_ANY_INPUT = frozenset({("forgetting", "decays_with_distance")})

#: The verdict of a data-dependent scheme's criterion that the input decides.
INPUT = "input"

#: The criteria of a bias that the input decides for a data-dependent scheme, and why.
_INPUT_REASONS = {
    "unique": "which distances get the same term is up to the input",
    "bounded": "how large the term grows is up to the input",
    "offset_similarity": "the term between positions p + k and p follows the input between them, not k alone",
    "decays_with_distance": "whether the term falls with the distance is up to the input",
}


def default_schemes() -> list[str]:
    """Every registered sequence scheme followed by the reference codes: the default verdict rows.

    Schemes for grids (class attribute ``n_axes > 1``: ``sinusoidal_nd``, ``rope_axial``) are left
    out: the criteria are stated for positions on a line (pass them explicitly to measure axis 0).
    Data-dependent schemes (class attribute ``data_dependent``: CoPE, forgetting attention) are in:
    their rows say which criteria the input decides (:func:`verdict_table`).
    """
    return [name for name in available() if getattr(scheme_class(name), "n_axes", 1) == 1] + list(REFERENCE_ENCODINGS)


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


def _data_dependent_row(scheme: str | PositionalEncoding, seed: int) -> tuple[dict, dict, dict]:
    """``(results, verdict, reasons)`` of a data-dependent scheme, measured on random inputs
    (:func:`~posenc.analysis.bias.bias_against_distance`). *deterministic* (the same inputs give the
    same term at seeds ``seed`` and ``seed + 1``) and *extrapolates* (the term is finite over 1024
    positions) get verdicts; the other criteria of a bias read :data:`INPUT` with what the random
    inputs showed, unless :data:`FOR_ANY_INPUT` says the formula settles them."""
    import torch

    from .bias import bias_against_distance, random_input_bias

    label = C.scheme_label(scheme)
    results: dict[str, C.CheckResult | None] = dict.fromkeys(CRITERIA)
    verdict = dict.fromkeys(CRITERIA, "n/a")
    reasons = dict.fromkeys(CRITERIA, "data-dependent: no code per position to compare")
    data = bias_against_distance(scheme, length=128, num_samples=8, seed=seed)
    curve = data["mean"].mean(0)  # [n]: over heads, inputs and queries, at each distance
    trend = C._rank_correlation(curve)
    on = f"on {data['inputs']}"
    measured = {
        "unique": f"{on}: the mean term spans {float(curve.min()):.3g} … {float(curve.max()):.3g}",
        "bounded": f"{on}: the 10–90 % band spans {float(data['low'].min()):.3g} … {float(data['high'].max()):.3g} "
        f"over {curve.shape[0]} positions",
        "offset_similarity": on,
        "decays_with_distance": f"{on}: the mean term against the distance has rank correlation {trend:.2f}; "
        "-0.5 asked for",
    }
    for name, what in _INPUT_REASONS.items():
        if (label, name) in FOR_ANY_INPUT:  # only decays_with_distance so far
            results[name] = C.CheckResult(name, trend, -0.5, trend <= -0.5, measured[name], "<=", label)
            verdict[name] = "pass" if trend <= -0.5 else "fail"
            reasons[name] = f"{WHY[(label, name)]} ({measured[name]})"
        else:
            verdict[name] = INPUT
            reasons[name] = f"depends on the input: {what} ({measured[name]})"

    def term(seed_: int, length: int, samples: int) -> torch.Tensor:  # [S, h, n, n]: keys j <= i kept
        module = build_scheme(C._rebuild(scheme, seed_), seed=seed_)  # a built module: afresh from its config
        return random_input_bias(module, length, num_samples=samples, seed=1234).tril()  # the same inputs

    first = term(seed, 64, 2)
    same, other = (float((first - term(s, 64, 2)).abs().max()) for s in (seed, seed + 1))
    value = max(same, other)
    results["deterministic"] = C.CheckResult(
        "deterministic", value, 0.0, value == 0.0, "", "<=", label, {"seed_dependent": other > 0}
    )
    verdict["deterministic"] = "pass" if value == 0.0 else "fail"
    if value == 0.0:
        reasons["deterministic"] = "for the same input every build gives the same term, whatever the seed"
    elif same > 0.0:
        reasons["deterministic"] = f"two builds with seed {seed} give terms differing by up to {same:.3g}"
    else:
        found = f"for the same input, builds with seeds {seed} and {seed + 1} give terms differing by up to {other:.3g}"
        why = WHY.get((label, "deterministic"))
        reasons["deterministic"] = f"{why} ({found})" if why else found
    long = random_input_bias(build_scheme(scheme, seed=seed), 1024, num_samples=1, seed=seed).tril()  # as given
    finite = bool(torch.isfinite(long).all())
    results["extrapolates"] = C.CheckResult("extrapolates", 1023.0 if finite else -1.0, 1023.0, finite, "", ">=", label)
    verdict["extrapolates"] = "pass" if finite else "fail"
    reasons["extrapolates"] = (
        "computed from the keys and their inputs, not from a table of positions: finite at every distance of "
        "1024 positions for random inputs"
        if finite
        else "not finite over 1024 positions for random inputs"
    )
    return results, verdict, reasons


def verdict_table(schemes: Iterable[str | PositionalEncoding] | None = None, *, seed: int = 0) -> list[dict[str, Any]]:
    """One row per scheme (default: :func:`default_schemes`) against :data:`CRITERIA`.

    Each row: ``{"scheme": name, "family": family, "reference": bool, "results": {criterion:
    CheckResult or None}, "verdict": {criterion: "pass" | "fail" | "n/a"}, "reasons": {criterion:
    str}}``; for a data-dependent scheme a verdict may also be :data:`INPUT` ("depends on input"),
    with what random inputs showed; a reason says why it failed in the articles' terms with the measured detail, why it
    passes where the articles explain it, or why the criterion does not apply.
    """
    rows = []
    for scheme in default_schemes() if schemes is None else schemes:
        label, family = C.scheme_label(scheme), scheme_family(scheme)
        if is_data_dependent(scheme):
            results, verdict, reasons = _data_dependent_row(scheme, seed)
        else:
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
