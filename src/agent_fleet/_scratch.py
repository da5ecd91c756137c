"""Private scratch directories of a process's sessions, and what a forced exit left of them.

Sessions make private directories (mode 0700) in the temporary directory (``$TMPDIR``, else ``/tmp``):
a codex session's box control directory (its tripwire and grants, ``agent-fleet-box-*``) and its own
temporary directory when ``Spec.temp_dir`` is unset (``agent-fleet-tmp-*``), the codex child's
``TMPDIR`` (``agent-fleet-codex-*``), a ``codex exec`` turn's files (``agent-fleet-exec-*``), a Claude
session's temporary directory (``afc-*``, short: its path holds the CLI's sockets). Each is removed
when its session (or provider) ends. A forced exit -- a second Ctrl-C, which ends the process at once,
or kill -9 -- leaves them behind: private, but not removed.

So ``make_scratch`` records each directory, before anyone uses it, in this process's record in the
fleet's state directory (``<state>/scratch/<pid>-<start time>``; the state directory is
``$XDG_STATE_HOME/agent-fleet``, else ``~/.local/state/agent-fleet``, mode 0700), and the first
scratch directory a later process makes first removes what processes that are gone left: only the
directories their records name (never a directory found by its name alone), and only ones of this
user with a name made here. A process still running (its pid alive with the same start time) keeps
its own. Recording is best effort: where the state directory cannot be made, the directory is still
made (and a forced exit then leaves it, private).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Final

__all__ = ["PREFIXES", "make_scratch", "state_dir", "sweep"]

#: The names ``make_scratch`` is called with: a recorded path is removed only when its name has one.
PREFIXES: Final = ("agent-fleet-", "afc-")

_lock = threading.Lock()
_swept_in: int | None = None  # the pid that swept (a forked child sweeps again)
_written = 0  # lines this process appended to its record since it was last compacted
_COMPACT_EVERY: Final = 1000  # then the record keeps only the directories still there (a daemon's)


def state_dir() -> Path:
    """The fleet's state directory on this machine (not created): ``$XDG_STATE_HOME/agent-fleet``, else
    ``~/.local/state/agent-fleet`` (a relative ``XDG_STATE_HOME`` is ignored, as the XDG spec says)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "agent-fleet"


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (Linux: clock ticks since boot, field 22 of ``/proc/<pid>/stat``);
    ``""`` where there is no ``/proc``; None when the process does not exist."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count after its last ")"
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def _record_dir() -> Path | None:
    """``<state>/scratch``, made private; None when it cannot be (recording is best effort)."""
    path = state_dir() / "scratch"
    try:
        for part in (path.parent, path):
            part.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.lstat(part)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                return None
            if stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(part, 0o700)
    except OSError:
        return None
    return path


def _removable(path: str) -> bool:
    """A recorded path this process may remove: absolute, named by ``make_scratch``, a directory of
    this user (not a link)."""
    if not os.path.isabs(path) or not os.path.basename(path).startswith(PREFIXES):
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def sweep(records: Path | None = None) -> list[str]:
    """Remove the scratch directories of processes that are gone (see the module docstring) and their
    records; returns the directories removed. Never raises."""
    records = records if records is not None else _record_dir()
    if records is None:
        return []
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(records):
            pid_text, _, start = entry.name.partition("-")
            if not pid_text.isdigit():
                continue
            now = _start_time(int(pid_text))
            if now is not None and (now == start or not now or not start):
                continue  # still running (or cannot tell): its directories are its own
            with contextlib.suppress(OSError):
                for line in Path(entry.path).read_text(encoding="utf-8").splitlines():
                    if _removable(line):
                        shutil.rmtree(line, ignore_errors=True)
                        removed.append(line)
                os.unlink(entry.path)
    return removed


def make_scratch(prefix: str, dir: str | None = None) -> str:
    """A new private directory (``tempfile.mkdtemp``: mode 0700) named ``prefix...`` in ``dir`` (default:
    the temporary directory), recorded so a later process removes it if this one is forced out before
    it does (see the module docstring). ``prefix`` must be one of ``PREFIXES``'s. Raises ``OSError``
    as ``mkdtemp`` does."""
    global _swept_in
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"scratch directory prefix {prefix!r} must start with one of {PREFIXES}")
    records = _record_dir()
    pid = os.getpid()
    with _lock:
        if _swept_in != pid:
            _swept_in = pid
            sweep(records)
    path = tempfile.mkdtemp(prefix=prefix, dir=dir)
    if records is not None:
        record = records / f"{pid}-{_start_time(pid) or ''}"
        with _lock:
            _append(record, os.path.realpath(path))
    return path


def _append(record: Path, path: str) -> None:
    """Add ``path`` to ``record``; now and then drop the paths removed since (called under ``_lock``)."""
    global _written
    with contextlib.suppress(OSError):
        if _written >= _COMPACT_EVERY:
            _written = 0
            kept = [line for line in record.read_text(encoding="utf-8").splitlines() if os.path.lexists(line)]
            partial = record.with_name(f".{record.name}.new")  # not a record: sweep skips it
            partial.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
            os.chmod(partial, 0o600)
            os.replace(partial, record)
        fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, path.encode() + b"\n")
        finally:
            os.close(fd)
        _written += 1
