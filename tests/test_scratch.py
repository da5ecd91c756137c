"""Sessions' private scratch directories in the temporary directory: a forced exit (second Ctrl-C:
``os._exit``; kill -9) leaves them, private; the next process that makes one removes them."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent_fleet import _scratch
from agent_fleet._scratch import make_scratch, state_dir, sweep

_MAKE = """
import os, sys
from agent_fleet._scratch import make_scratch
from agent_fleet.codex._box import make_box
made = [make_scratch("agent-fleet-tmp-"), make_scratch("afc-")]
box = make_box(sys.argv[1], None, None, ())  # a codex session's box: its tripwire and its own TMPDIR
made += [box.control, box.temp_dir]
print("\\n".join(made), flush=True)
if sys.argv[2] == "wait":
    sys.stdin.read()
os._exit(0)  # as a second Ctrl-C ends the process: nothing is cleaned up
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(_scratch, "_swept_in", None)
    return state_dir()


def _made(work: Path, how: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAKE, str(work), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    made = [proc.stdout.readline().strip() for _ in range(4)]
    return proc, made


def test_what_a_forced_exit_left_is_removed_by_the_next_start(state: Path, tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    proc, made = _made(work, "exit")
    assert proc.wait(10) == 0
    for path in made:  # left behind, but private
        assert os.path.isdir(path) and stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
    mine = make_scratch("agent-fleet-tmp-")  # the next start
    try:
        assert [p for p in made if os.path.exists(p)] == []
        assert os.path.isdir(mine)
        assert [e.name for e in os.scandir(state / "scratch")] == [_record_name()]
    finally:
        os.rmdir(mine)


def _record_name() -> str:
    return f"{os.getpid()}-{_scratch._start_time(os.getpid())}"


def test_a_running_process_keeps_its_directories(state: Path, tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    proc, made = _made(work, "wait")
    try:
        assert sweep() == []
        assert all(os.path.isdir(p) for p in made)
    finally:
        proc.send_signal(signal.SIGKILL)  # kill -9: the same as a forced exit
        proc.wait(10)
    assert sorted(sweep()) == sorted(made)
    assert not any(os.path.exists(p) for p in made)


def test_only_what_a_record_names_and_make_scratch_could_have_made_is_removed(
    state: Path, tmp_path: Path
) -> None:
    keep = tmp_path / "precious"  # a name make_scratch never gives
    keep.mkdir()
    target = tmp_path / "agent-fleet-tmp-target"
    target.mkdir()
    link = tmp_path / "agent-fleet-tmp-link"
    link.symlink_to(target)
    records = state / "scratch"
    records.mkdir(parents=True)
    # a record of a process long gone (pid 1 with another start time is not it)
    (records / "1-0").write_text(f"{keep}\n{link}\nrelative/agent-fleet-tmp-x\n/\n")
    assert sweep() == []
    assert keep.is_dir() and link.is_symlink() and target.is_dir()
    assert not (records / "1-0").exists()


def test_a_prefix_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix"):
        make_scratch("tmp-")
