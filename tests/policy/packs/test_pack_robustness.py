"""The packs never raise out of the engine, whatever the words, and fail closed when they break."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet.policy import evaluate_command
from agent_fleet.policy.packs import _packs

PROGRAMS = [
    "psql", "mysql", "sqlite3", "mongosh", "redis-cli", "terraform", "kubectl", "docker", "aws", "gcloud",
    "gh", "npm", "pip", "curl", "wget", "nc", "socat", "ssh", "git", "python3", "perl", "dd", "yes",
    "crontab", "systemctl", "scp", "rsync", "ansible", "uv", "cypher-shell", "chmod", "http",
]  # fmt: skip
WORDS = st.one_of(
    st.sampled_from(
        ["-c", "-e", "-f", "--", "-X", "DELETE", "-T", "-F", "@x", "delete", "push", "-auto-approve"]
    ),
    st.text(max_size=12),
)


@settings(max_examples=examples(300), deadline=None)
@given(program=st.sampled_from(PROGRAMS), words=st.lists(WORDS, max_size=8))
def test_never_raises_on_argv(program: str, words: list[str]) -> None:
    decision = evaluate_command([program, *words], cwd="/nonexistent-ws/p")
    assert decision.action in ("allow_for_session", "decline")


def test_a_failing_judge_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object) -> str | None:
        raise ValueError("boom")

    monkeypatch.setitem(_packs.JUDGES, "sql", broken)
    decision = evaluate_command('psql -c "SELECT 1"', cwd="/nonexistent-ws/p")
    assert (decision.action, decision.rule) == ("decline", "database/sql-destructive")
    assert "failed" in (decision.reason or "")


def test_a_failing_pack_set_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(_packs.PackSet, "_check_script", broken)
    decision = evaluate_command("ls", cwd="/nonexistent-ws/p")
    assert (decision.action, decision.rule) == ("decline", "packs/internal-error")


def test_never_blocks_on_fifos_or_devices(tmp_path: Path) -> None:
    """Files named by a command (or a hostile repository's .git/config) are read only when regular."""
    fifo = tmp_path / "q.sql"
    os.mkfifo(fifo)
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".git" / "config")
    for command in (f"psql -f {fifo}", "psql -f /dev/stdin", f"cat {fifo} | psql", "pip install -r q.sql"):
        assert evaluate_command(command, cwd=str(tmp_path)).action == "allow_for_session"
    assert evaluate_command("pip install git+https://github.com/x/y", cwd=str(tmp_path)).action == "decline"
