"""What is running, read from /proc: the one scan the process-lifetime tests share (Linux only)."""

from __future__ import annotations

import os


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def descendants(root: int) -> list[int]:
    """``root`` first, then every process below it (by parent PID)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat_fields(name)) is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def sleepers(marker: str) -> list[int]:
    """Live (not zombie) ``sleep`` processes whose argument contains ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[0].endswith(b"sleep") and marker.encode() in argv[1] and alive(int(name)):
            found.append(int(name))
    return found
