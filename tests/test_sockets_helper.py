"""The /proc socket lister used by the loopback tests sees what it must (so those tests can fail)."""

from __future__ import annotations

import os
import socket

from .sockets import descendants, listening


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
