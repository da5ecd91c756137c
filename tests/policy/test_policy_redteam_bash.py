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

import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.policy import UnparsableCommand, evaluate_command, parse_command
from agent_fleet.policy.bash._unwrap import expand_braces

from ._replay import make_sandbox, matches, replay
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


def _plain(argv: tuple[str, ...], home: str, work: str) -> tuple[str, ...]:
    """What bash ran, with the scratch home and work directories written as ``~`` and the workspace."""
    out: list[str] = []
    for arg in argv:
        for prefix, shown in ((home, "~"), (work, WORKSPACE)):
            if arg == prefix or arg.startswith(prefix + "/"):
                arg = shown + arg[len(prefix) :]
        out.append(arg)
    return tuple(out)


def _same(parsed: str, ran: str) -> bool:
    if parsed == ran:
        return True
    for form in (parsed, parsed.replace("~/", WORKSPACE.rsplit("/", 1)[0] + "/")):
        if ran.startswith("/") and os.path.normpath(os.path.join(WORKSPACE, form)) == ran:
            return True
    return ran == os.path.normpath(parsed) or (parsed.startswith("~") and ran.startswith("~"))


def _parsed(command: str) -> set[tuple[tuple[str, ...], bool]]:
    found: set[tuple[tuple[str, ...], bool]] = set()
    for cmd in parse_command(command):
        more = "xargs" in cmd.wrappers
        found.add((cmd.argv, more))
        found.add((cmd.written, more))  # a wrapper that is a fake here (`uv run`) records its own argv
        expanded: list[str] = []
        for word in cmd.argv:
            expanded.extend(expand_braces(word) if "{" in word and "," in word else [word])
        found.add((tuple(expanded), more))
    return found


#: Rules that decline because what would run cannot be seen: the parse is not expected to show it.
UNSEEN_BY_DESIGN = frozenset({"decoder-to-shell", "download-to-shell", "opaque-code", "dynamic-command"})


def _check(command: str, ran: list[tuple[str, ...]]) -> list[str]:
    """Argvs bash ran that the policy's parse did not report."""
    try:
        parsed = _parsed(command)
    except UnparsableCommand:
        return []  # declined as unparsable: nothing it runs is accepted
    if evaluate_command(command, cwd=WORKSPACE).rule in UNSEEN_BY_DESIGN:
        return []
    ran = [tuple(w for w in argv if w != "-") for argv in ran]  # the parse drops a `-` before `<<EOF`
    parsed = {(tuple(w for w in p if w != "-"), more) for p, more in parsed}
    return [shlex.join(a) for a in ran if not any(matches(p, a, more, _same) for p, more in parsed)]


#: Builtins (and programs) whose output is data: the environment, variables.
_DATA_BUILTINS = frozenset({"declare", "typeset", "export", "set", "compgen", "alias", "read"})
_DATA_BUILTINS |= {"env", "printenv"}


def _needs_data(command: str) -> bool:
    """Does the danger ride on data a fake cannot give (a download piped into a shell, a secret read
    into a request, an environment variable)? Then the plain argvs alone do not carry it."""
    try:
        commands = parse_command(command)
    except UnparsableCommand:
        return True
    if re.search(r"\b(export|declare|typeset)\s+(-\w+\s+)*\w+=", command) or re.search(r"\w=\$\(", command):
        return True  # an environment variable, or a variable holding what a (fake) program printed
    sources = set(FAKES) | _DATA_BUILTINS
    return any(
        set(cmd.feeders) & sources
        or set(cmd.substituted) & sources
        or (cmd.substituted and cmd.program in ("curl", "wget", "nc", "ncat", "socat", "ssh", "scp"))
        or cmd.env
        or cmd.program in _DATA_BUILTINS
        for cmd in commands
    )


def test_enough_entries_are_replayed() -> None:
    dangerous = [c for cs in DANGEROUS.values() for c in cs if _replayable(c)]
    assert len(dangerous) >= 250
    assert len([c for c in EVERYDAY if _replayable(c)]) >= 150


def test_dangerous_entries_run_what_the_policy_sees(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    unseen: list[str] = []
    plain_passed: list[str] = []
    judged = 0
    every = [*DANGEROUS.values(), *HOLDOUT.values()]
    for i, command in enumerate(c for cs in every for c in cs if _replayable(c)):
        ran = [_plain(argv, home, work) for argv in replay(command, sandbox, f"d{i}")]
        if not ran:
            continue
        unseen += [f"{command!r}: bash ran {a}" for a in _check(command, ran)]
        if ">" in command or re.search(r"(^|[\s;&|])\./", command) or "<<" in command:
            continue  # restricted bash refused the part that does the harm
        if _needs_data(command):
            continue
        judged += 1
        plain = "; ".join(shlex.join(argv) for argv in ran)
        if evaluate_command(plain, cwd=WORKSPACE).action != "decline":
            plain_passed.append(f"{command!r} ran {plain!r}")
    assert not unseen, "\n".join(unseen)
    assert not plain_passed, "\n".join(plain_passed)
    assert judged >= 200


def test_everyday_entries_run_only_harmless_commands(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    unseen: list[str] = []
    declined: list[str] = []
    replayed = 0
    for i, command in enumerate(c for c in EVERYDAY if _replayable(c)):
        ran = [_plain(argv, home, work) for argv in replay(command, sandbox, f"e{i}")]
        replayed += bool(ran)
        unseen += [f"{command!r}: bash ran {a}" for a in _check(command, ran)]
        for argv in ran:
            decision = evaluate_command(shlex.join(argv), cwd=WORKSPACE)
            if decision.action != "allow_for_session":
                declined.append(f"{command!r} ran {shlex.join(argv)!r}: {decision.rule}")
    assert not unseen, "\n".join(unseen)
    assert not declined, "\n".join(declined)
    assert replayed >= 120
