"""Listening sockets of processes, from /proc (no psutil): for the "nothing listens beyond loopback" tests."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from .procs import descendants

__all__ = ["Connection", "Listener", "LoopbackWatch", "connections", "descendants", "listening"]


@dataclass(frozen=True, slots=True)
class Listener:
    pid: int
    program: str
    proto: str  # tcp, tcp6, udp, udp6
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        addr = ipaddress.ip_address(self.host)
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return addr.is_loopback


def _address(hexaddr: str) -> tuple[str, int]:
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four host-order 32-bit words
        host = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return host, int(port, 16)


def _program(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "?"


@dataclass(frozen=True, slots=True)
class Connection:
    """A TCP connection (or one being made) held by ``pid``, to ``host``:``port``."""

    pid: int
    program: str
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return Listener(self.pid, self.program, "tcp", self.host, self.port).loopback


def connections(pids: Iterable[int]) -> list[Connection]:
    """TCP sockets of ``pids`` that are connected or connecting (not listening), by remote address."""
    inodes = _socket_inodes(pids)
    found = []
    for proto in ("tcp", "tcp6"):
        try:
            with open(f"/proc/net/{proto}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if inode in inodes and state != "0A":
                host, port = _address(remote)
                if port:
                    found.append(Connection(inodes[inode], _program(inodes[inode]), host, port))
    return found


def _socket_inodes(pids: Iterable[int]) -> dict[str, int]:
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[link[8:-1]] = pid
    return inodes


def listening(pids: Iterable[int]) -> list[Listener]:
    """TCP sockets in LISTEN state and bound UDP sockets held by ``pids``."""
    inodes = _socket_inodes(pids)
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/net/{proto}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode in inodes and (state == "0A" or proto.startswith("udp")):
                host, port = _address(local)
                found.append(Listener(inodes[inode], _program(inodes[inode]), proto, host, port))
    return found


def _agents_own_udp(item: Listener | Connection) -> bool:
    """A UDP socket on an ephemeral port held by the codex binary or a program it started (its
    resolver's lookups: seen in CI from codex itself and from a ``git-remote-https`` under it): the
    agent binary's own behaviour, not the wiring these watches are about (the cluster's, the daemon's,
    agent-fleet's own)."""
    return (
        isinstance(item, Listener)
        and item.proto.startswith("udp")
        and item.port >= 32768
        # the program as sampled first: the process may be gone by now (a lookup is short-lived)
        and (item.program.rsplit("/", 1)[-1] == "codex" or _under_codex(item.pid))
    )


def _under_codex(pid: int) -> bool:
    for _ in range(32):  # up the parent chain, to init at most
        if _program(pid).rsplit("/", 1)[-1] == "codex":
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


class LoopbackWatch:
    """Every socket of a process tree, sampled in a thread while a block runs: what listened or
    connected anywhere but loopback (``off_loopback``). ``with LoopbackWatch(os.getpid()) as watch:``;
    a sample costs a scan of /proc, so ``period`` stays around half a second."""

    def __init__(self, root: int, period: float = 0.5) -> None:
        self.root, self.period = root, period
        self.samples = 0
        self.seen: set[tuple[int, str, int]] = set()  # (pid, host, port) of every socket seen
        self.off_loopback: dict[tuple[int, str, int], Listener | Connection] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopback-watch", daemon=True)

    def sample(self) -> None:
        pids = descendants(self.root)
        for item in [*listening(pids), *connections(pids)]:
            key = (item.pid, item.host, item.port)
            self.seen.add(key)
            if not item.loopback and not _agents_own_udp(item):
                self.off_loopback.setdefault(key, item)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def __enter__(self) -> LoopbackWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()  # and once more at the end
