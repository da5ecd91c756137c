"""The session's box (``codex._box``): its sandbox settings, its temporary directory, and the tripwire
that lets a command run outside codex's sandbox only with a grant (an accepted escalation)."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex._box import Box, bash_script, make_box
from agent_fleet.codex.translate import ENV_SET_KEY, plan_spawn


@pytest.mark.parametrize(
    ("command", "script"),
    [
        ("/bin/bash -c 'touch x'", "touch x"),
        ("/bin/bash -lc 'git add -A && git commit -m \"x y\"'", 'git add -A && git commit -m "x y"'),
        (["/usr/bin/bash", "-c", "ls"], "ls"),
        ("bash -lc ls", "ls"),
        ("/usr/bin/sh -c 'ls'", None),  # dash reads no BASH_ENV: not covered
        ("/bin/zsh -lc 'ls'", None),
        ("/bin/bash --posix -c ls", None),
        ("/bin/bash -c", None),
        ("ls", None),
        ("'unbalanced", None),
        (None, None),
        (42, None),
    ],
)
def test_bash_script_is_the_script_bash_runs(command: object, script: str | None) -> None:
    assert bash_script(command) == script


def test_a_session_without_a_temp_dir_gets_a_private_one_removed_with_it(tmp_path: Path) -> None:
    box = make_box(str(tmp_path), None, None, ())
    assert box.sandbox == "workspace-write" and box.sandboxed
    assert box.temp_dir is not None and box.roots[0] == box.temp_dir
    assert stat.S_IMODE(os.stat(box.temp_dir).st_mode) == 0o700
    assert box.control is not None and not box.control.startswith(str(tmp_path))
    made = (box.temp_dir, box.control)
    box.close()
    box.close()  # idempotent
    assert not any(os.path.exists(path) for path in made)


def test_a_given_temp_dir_is_made_if_missing_and_kept(tmp_path: Path) -> None:
    wanted = tmp_path / "task" / "tmp"
    box = make_box(str(tmp_path / "ws"), "read-only", wanted, (str(tmp_path / "cache"),))
    assert box.roots == (str(wanted), str(tmp_path / "cache"))
    box.close()
    assert wanted.is_dir()


def test_danger_full_access_has_no_box_to_guard(tmp_path: Path) -> None:
    box = make_box(str(tmp_path), "danger-full-access", None, ())
    assert not box.sandboxed and box.control is None
    assert not box.covers("/bin/bash -c ls") and not box.grant("/bin/bash -c ls")
    config, env = box.thread_config({"x": 1}, {"A": "b"})
    assert config == {"x": 1} and env == {"A": "b"}
    box.close()


def test_the_tripwire_is_never_inside_the_box(tmp_path: Path) -> None:
    # a workspace that contains the temporary directories: the tripwire moves out of the agent's reach
    box = make_box(tempfile.gettempdir(), None, None, ())
    try:
        assert box.control is None or not box.control.startswith(tempfile.gettempdir().rstrip("/") + "/")
        assert box.covers("/bin/bash -c ls") is (box.control is not None)
    finally:
        box.close()


def test_the_thread_config_carries_the_box(tmp_path: Path) -> None:
    box = make_box(str(tmp_path / "ws"), None, tmp_path / "t", (str(tmp_path / "cache"),))
    try:
        spec = Spec(
            prompt="p",
            config={
                "sandbox_workspace_write": {
                    "writable_roots": [str(tmp_path / "cache")],
                    "network_access": True,
                },
                "sandbox_workspace_write.exclude_slash_tmp": False,  # the box wins
            },
            env={"TMPDIR": "/elsewhere", "CI": "1"},
        )
        plan = plan_spawn(spec, None, box)
        config = plan.thread_params["config"]
        assert plan.thread_params["sandbox"] == "workspace-write"
        assert config["sandbox_workspace_write"] == {
            "writable_roots": [str(tmp_path / "t"), str(tmp_path / "cache")],
            "network_access": True,
            "exclude_slash_tmp": True,
            "exclude_tmpdir_env_var": True,
        }
        assert not any(key.startswith("sandbox_workspace_write.") for key in config)
        assert config[ENV_SET_KEY] == {"TMPDIR": str(tmp_path / "t"), "CI": "1", "BASH_ENV": box.tripwire}
        assert "temp_dir" not in [u.field for u in plan.untranslated]
    finally:
        box.close()


def test_an_unset_sandbox_is_workspace_write() -> None:
    assert plan_spawn(Spec(prompt="p")).thread_params["sandbox"] == "workspace-write"
    assert plan_spawn(Spec(prompt="p", sandbox="read-only")).thread_params["sandbox"] == "read-only"


def test_refusals_are_reported_once(tmp_path: Path) -> None:
    box = make_box(str(tmp_path), None, None, ())
    try:
        assert box.control is not None
        Path(box.control, "refused", "123").write_text("./escape.sh\n")
        assert box.refused() == ["./escape.sh"]
        assert box.refused() == []
    finally:
        box.close()


# -- the tripwire itself, under bash, inside and outside a (bubblewrap) read-only view ----------------


def _bash(box: Box, script: str, *, sandboxed: bool, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert box.tripwire is not None
    argv = ["bash", "-c", script]
    if sandboxed:  # what codex's sandbox does to the tripwire's directory: the whole tree is read-only
        view = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(cwd), str(cwd)]
        argv = ["bwrap", *view, *argv]
    env = {"PATH": os.environ["PATH"], "BASH_ENV": box.tripwire, "HOME": str(cwd)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.e2e  # runs bash and bubblewrap
def test_the_tripwire_lets_sandboxed_runs_and_granted_escalations_through(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    box = make_box(str(work), None, None, ())
    try:
        script = "echo ran > out.txt; bash -c 'echo nested >> out.txt'"
        # inside the sandbox: runs (and a nested bash too)
        done = _bash(box, script, sandboxed=True, cwd=work)
        assert done.returncode == 0, done.stderr
        assert (work / "out.txt").read_text() == "ran\nnested\n"
        # outside the sandbox without a grant (codex's silent retry): refused, nothing runs, reported
        (work / "out.txt").unlink()
        done = _bash(box, script, sandboxed=False, cwd=work)
        assert done.returncode == 1 and "refused to run this command outside the sandbox" in done.stderr
        assert not (work / "out.txt").exists()
        assert box.refused() == [script]
        # a grant is for exactly that script, once
        assert box.grant(f"/bin/bash -lc {script!r}")
        assert _bash(box, script + " ", sandboxed=False, cwd=work).returncode == 1
        done = _bash(box, script, sandboxed=False, cwd=work)
        assert done.returncode == 0, done.stderr
        assert (work / "out.txt").read_text() == "ran\nnested\n"
        assert _bash(box, script, sandboxed=False, cwd=work).returncode == 1  # used up
    finally:
        box.close()


@pytest.mark.e2e  # runs bash
def test_what_a_login_profile_runs_before_the_tripwire_is_not_judged_by_it(tmp_path: Path) -> None:
    """``bash -lc`` reads the user's profile first; the shells it starts are the user's, not codex's."""
    work = tmp_path / "ws"
    work.mkdir()
    (work / ".profile").write_text("PROFILE_SAW=$(bash -c 'echo from-profile')\nexport PROFILE_SAW\n")
    box = make_box(str(work), None, None, ())
    try:
        assert box.tripwire is not None
        env = {"PATH": os.environ["PATH"], "BASH_ENV": box.tripwire, "HOME": str(work)}

        def login(script: str) -> subprocess.CompletedProcess[str]:
            argv = ["bash", "-lc", script]
            return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=30)

        script = 'echo "$PROFILE_SAW" > out.txt'
        refused = login(script)  # codex's silent retry: the profile ran, the command did not
        assert refused.returncode == 1 and not (work / "out.txt").exists(), refused.stderr
        assert box.refused() == [script]
        assert box.grant(["/bin/bash", "-lc", script])
        granted = login(script)
        assert granted.returncode == 0, granted.stderr
        assert (work / "out.txt").read_text() == "from-profile\n"
    finally:
        box.close()
