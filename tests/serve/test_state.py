"""The daemon's state directory as an operator meets it (issue 28 items 6, 8, 9): private whatever it was,
one daemon at a time, and plain HTTP on the network said out loud. Hermetic: no agent runs."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.errors import UsageError
from agent_fleet.serve import Daemon, ServeConfig

from .conftest import MakeDaemon, client


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return out


async def test_a_state_dir_others_can_read_is_made_private_and_said_so(
    tmp_path: Path, token_file: Path
) -> None:
    """An existing --state-dir of mode 0755 (an earlier version, a mkdir by hand) held batch records that
    every local user could read."""
    state = tmp_path / "state"
    batch = state / "batches" / "b20250101-000000-abcdef"
    batch.mkdir(parents=True)
    for name in ("summary.json", "report.html", "transcript-a.jsonl"):
        (batch / name).write_text("{}")
        (batch / name).chmod(0o644)
    for directory in (state, state / "batches", batch):
        directory.chmod(0o755)
    daemon = Daemon(ServeConfig(state_dir=state, token_file=token_file, allow_roots=(tmp_path,)))
    try:
        assert any("made it private" in w and "755" in w for w in daemon.warnings), daemon.warnings
        modes = _modes(state)
        assert {m for p, m in modes.items() if (state / p).is_dir()} == {0o700}, modes
        assert {m for p, m in modes.items() if not (state / p).is_dir()} == {0o600}, modes
    finally:
        await daemon.close()
    again = Daemon(ServeConfig(state_dir=state, token_file=token_file, allow_roots=(tmp_path,)))
    await again.close()
    assert again.warnings == []  # private now: nothing to say


async def test_a_state_dir_of_another_user_is_refused(
    tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: state.stat().st_uid + 1)  # as if another user ran it
    with pytest.raises(UsageError, match="belongs to another user"):
        Daemon(ServeConfig(state_dir=state, token_file=token_file, allow_roots=(tmp_path,)))


async def test_a_second_daemon_on_the_same_state_dir_stops_naming_the_first(
    make_daemon: MakeDaemon, tmp_path: Path, token_file: Path
) -> None:
    """Two daemons on one --state-dir: the second marked the first's live sessions interrupted."""
    first = await make_daemon()
    first.store.add_session("s-live", "codex", {"prompt": "p"})  # a session the first daemon runs
    with pytest.raises(UsageError, match=rf"in use by another agent-fleet serve \(pid {os.getpid()}\)"):
        Daemon(ServeConfig(state_dir=tmp_path / "state", token_file=token_file, allow_roots=(tmp_path,)))
    argv = ["serve", "--port", "0", "--state-dir", str(tmp_path / "state"), "--token-file", str(token_file)]
    result = await asyncio.to_thread(CliRunner().invoke, cli, argv)  # its own event loop
    assert result.exit_code == 2, result.output
    assert f"pid {os.getpid()}" in result.output and "Traceback" not in result.output
    assert first.store.session("s-live")["state"] == "running"  # type: ignore[index]  # untouched
    async with client(first) as http:
        assert (await http.get("/v1/sessions/s-live")).json()["state"] == "running"


async def test_the_lock_is_let_go_at_close(tmp_path: Path, token_file: Path) -> None:
    config = ServeConfig(state_dir=tmp_path / "state", token_file=token_file, allow_roots=(tmp_path,))
    await Daemon(config).close()
    await Daemon(config).close()  # no "in use"


async def test_plain_http_on_the_network_is_said(tmp_path: Path, token_file: Path) -> None:
    daemon = Daemon(ServeConfig(host="0.0.0.0", state_dir=tmp_path / "s", token_file=token_file))
    await daemon.close()
    [warning] = [w for w in daemon.warnings if "plain HTTP" in w]
    assert "TLS" in warning and "docs/how-to/proxy.md" in warning
    loopback = Daemon(ServeConfig(state_dir=tmp_path / "s2", token_file=token_file))
    await loopback.close()
    assert loopback.warnings == []


def test_the_serve_command_prints_the_warnings(
    tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_fleet.serve

    class Stub:  # the daemon, up to its warnings
        def __init__(self, config: ServeConfig) -> None:
            self.warnings = ["serving plain HTTP on the network (0.0.0.0): ... docs/how-to/proxy.md"]

        async def start(self) -> None:
            raise UsageError("stop here")

    monkeypatch.setattr(agent_fleet.serve, "Daemon", Stub)
    argv = ["serve", "--host", "0.0.0.0", "--state-dir", str(tmp_path / "s"), "--token-file", str(token_file)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2
    assert "warning: serving plain HTTP on the network" in result.output
