"""The scheme registry (``posenc.available``) against the list the tests over every scheme use."""

from __future__ import annotations

import posenc
from tests.all_schemes import SCHEMES


def test_every_registered_scheme_is_reviewed() -> None:
    """The review covers the whole registry: a new scheme must be added to SCHEMES."""
    assert sorted(posenc.available()) == sorted(SCHEMES)
