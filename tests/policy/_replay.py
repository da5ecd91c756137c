"""Replaying commands under real bash with recording fakes: the kit the corpus tests share.

A sandbox is a scratch directory with ``bin/`` (a recording fake per program name, symlinks to a few
harmless real tools, shell wrappers that stay restricted), ``home/`` and ``work/``. ``replay`` runs a
command in ``bash -r`` there (as ``nobody`` when we are root) and returns the argvs the fakes recorded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

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
