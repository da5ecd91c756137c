"""What the runner needs around a review: the threshold vocabulary, what changed, the follow-up prompt.

The review itself is the provider's (``Provider.review``, see ``Capabilities.supports_review``): the
runner names a ``ReviewTarget`` and gets a ``ReviewResult`` with ``Finding``s.
"""

from __future__ import annotations

import os
from typing import Final

from agent_fleet.contract import Finding, ReviewResult, ReviewTarget
from agent_fleet.errors import UsageError
from agent_fleet.runner import _git

__all__ = [
    "PRIORITY_NAMES",
    "Finding",
    "ReviewResult",
    "ReviewTarget",
    "followup_prompt",
    "parse_priority",
    "review_target",
]

PRIORITY_NAMES: Final = ("P0", "P1", "P2", "P3")


def parse_priority(text: str) -> int:
    """``"P1"`` / ``"p1"`` / ``"1"`` -> 1. Raises ``UsageError`` for anything else."""
    value = text.strip().upper().removeprefix("P")
    if value in ("0", "1", "2", "3"):
        return int(value)
    raise UsageError(f"review threshold must be one of {', '.join(PRIORITY_NAMES)}, not {text!r}")


async def review_target(cwd: str | os.PathLike[str], start_head: str | None) -> ReviewTarget | None:
    """What to review in ``cwd`` since ``start_head``: one new commit on a clean tree, everything since
    ``start_head``, or the uncommitted changes; None when nothing changed."""
    commits = await _git.commits_since(cwd, start_head)
    dirty = await _git.is_dirty(cwd)
    current = await _git.head(cwd)
    if commits == 1 and not dirty and current is not None:
        subject = await _git.git(cwd, "log", "-1", "--format=%s", current)
        return ReviewTarget(kind="commit", sha=current, title=subject or None)
    if commits and start_head is not None:
        return ReviewTarget(kind="base", base=start_head)
    if commits or dirty:
        # No starting commit to diff against (a fresh repository): review what is uncommitted, or the
        # last commit when the tree is clean.
        if dirty:
            return ReviewTarget(kind="uncommitted")
        assert current is not None
        return ReviewTarget(kind="commit", sha=current)
    return None


def followup_prompt(review: ReviewResult, threshold: int) -> str:
    """The follow-up turn's prompt: the findings at or above ``threshold``, to fix."""
    findings = review.blocking(threshold)
    lines = [
        f"A code review of your changes found {len(findings)} issue(s) at or above "
        f"{PRIORITY_NAMES[threshold]}. Fix each of them, then finish:",
        *(f.render() for f in findings),
    ]
    return "\n".join(lines)
