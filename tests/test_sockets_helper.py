"""The /proc socket lister used by the loopback tests sees what it must (so those tests can fail)."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time

from .sockets import Listener, LoopbackWatch, _agents_own_udp, descendants, listening


def test_it_finds_a_socket_bound_to_every_interface_and_one_on_loopback() -> None:
    wide, local = socket.socket(), socket.socket(socket.AF_INET6)
    try:
        wide.bind(("0.0.0.0", 0))
        wide.listen()
        local.bind(("::1", 0))
        local.listen()
        found = {(item.host, item.port): item for item in listening(descendants(os.getpid()))}
        assert not found[("0.0.0.0", wide.getsockname()[1])].loopback
        assert found[("::1", local.getsockname()[1])].loopback
    finally:
        wide.close()
        local.close()


def test_the_watch_reports_a_child_that_listens_or_connects_beyond_loopback() -> None:
    # A child binds every interface and aims a UDP socket off the machine (``connect`` on UDP sends no
    # packet): both are reported, by process; its loopback socket is seen and not reported.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\n"
            "wide = socket.socket(); wide.bind(('0.0.0.0', 0)); wide.listen()\n"
            "out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); out.connect(('192.0.2.1', 9))\n"
            "near = socket.socket(); near.bind(('127.0.0.1', 0)); near.listen()\n"
            "print(wide.getsockname()[1], near.getsockname()[1], flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        wide, near = map(int, child.stdout.readline().split())
        with LoopbackWatch(os.getpid(), period=0.05) as watch:
            while watch.samples < 2:
                time.sleep(0.01)
    finally:
        child.kill()
        child.wait()
    assert (child.pid, "0.0.0.0", wide) in watch.off_loopback and len(watch.off_loopback) == 2
    assert (child.pid, "127.0.0.1", near) in watch.seen
    assert all(key[0] == child.pid for key in watch.off_loopback), watch.off_loopback


def test_a_resolver_socket_of_codex_is_its_own_even_once_the_process_is_gone() -> None:
    gone = 2**22 + 7  # above pid_max's default: no such process
    own = Listener(pid=gone, program="/venv/bin/codex", proto="udp", host="0.0.0.0", port=43244)
    assert _agents_own_udp(own)
    assert not _agents_own_udp(dataclasses.replace(own, program="/usr/bin/python3"))
    assert not _agents_own_udp(dataclasses.replace(own, port=5353))  # a fixed port is a service
    assert not _agents_own_udp(dataclasses.replace(own, proto="tcp"))
