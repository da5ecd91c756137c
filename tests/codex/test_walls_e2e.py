"""Walls end to end (issue #27): the real codex binary, the scripted model, default settings
(``default="allow"``, ``workspace-write``). What asks to leave the sandbox needs proof; what the sandbox
denied is never re-run outside it; the box is the session's only writable world."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Spec, System
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event, Result
from agent_fleet.testing import FunctionCall, RecordedRequest, Reply, ScriptedModelServer, apply_patch

from ._git import git

pytestmark = pytest.mark.e2e  # runs the real binary


def shell(cmd: str, *, escalate: bool = False) -> FunctionCall:
    """The scripted agent's ``exec_command``; ``escalate`` asks to run it outside the sandbox."""
    args: dict[str, Any] = {"cmd": cmd, "login": False}
    if escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = "it has to write outside the workspace"
    return FunctionCall(name="exec_command", arguments=args)


def script(path: Path, body: str) -> None:
    """A workspace script: opaque to the policy, so only the sandbox stands between it and ``body``."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    work.mkdir()
    git(work, "init", "-q")
    git(work, "config", "user.name", "agent")
    git(work, "config", "user.email", "agent@example.invalid")
    git(work, "config", "commit.gpgsign", "false")
    (work / "README.md").write_text("hello\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "init")
    return work


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace under the shared /tmp: outside every writable root."""
    path = tmp_path / "outside"
    path.mkdir()
    return path


async def _run(options: CodexOptions, spec: Spec) -> list[Event]:
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        return [event async for event in handle.events()]


def _state(directory: str) -> tuple[bool, int | None]:
    """(``x`` written in ``directory``, its mode), or (False, None) when it is gone."""
    if not os.path.isdir(directory):
        return False, None
    return os.path.exists(os.path.join(directory, "x")), stat.S_IMODE(os.stat(directory).st_mode)


def _denied(events: list[Event]) -> list[System]:
    return [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]


async def test_an_escalated_write_outside_the_workspace_is_declined(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path, outside: Path
) -> None:
    marker = outside / "marker"
    by_script = outside / "marker-script"
    script(repo / "publish.sh", f"touch {by_script}")
    scripted_model.enqueue(
        Reply(items=(shell(f"touch {marker}", escalate=True),)),
        Reply(items=(shell("./publish.sh", escalate=True),)),
        Reply.text("done"),
    )
    events = await _run(codex_options, Spec(prompt="publish", cwd=repo))

    assert not marker.exists() and not by_script.exists()
    rules = [e.data["rule"] for e in _denied(events)]
    # the shared /tmp is no writable root of the policy; the opaque script is not proven harmless
    assert rules == ["write-outside-workspace", "escalation-unproven"], rules
    assert all(e.data.get("escalated") for e in _denied(events))
    assert isinstance(events[-1], Result)


async def test_an_escalated_commit_in_its_own_repository_is_accepted(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path
) -> None:
    (repo / "work.txt").write_text("the agent's work\n")
    scripted_model.enqueue(
        # login=False: this machine's login profile (pyenv) can take seconds outside the sandbox; the
        # tripwire under a login shell is tested in test_box.py with a profile of its own
        Reply(items=(shell("git add -A && git commit -q -m x", escalate=True),)),
        Reply.text("done"),
    )
    events = await _run(codex_options, Spec(prompt="commit your work", cwd=repo))

    assert not _denied(events), _denied(events)
    assert git(repo, "log", "--format=%s").split() == ["x", "init"]
    assert git(repo, "status", "--porcelain") == ""


async def test_escalation_patterns_let_a_matching_escalated_command_run(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path, outside: Path
) -> None:
    marker = outside / "deployed"
    script(repo / "deploy.sh", f"touch {marker}")
    scripted_model.enqueue(Reply(items=(shell("./deploy.sh", escalate=True),)), Reply.text("done"))
    permission = PermissionConfig(escalation_patterns=[r"^\./deploy\.sh$"])
    events = await _run(codex_options, Spec(prompt="deploy", cwd=repo, permission=permission))

    assert not _denied(events)
    assert marker.exists()  # it ran outside the sandbox, as the setting allowed


async def test_a_sandbox_denied_command_never_runs_outside_the_sandbox(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, tmp_path: Path, outside: Path
) -> None:
    """A plain command (accepted by default allow) whose sandboxed run is denied: codex 0.163 re-runs it
    unsandboxed without asking; the box's tripwire refuses that run, 20 times out of 20."""
    runs = 20
    workspaces = []
    for n in range(runs):
        work = tmp_path / f"ws{n}"
        work.mkdir()
        script(work / "escape.sh", f"touch {outside}/marker-{n}")
        workspaces.append(work)

    def respond(request: RecordedRequest) -> Reply:
        if any(item.get("type") == "function_call_output" for item in request.input):
            return Reply.text("done")
        return Reply(items=(shell("./escape.sh"),))

    scripted_model.responder = respond

    async with CodexProvider(codex_options) as provider:
        gate = asyncio.Semaphore(4)

        async def one(work: Path) -> list[Event]:
            async with gate:
                handle = await provider.spawn(Spec(prompt="run the script", cwd=work))
                return [event async for event in handle.events()]

        results = await asyncio.gather(*(one(work) for work in workspaces))

    assert sorted(os.listdir(outside)) == []  # never written: not by the sandbox, not by a retry
    for events in results:
        assert isinstance(events[-1], Result)
        assert not _denied(events)  # the command itself was accepted (default allow)
    refused = [
        e
        for events in results
        for e in events
        if isinstance(e, System) and e.subtype == "codex_refused" and e.data.get("kind") == "unsandboxed_run"
    ]
    # How often codex retries depends on how fast the denied run ends (on a loaded machine, seldom);
    # each retry it made was refused (the next test forces one).
    print(f"codex retried outside the sandbox {len(refused)} times in {runs} runs; every one refused")
    assert all(e.data["command"] == "./escape.sh" for e in refused)


async def test_an_unsandboxed_run_without_a_grant_is_refused(
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    repo: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deterministically, what a silent retry is: codex running an accepted command outside the
    sandbox with no grant from the bridge. Here an escalation whose grant is withheld."""
    from agent_fleet.codex._box import Box

    marker = outside / "escaped"
    script(repo / "deploy.sh", f"touch {marker}")
    monkeypatch.setattr(Box, "grant", lambda self, command: True)  # accepted, but no grant written
    scripted_model.enqueue(Reply(items=(shell("./deploy.sh", escalate=True),)), Reply.text("done"))
    permission = PermissionConfig(escalation_patterns=[r"^\./deploy\.sh$"])
    events = await _run(codex_options, Spec(prompt="deploy", cwd=repo, permission=permission))

    assert not marker.exists()
    refused = [e.data for e in events if isinstance(e, System) and e.subtype == "codex_refused"]
    assert refused == [{"kind": "unsandboxed_run", "command": "./deploy.sh"}]


async def test_the_box_is_the_workspace_and_its_own_temporary_directory(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path, tmp_path: Path
) -> None:
    box_tmp = tmp_path / "task-tmp"
    inherited = Path(codex_options.env["TMPDIR"]) / "inherited-marker"  # the codex child's own TMPDIR
    shared = tmp_path / "shared-tmp-marker"  # under /tmp, outside the box
    touch = f'touch "$TMPDIR/box-marker" {shared} {inherited} in-ws'
    script(repo / "probe.sh", f'echo "$TMPDIR" > tmpdir.txt; {touch}')
    scripted_model.enqueue(Reply(items=(shell("./probe.sh"),)), Reply.text("done"))
    await _run(codex_options, Spec(prompt="probe", cwd=repo, temp_dir=box_tmp))

    assert (repo / "tmpdir.txt").read_text().strip() == str(box_tmp)
    assert (box_tmp / "box-marker").exists() and (repo / "in-ws").exists()
    assert not shared.exists() and not inherited.exists()
    assert box_tmp.exists()  # the caller's directory is the caller's to remove


async def test_without_a_temp_dir_the_session_gets_a_private_one_removed_at_the_end(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path
) -> None:
    script(repo / "probe.sh", 'echo "$TMPDIR" > tmpdir.txt; touch "$TMPDIR/x"')
    scripted_model.enqueue(Reply(items=(shell("./probe.sh"),)), Reply.text("done"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="probe", cwd=repo))
        [event async for event in handle.events()]
        private = (repo / "tmpdir.txt").read_text().strip()
        assert _state(private) == (True, 0o700)
        assert not private.startswith(str(repo))
        await handle.stop()
        assert _state(private) == (False, None)


async def test_file_changes_into_the_repository_machinery_are_declined(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, repo: Path
) -> None:
    def add(path: str) -> str:
        return f"*** Begin Patch\n*** Add File: {path}\n+echo pwned\n*** End Patch\n"

    scripted_model.enqueue(
        Reply(items=(apply_patch(add(".git/hooks/pre-commit")),)),
        Reply(items=(apply_patch(add(".codex/config.toml")),)),
        Reply(items=(apply_patch(add(".claude/settings.json")),)),
        Reply(items=(apply_patch(add("src/ok.py")),)),
        Reply.text("done"),
    )
    events = await _run(codex_options, Spec(prompt="edit", cwd=repo))

    assert not (repo / ".git/hooks/pre-commit").exists()
    assert not (repo / ".codex").exists() and not (repo / ".claude").exists()
    assert (repo / "src/ok.py").exists()
    assert [e.data["rule"] for e in _denied(events)] == ["vital-path"] * 3


async def test_a_private_codex_tmpdir_keeps_the_sandbox_working_with_codex_home_under_tmp(
    scripted_model: ScriptedModelServer, tmp_path: Path, repo: Path, codex_options: CodexOptions
) -> None:
    """The provider gives its codex child a private TMPDIR: with CODEX_HOME under the shared temporary
    directory codex would otherwise refuse its sandbox helper, and every sandboxed command fail."""
    env = {k: v for k, v in codex_options.env.items() if k != "TMPDIR"}
    options = CodexOptions(config=dict(codex_options.config), env=env)
    scripted_model.enqueue(Reply(items=(shell("./make-note.sh"),)), Reply.text("done"))
    script(repo / "make-note.sh", "echo sandboxed > note.txt")
    events = await _run(options, Spec(prompt="note", cwd=repo))
    assert (repo / "note.txt").read_text() == "sandboxed\n", [e for e in events if isinstance(e, System)]
