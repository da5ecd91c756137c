"""Claude Code's sandbox, the parts agent-fleet decides (pure or on temporary directories, no CLI)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_fleet.claude._sandbox import CLI_TEMP_LIMIT, missing, refused, session_temp
from agent_fleet.errors import UsageError


def _bin(tmp_path: Path, *names: str) -> str:
    where = tmp_path / "bin"
    where.mkdir()
    for name in names:
        program = where / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    return str(where)


def test_linux_needs_bubblewrap_and_socat_on_the_cli_s_path(tmp_path: Path) -> None:
    assert missing({"PATH": _bin(tmp_path, "bwrap", "socat")}, "linux") is None
    reason = missing({"PATH": str(tmp_path)}, "linux")
    assert reason is not None and "bubblewrap (bwrap) and socat (socat)" in reason
    assert "apt install bubblewrap socat" in reason


def test_one_missing_program_is_named_alone(tmp_path: Path) -> None:
    reason = missing({"PATH": _bin(tmp_path, "bwrap")}, "linux")
    assert reason is not None and "socat" in reason and "bubblewrap" not in reason


def test_macos_has_seatbelt_and_other_platforms_have_no_sandbox(tmp_path: Path) -> None:
    assert missing({"PATH": str(tmp_path)}, "darwin") is None
    reason = missing({"PATH": str(tmp_path)}, "win32")
    assert reason is not None and "Linux and macOS only" in reason


def test_the_cli_s_refusal_is_recognised_and_nothing_else() -> None:
    message = (
        "Claude Code returned an error result: Sandbox required but unavailable: sandbox is enabled but "
        "dependencies are missing: socat not installed · install missing tools (exit code: 1)"
    )
    assert refused(message) == (
        "Sandbox required but unavailable: sandbox is enabled but dependencies are missing: "
        "socat not installed"
    )
    assert refused("Claude Code returned an error result: No conversation found (exit code: 1)") is None


def test_a_session_without_temp_dir_gets_a_private_one_with_a_short_path() -> None:
    temp = session_temp(None)
    try:
        assert temp.box == temp.cli and temp.owned == (temp.box,)
        assert stat.S_IMODE(os.stat(temp.box).st_mode) == 0o700
        assert len(os.fsencode(os.path.join(temp.cli, f"claude-{os.getuid()}"))) <= CLI_TEMP_LIMIT
    finally:
        temp.remove()
    assert not os.path.exists(temp.box)
    temp.remove()  # idempotent


def test_a_given_temp_dir_is_used_and_made_but_never_removed(tmp_path: Path) -> None:
    short = Path("/tmp") / f"w27c-{os.getpid()}"
    try:
        temp = session_temp(short)
        assert temp.box == temp.cli == str(short.resolve()) and temp.owned == ()
        assert short.is_dir()
        temp.remove()
        assert short.is_dir()  # the caller's, not ours
    finally:
        short.rmdir()


def test_a_long_temp_dir_stays_the_box_and_the_cli_gets_a_short_private_one(tmp_path: Path) -> None:
    long = tmp_path / ("t" * 60)
    temp = session_temp(long)
    try:
        assert temp.box == str(long.resolve()) and temp.cli != temp.box and temp.owned == (temp.cli,)
        assert temp.roots == (temp.box, temp.cli)
        assert len(os.fsencode(os.path.join(temp.cli, f"claude-{os.getuid()}"))) <= CLI_TEMP_LIMIT
    finally:
        temp.remove()
    assert long.is_dir() and not os.path.exists(temp.cli)


def test_a_temp_dir_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match=r"Spec\.temp_dir"):
        session_temp(blocker / "sub")
    with pytest.raises(UsageError, match="not a directory"):
        session_temp(blocker)
