"""Judge a whole corpus category in one test and report every case that failed, not just the first.

A corpus of thousands of commands as thousands of test items costs pytest (and xdist) a few
milliseconds each, ten times what judging a command costs; a test per category keeps the unit run
fast while a failure still names each command it concerns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import pytest

T = TypeVar("T")


def judge_all(cases: Iterable[T], check: Callable[[T], None]) -> int:
    """Run ``check`` on every case; fail once, listing each case whose check failed and why.

    Returns how many cases were judged, so a caller can assert that a category was not empty."""
    failures: list[str] = []
    judged = 0
    for case in cases:
        judged += 1
        try:
            check(case)
        except AssertionError as exc:
            why = "\n    ".join(str(exc).splitlines()[:2]) or "assertion failed"
            failures.append(f"  {case!r}\n    {why}")
    if not judged:
        pytest.fail("no case to judge", pytrace=False)
    if failures:
        pytest.fail(f"{len(failures)} of {judged} cases failed:\n" + "\n".join(failures), pytrace=False)
    return judged
