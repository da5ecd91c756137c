"""The red-team corpus replayed under real bash with recording fakes, as ``test_policy_bash`` does for
the adversarial one: no entry is dangerous (or harmless) only on paper.

Each entry safe to replay runs in ``bash -r`` (restricted: no ``/`` in command names, no output
redirections, no ``cd``) with ``PATH`` holding recording fakes of every program the corpus names and a
few harmless real tools, in a scratch directory with a scratch ``HOME``, as ``nobody`` when we are root.
Then:

* every argv bash ran is one the policy's parse reports (a word the policy could not resolve stands
  for any words), so the rules judge what bash runs, not what the text looks like;
* for a dangerous entry, what bash ran, written out plainly as one script of literal argvs, is
  declined too: the danger is in what runs, not in the spelling. Entries whose danger needs what
  restricted bash refuses (an output redirection, ``./x``) record only their harmless part and are
  checked for the first point alone;
* for an everyday entry, every argv bash ran, judged alone, is accepted.

Never replayed: absolute or constructed program paths, loops, signals, background jobs, devices and
endless sources (``/dev/...``, ``yes``, ``seq``), ``command -p`` (the default PATH), builtins that act
on the real machine.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.policy import evaluate_command

from ._replay import make_sandbox, needs_data, plain, replay, unseen
from .redteam import DANGEROUS, EVERYDAY, HOLDOUT, WORKSPACE

_NAMES = """
    rm rmdir shred srm wipe trash-put git chmod chown chgrp dd mkfs shutdown reboot halt poweroff
    systemctl service iptables ip6tables nft ufw tc ip hostname sysctl mount umount pkill killall curl
    wget nc ncat socat scp ssh ssh-copy-id sshd python3 python perl node ruby php lua tclsh julia pwsh
    osascript Rscript deno bun crontab at batch mv cp install ln link truncate touch sed gawk awk tar
    unzip 7z cpio split patch setcap sudo su doas pkexec machinectl npm npx pnpm yarn bunx uvx pipx pip
    pip3 uv go docker kubectl terraform tofu pulumi aws gcloud gsutil az helm vault gh heroku doctl fly
    apt-get apt dpkg yum dnf snap apk pacman cryptsetup vgremove pvremove make gmake ngrok cloudflared
    jupyter find fallocate head tail less vim grep rg jq sqlite3 psql redis-cli mkdir ls stat du env
    loginctl systemd-run usermod gpasswd security docker-credential-osxkeychain openssl bore tailscale
    gotty ttyd dockerd mkfifo xxd yes seq sleep ps pgrep pidof ruff mypy pytest tox nox black isort
    eslint prettier tsc cargo gofmt cmake ctest bazel mvn dotnet tee pylint flake8 pre-commit husky
    shasum lsof getent nproc getcap hostnamectl apt-cache http
""".split()  # noqa: SIM905 (a word list)
#: Programs that must really run for the corpus to mean anything (decoders, text tools, xargs).
REAL = ["env", "xargs", "nice", "nohup", "setsid", "stdbuf", "timeout", "cat", "base64", "rev", "tr"]
REAL += [
    "printf",
    "echo",
    "dirname",
    "basename",
    "mktemp",
    "realpath",
    "sort",
    "cut",
    "true",
    "false",
    "uniq",
]
FAKES = sorted(set(_NAMES) - set(REAL))
PASSTHROUGH = {"tee", "head", "tail", "grep", "jq", "sed", "awk", "gawk"}
UNSAFE = re.compile(
    r"/bin|/sbin|/usr|/lib|/proc|/sys|/dev|/etc|\\x2f|\\057|command -p|\bkill\b|\bexec\b|\benable\b"
    r"|\bbuiltin\b|while|until|for\s*\(\(|\bselect\b|&\s*$|&\s*[;)}]|& |\bulimit\b|\btrap\b|:\(\)|\(\)\s*\{"
    r"|\bsource\b|(^|[;&|]\s*)\.\s|PATH|BASH_ENV|\bhistory\b|\bsudo\b|\bsu\b|\bdoas\b|\bpkexec\b"
    r"|\bstrace\b|\bwatch\b|\bsystemd-run\b|\bwhich\b"
)


def _replayable(command: str) -> bool:
    return not UNSAFE.search(command)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Path]:
    root = make_sandbox(
        "policy-redteam-", FAKES, REAL, passthrough=PASSTHROUGH, shells=("bash", "sh", "zsh", "dash")
    )
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_enough_entries_are_replayed() -> None:
    dangerous = [c for cs in DANGEROUS.values() for c in cs if _replayable(c)]
    assert len(dangerous) >= 250
    assert len([c for c in EVERYDAY if _replayable(c)]) >= 150


@pytest.mark.e2e  # real bash replays the corpus (see the module docstring)
def test_dangerous_entries_run_what_the_policy_sees(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    missed: list[str] = []
    plain_passed: list[str] = []
    judged = 0
    every = [*DANGEROUS.values(), *HOLDOUT.values()]
    for i, command in enumerate(c for cs in every for c in cs if _replayable(c)):
        ran = [plain(argv, home, work, WORKSPACE) for argv in replay(command, sandbox, f"d{i}")]
        if not ran:
            continue
        missed += [f"{command!r}: bash ran {a}" for a in unseen(command, ran, WORKSPACE)]
        if ">" in command or re.search(r"(^|[\s;&|])\./", command) or "<<" in command:
            continue  # restricted bash refused the part that does the harm
        if needs_data(command, FAKES):
            continue
        judged += 1
        script = "; ".join(shlex.join(argv) for argv in ran)
        if evaluate_command(script, cwd=WORKSPACE).action != "decline":
            plain_passed.append(f"{command!r} ran {script!r}")
    assert not missed, "\n".join(missed)
    assert not plain_passed, "\n".join(plain_passed)
    assert judged >= 200


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
        for argv in ran:
            decision = evaluate_command(shlex.join(argv), cwd=WORKSPACE)
            if decision.action != "allow_for_session":
                declined.append(f"{command!r} ran {shlex.join(argv)!r}: {decision.rule}")
    assert not missed, "\n".join(missed)
    assert not declined, "\n".join(declined)
    assert replayed >= 120
