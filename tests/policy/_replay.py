"""Replaying commands under real bash with recording fakes: the kit the corpus tests share.

A sandbox is a scratch directory with ``bin/`` (a recording fake per program name, symlinks to a few
harmless real tools, shell wrappers that stay restricted), ``home/`` and ``work/``. ``replay`` runs a
command in ``bash -r`` there (as ``nobody`` when we are root) and returns the argvs the fakes recorded.
``plain`` writes a recorded argv with the scratch directories shown as ``~`` and the workspace,
``unseen`` lists what bash ran that the policy's parse did not report, and ``needs_data`` tells an entry
whose danger rides on data a fake cannot give (so its plain argvs alone do not carry it).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from agent_fleet.policy import UnparsableCommand, evaluate_command, parse_command
from agent_fleet.policy.bash._unwrap import expand_braces

SEP = "\x1f"
END = "\x1e"  # records end here, not at a newline: arguments may hold newlines


def make_sandbox(
    prefix: str,
    fakes: Iterable[str],
    real: Iterable[str],
    *,
    passthrough: Iterable[str] = (),
    shells: Iterable[str] = ("bash", "sh"),
) -> Path:
    """A new sandbox (see the module docstring); ``passthrough`` fakes also copy stdin to stdout, as a
    filter in a pipeline would. The caller removes it (``shutil.rmtree``)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    fakebin = root / "bin"
    fakebin.mkdir()
    # One write per call: pipeline stages record at the same time.
    record = (
        f'line="${{0##*/}}"; for a in "$@"; do line="$line{SEP}$a"; done; printf "%s{END}" "$line" >> "$LOG"'
    )
    filters = set(passthrough)
    for name in fakes:
        fake = fakebin / name
        body = f"#!/bin/sh\n{record}\n"
        if name in filters:
            body += "exec /bin/cat\n"  # pass the text on, touch no file
        fake.write_text(body)
        fake.chmod(0o755)
    for name in real:
        found = shutil.which(name)
        assert found is not None, f"{name} is needed to replay cases"
        (fakebin / name).symlink_to(found)
    for shell in shells:
        wrapper = fakebin / shell
        wrapper.write_text('#!/bin/bash\nexec /bin/bash -r "$@"\n')
        wrapper.chmod(0o755)
    for sub in ("home", "work"):
        (root / sub).mkdir()
    for path in (root, root / "home", root / "work"):
        path.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)
    return root


def replay(command: str, root: Path, name: str) -> list[tuple[str, ...]]:
    """The argvs (at most 100) the fakes recorded while restricted bash ran ``command`` in ``root``."""
    log = root / f"{name}.log"
    log.touch()
    log.chmod(0o666)
    env = {"PATH": str(root / "bin"), "HOME": str(root / "home"), "LOG": str(log), "TMPDIR": str(root)}
    argv = ["/bin/bash", "-r", "-c", command]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv is needed to replay cases as nobody"
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    with contextlib.suppress(subprocess.TimeoutExpired):  # what ran before the deadline still ran
        subprocess.run(
            argv, cwd=root / "work", env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=10
        )
    return [tuple(line.split(SEP)) for line in log.read_text().split(END)[:100] if line]


def matches(
    parsed: tuple[str, ...], ran: tuple[str, ...], more: bool, same: Callable[[str, str], bool]
) -> bool:
    """Does what bash ran fit what the policy parsed? A word the policy could not resolve (it still holds
    ``$`` or a backtick, and is judged as unknown), a fresh ``mktemp`` name or a glob stands for any
    number of words; under ``xargs`` (``more``) more words may follow (they come from standard input).
    ``same`` compares two known words."""
    if not parsed:
        return more or not ran
    head, rest = parsed[0], parsed[1:]
    if "$" in head or "`" in head or "XXXXXXXXXX" in head or re.search(r"[*?\[]", head):
        return any(matches(rest, ran[i:], more, same) for i in range(len(ran) + 1))
    return bool(ran) and same(head, ran[0]) and matches(rest, ran[1:], more, same)


def plain(argv: tuple[str, ...], home: str, work: str, workspace: str) -> tuple[str, ...]:
    """What bash ran, with the scratch home and work directories written as ``~`` and the workspace."""
    out: list[str] = []
    for arg in argv:
        for prefix, shown in ((home, "~"), (work, workspace)):
            if arg == prefix or arg.startswith(prefix + "/"):
                arg = shown + arg[len(prefix) :]
        out.append(arg)
    return tuple(out)


def _same(parsed: str, ran: str, workspace: str) -> bool:
    if parsed == ran:
        return True
    for form in (parsed, parsed.replace("~/", workspace.rsplit("/", 1)[0] + "/")):
        if ran.startswith("/") and os.path.normpath(os.path.join(workspace, form)) == ran:
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


def unseen(command: str, ran: list[tuple[str, ...]], workspace: str) -> list[str]:
    """Argvs bash ran that the policy's parse did not report."""
    try:
        parsed = _parsed(command)
    except UnparsableCommand:
        return []  # declined as unparsable: nothing it runs is accepted
    if evaluate_command(command, cwd=workspace).rule in UNSEEN_BY_DESIGN:
        return []
    ran = [tuple(w for w in argv if w != "-") for argv in ran]  # the parse drops a `-` before `<<EOF`
    parsed = {(tuple(w for w in p if w != "-"), more) for p, more in parsed}
    return [
        shlex.join(a)
        for a in ran
        if not any(matches(p, a, more, lambda x, y: _same(x, y, workspace)) for p, more in parsed)
    ]


#: Builtins (and programs) whose output is data: the environment, variables.
DATA_BUILTINS = frozenset({"declare", "typeset", "export", "set", "compgen", "alias", "read"})
DATA_BUILTINS |= {"env", "printenv"}


def needs_data(command: str, fakes: Collection[str]) -> bool:
    """Does the danger ride on data a fake cannot give (a download piped into a shell, a secret read
    into a request, an environment variable)? Then the plain argvs alone do not carry it."""
    try:
        commands = parse_command(command)
    except UnparsableCommand:
        return True
    if re.search(r"\b(export|declare|typeset)\s+(-\w+\s+)*\w+=", command) or re.search(r"\w=\$\(", command):
        return True  # an environment variable, or a variable holding what a (fake) program printed
    sources = set(fakes) | DATA_BUILTINS
    return any(
        set(cmd.feeders) & sources
        or set(cmd.substituted) & sources
        or (cmd.substituted and cmd.program in ("curl", "wget", "nc", "ncat", "socat", "ssh", "scp"))
        or cmd.env
        or cmd.program in DATA_BUILTINS
        for cmd in commands
    )
