"""The round-five corpus (``blindspots.py``) replayed under real bash with recording fakes, as
``test_policy_redteam_bash`` does for round three: no entry is dangerous (or harmless) only on paper.

Each entry safe to replay runs in ``bash -r`` (restricted: no ``/`` in command names, no output
redirections, no ``cd``) with ``PATH`` holding recording fakes of every program the corpus names and a
few harmless real tools, in a scratch directory with a scratch ``HOME``, as ``nobody`` when we are root
(bash then honours ``PS4`` and ``SHELLOPTS`` from the environment, as it would for an agent). Then:

* every argv bash ran is one the policy's parse reports (a word the policy could not resolve stands
  for any words): the rules judge what bash runs, not what the text looks like;
* for a dangerous entry, what bash ran, written out plainly as one script of literal argvs, is
  declined too, unless its danger needs what a fake cannot give (data a fake would have printed, a file
  it would have written, a program that never ran for want of either);
* for an everyday entry, every argv bash ran, judged alone, is accepted (unless it is harmless for what
  a real program would have printed, which a fake does not).

Never replayed: absolute program paths, loops that do not end, background jobs, devices, ``BASH_ENV``
and exported functions (restricted bash refuses to import them), programs that act on the real machine.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.policy import UnparsableCommand, evaluate_command, parse_command

from ._replay import make_sandbox, needs_data, plain, replay, unseen
from .blindspots import DANGEROUS, EVERYDAY, WORKSPACE

_NAMES = """
    rm shred truncate git chmod mkdir mv cp find ls tar zip rsync 7z 7za rclone aws gsutil gcloud az
    codex claude gemini qwen aider copilot cursor-agent amp droid npx jq sed awk python3 python node
    perl ruby ed ex dc m4 make vault op pass bw security doppler heroku gh curl nc mail sendmail
    kafka-topics kafka-topics.sh kafka-consumer-groups kafka-delete-records kafka-configs rabbitmqctl
    rabbitmqadmin parallel seq yes sleep fallocate df tail head grep wc ruff black pre-commit docker
    pip pytest touch
""".split()  # noqa: SIM905 (a word list)
REAL = ["env", "xargs", "cat", "base64", "printf", "echo", "sort", "cut", "true", "false", "tr"]
FAKES = sorted(set(_NAMES) - set(REAL))
PASSTHROUGH = {"tee", "head", "tail", "grep", "jq", "sed", "awk"}
UNSAFE = re.compile(
    r"/bin|/sbin|/usr|/lib|/proc|/sys|/dev|/etc|\\x2f|\\057|command -p|\bkill\b|\bexec\b|\benable\b"
    r"|\bbuiltin\b|while|until|for\s*\(\(|&\s*$|&\s*[;)}]|& |\(\)\s*\{|\bsource\b|PATH|BASH_ENV"
)


def _replayable(command: str) -> bool:
    return not UNSAFE.search(command)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Path]:
    root = make_sandbox("policy-blindspots-", FAKES, REAL, passthrough=PASSTHROUGH)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _plain_carries_it(command: str, ran: list[tuple[str, ...]]) -> bool:
    """Can the plain argvs carry the entry's danger? Not when it rides on data or effects a fake
    cannot give: printed data, a file written, or a program that never ran for want of them."""
    if ">" in command or "<<" in command or re.search(r"(^|[\s;&|])\./", command):
        return False  # restricted bash refused the part that does the harm, or it reads a document
    if needs_data(command, FAKES):
        return False
    try:
        parsed = parse_command(command)
    except UnparsableCommand:
        return False
    if any(cmd.implied for cmd in parsed):
        return False  # what runs comes from a file, a document or a program's input
    names = {argv[0] for argv in ran}
    return all(cmd.program in names for cmd in parsed if not cmd.carrier and cmd.program in FAKES)


def test_enough_entries_are_replayed() -> None:
    dangerous = [c for cs in DANGEROUS.values() for c in cs if _replayable(c)]
    assert len(dangerous) >= 150
    assert len([c for c in EVERYDAY if _replayable(c)]) >= 100


@pytest.mark.e2e  # real bash replays the corpus (see the module docstring)
def test_dangerous_entries_run_what_the_policy_sees(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    missed: list[str] = []
    plain_passed: list[str] = []
    judged = 0
    for i, command in enumerate(c for cs in DANGEROUS.values() for c in cs if _replayable(c)):
        ran = [plain(argv, home, work, WORKSPACE) for argv in replay(command, sandbox, f"d{i}")]
        if not ran:
            continue
        missed += [f"{command!r}: bash ran {a}" for a in unseen(command, ran, WORKSPACE)]
        if not _plain_carries_it(command, ran):
            continue
        judged += 1
        script = "; ".join(shlex.join(argv) for argv in ran)
        if evaluate_command(script, cwd=WORKSPACE).action != "decline":
            plain_passed.append(f"{command!r} ran {script!r}")
    assert not missed, "\n".join(missed)
    assert not plain_passed, "\n".join(plain_passed)
    assert judged >= 70


@pytest.mark.e2e  # real bash replays the corpus (see the module docstring)
def test_everyday_entries_run_only_harmless_commands(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    missed: list[str] = []
    declined: list[str] = []
    replayed = 0
    for i, command in enumerate(c for c in EVERYDAY if _replayable(c)):
        ran = [plain(argv, home, work, WORKSPACE) for argv in replay(command, sandbox, f"e{i}")]
        replayed += bool(ran)
        missed += [f"{command!r}: bash ran {a}" for a in unseen(command, ran, WORKSPACE)]
        if needs_data(command, FAKES):
            continue  # harmless for what a real program prints (`git rev-parse --show-toplevel`)
        for argv in ran:
            decision = evaluate_command(shlex.join(argv), cwd=WORKSPACE)
            if decision.action != "allow_for_session":
                declined.append(f"{command!r} ran {shlex.join(argv)!r}: {decision.rule}")
    assert not missed, "\n".join(missed)
    assert not declined, "\n".join(declined)
    assert replayed >= 80
