"""A full disk under ``--out`` (issue 29 item 7): the batch stops with the documented exit code (75:
stopped, resumable) and a message naming the file that could not be written; the ledger stays true, no
temporary file is left, and once there is room ``--resume`` finishes the batch.

The disk is a small tmpfs mounted on ``--out`` in a mount namespace of the batch's own (``unshare``), so
nothing outside the test ever sees it; what the batch left is copied out before the namespace ends.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"
TASKS = 12

# mount a tmpfs of $1 bytes on $2, copy $3 into it, run the rest, copy $2 back to $3, exit as the run did
_ON_A_SMALL_DISK = """
set -u
size=$1 out=$2 keep=$3; shift 3
mount -t tmpfs -o size="$size" tmpfs "$out" || exit 90
cp -a "$keep"/. "$out"/ || exit 91
"$@"; code=$?
rm -rf "$keep" && mkdir "$keep" && cp -a "$out"/. "$keep"/ || exit 92
exit $code
"""


def _on_a_small_disk(
    size: int, out: Path, keep: Path, argv: list[str], env: dict[str, str]
) -> tuple[int, str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed to give the batch a small disk of its own")
    namespace = ["--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        namespace = ["--user", "--map-root-user", *namespace]
    done = subprocess.run(
        [unshare, *namespace, "sh", "-c", _ON_A_SMALL_DISK, "sh", str(size), str(out), str(keep), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode not in (90, 91, 92), done.stderr
    return done.returncode, done.stdout + done.stderr


def test_a_full_out_stops_the_batch_resumable_naming_the_file_then_resume_finishes_it(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("x" * 30_000)  # a big record per task
    work = tmp_path / "work"
    work.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": f"t{n:02d}", "prompt": f"task {n}"}) + "\n" for n in range(TASKS))
    )
    out, keep = tmp_path / "out", tmp_path / "kept"
    out.mkdir()
    keep.mkdir()
    env = codex_env.full_env()
    batch = [str(SCRIPT), "batch", str(tasks), "--out", str(out), "-j", "2", "--cwd", str(work)]

    code, output = _on_a_small_disk(640 * 1024, out, keep, [*batch, *codex_env.codex_args()], env)

    assert code == 75, output
    last = output.strip().splitlines()[-1]
    assert "cannot write" in last and str(out) in last and "stopped, resumable" in last, output
    assert "No space left on device" in last or "disk is full" in last, last
    assert "Traceback" not in output and "internal error" not in output
    assert not list(keep.glob(".*.tmp")), "no temporary file left behind"
    db = sqlite3.connect(keep / "batch.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = db.execute("SELECT id, state, status, result FROM tasks ORDER BY position").fetchall()
    finally:
        db.close()
    states = [state for _, state, _, _ in rows]
    assert "queued" in states and "finished" in states, (states, output.replace("x" * 100, ""))
    for task_id, state, status, result in rows:
        if state == "finished":  # what the ledger says finished is finished, with its record
            assert status == "succeeded" and json.loads(result)["task_id"] == task_id
    if (keep / "summary.json").exists():  # written when there was room for it: then it is whole
        summary = json.loads((keep / "summary.json").read_text())
        assert summary["stopped"] and summary["fatal"] is False

    # room again (a bigger disk, holding what the batch left): --resume finishes the batch
    code, output = _on_a_small_disk(
        64 * 1024 * 1024,
        out,
        keep,
        [str(SCRIPT), "batch", "--resume", str(out), *codex_env.codex_args()],
        env,
    )
    assert code == 0, output
    summary = json.loads((keep / "summary.json").read_text())
    assert summary["counts"] == {"succeeded": TASKS} and summary["stopped"] is None
