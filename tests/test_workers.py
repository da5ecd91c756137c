"""How many xdist workers ``-n auto`` starts (tests/conftest.py): three only when ``-m`` leaves every e2e
test out, whatever other marks a test carries."""

from __future__ import annotations

import pytest
from tests.conftest import _selects_no_e2e_test


@pytest.mark.parametrize(
    ("markexpr", "no_e2e"),
    [
        ("not e2e", True),
        ("not e2e and not alone", True),
        ("not (e2e or alone)", True),
        ("alone and not e2e", True),
        ("", False),
        ("e2e", False),
        ("protocol_smoke", False),
        ("not e2e or protocol_smoke", False),
        ("not alone", False),
        ("e2e or not e2e", False),
        ("not e2e and (", False),  # pytest reports the bad expression itself
    ],
)
def test_only_a_selection_without_e2e_tests_counts_as_one(markexpr: str, no_e2e: bool) -> None:
    assert _selects_no_e2e_test(markexpr) is no_e2e
