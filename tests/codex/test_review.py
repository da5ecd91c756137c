"""Codex review: its rendered review text -> findings, and the neutral target -> the wire target."""

from __future__ import annotations

from agent_fleet.codex._review import parse_review, wire_target
from agent_fleet.contract import ReviewTarget

RENDERED_ONE = (
    "crashes at import\n\nReview comment:\n\n- [P0] Division by zero \u2014 /tmp/repo/a.py:1-1\n"
    "  a.py divides by zero at import"
)
RENDERED_TWO = (
    "two issues\n\nFull review comments:\n\n- Missing check \u2014 /x/a.py:1-2\n  b1\n\n"
    "- [P1] Other \u2014 /x/b.py:3-3\n  b2\n  line2"
)


def test_parse_review_single_finding() -> None:
    explanation, findings = parse_review(RENDERED_ONE)
    assert explanation == "crashes at import"
    assert len(findings) == 1
    f = findings[0]
    assert (f.title, f.priority, f.location) == ("[P0] Division by zero", 0, "/tmp/repo/a.py:1-1")
    assert f.body == "a.py divides by zero at import"


def test_parse_review_several_findings_and_untagged() -> None:
    explanation, findings = parse_review(RENDERED_TWO)
    assert explanation == "two issues"
    assert [(f.title, f.priority, f.rank) for f in findings] == [
        ("Missing check", None, 3),
        ("[P1] Other", 1, 1),
    ]
    assert findings[1].body == "b2\nline2"


def test_parse_review_without_findings() -> None:
    assert parse_review("looks fine") == ("looks fine", [])


def test_wire_targets() -> None:
    assert wire_target(ReviewTarget(kind="commit", sha="abc", title="t")) == {
        "type": "commit",
        "sha": "abc",
        "title": "t",
    }
    assert wire_target(ReviewTarget(kind="commit", sha="abc")) == {"type": "commit", "sha": "abc"}
    assert wire_target(ReviewTarget(kind="base", base="def")) == {"type": "baseBranch", "branch": "def"}
    assert wire_target(ReviewTarget(kind="uncommitted")) == {"type": "uncommittedChanges"}
