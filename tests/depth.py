"""How deep the suite's randomized tests dig: a quick pass by default, so the unit run stays under a
minute, and the full depth where ``AGENT_FLEET_DEEP_TESTS=1`` (``.ci/run`` sets it).

Hypothesis keeps the examples that failed in ``.hypothesis/`` and replays them first on every run, so
a quick pass still checks what a deep one found.
"""

from __future__ import annotations

import os

DEEP = os.environ.get("AGENT_FLEET_DEEP_TESTS", "") not in ("", "0")

#: Seconds the HTTP API's fuzzing (``tests/serve/test_schemathesis.py``) may run.
FUZZ_SECONDS = 60 if DEEP else 8


def examples(deep: int) -> int:
    """Hypothesis examples for a test that wants ``deep`` of them in a deep run: a third by default."""
    return deep if DEEP else max(20, deep // 3)
