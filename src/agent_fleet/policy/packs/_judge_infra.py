"""Judges for clusters and containers: manifests applied from the network, data deleted inside running
containers, and network listeners relayed to local control sockets.

* ``remote-manifest``: ``kubectl apply|create|replace -f URL`` (or ``-k URL``) from a host that is
  neither on the allow-list nor a forge's release host: whatever the URL serves at that moment is
  what the cluster runs.
* ``container-wipe``: ``docker exec``/``podman exec``/``kubectl exec`` running a recursive removal
  of an absolute path outside the temporary directories: the data of a running service (a database
  directory, uploads) is gone. ``docker run --rm`` containers start fresh and are not judged.
* ``socket-relay``: ``socat`` listening on the network and relaying to a Unix socket
  (``/var/run/docker.sock``): root on the machine for whoever connects.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Sequence

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import SimpleCommand, UnparsableCommand, parse_script
from agent_fleet.policy.bash._unwrap import inline_script
from agent_fleet.policy.packs._argv import JudgeContext, option_values
from agent_fleet.policy.packs._nested import nested_commands

__all__ = ["judge_container_wipe", "judge_remote_manifest", "judge_scale_to_zero", "judge_socket_relay"]

#: Where projects publish release manifests (``kubectl apply -f https://github.com/.../releases/...``).
_RELEASE_HOSTS = frozenset(
    {"github.com", "raw.githubusercontent.com", "objects.githubusercontent.com", "gitlab.com"}
)
_TEMP = ("/tmp", "/var/tmp", "/dev/shm")


def judge_remote_manifest(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    values = option_values(argv[1:], ("-f", "--filename", "-k", "--kustomize"))
    if posixpath.basename(argv[0]) == "helm":  # `helm install NAME URL`: the chart is an operand
        values = [a for a in argv[1:] if "://" in a and not a.startswith("-")]
    for value in values:
        host = host_of(value)
        if "://" in value and not (host in _RELEASE_HOSTS or ctx.hosts.allows(host)):
            return f"{argv[0]} applies {value}, fetched from {host or 'an unknown host'}"
    return None


def _wipes(argv: Sequence[str]) -> str | None:
    if not argv or posixpath.basename(argv[0]) not in ("rm", "shred", "find"):
        return None
    args = list(argv[1:])
    if argv[0] == "find":
        starts = [a for a in args if a.startswith("/")][:1]
        return starts[0] if starts and "-delete" in args and not starts[0].startswith(_TEMP) else None
    recursive = any(a.startswith("-") and not a.startswith("--") and "r" in a.lower() for a in args)
    recursive = recursive or "--recursive" in args
    for target in (a for a in args if not a.startswith("-")):
        if target.startswith("/") and not target.startswith(_TEMP) and (recursive or argv[0] == "shred"):
            return target
    return None


def judge_container_wipe(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    if "exec" not in argv[1:4]:
        return None
    for nested in nested_commands(argv):
        commands: list[Sequence[str]] = []
        if isinstance(nested, str):
            try:
                commands = [c.argv for c in parse_script(nested).commands]
            except UnparsableCommand:
                continue
        else:
            commands = [nested]
            carried = inline_script(nested)
            if carried is not None:  # `kubectl exec pod -- sh -c 'rm -rf /data/*'`
                with contextlib.suppress(UnparsableCommand):
                    commands += [c.argv for c in parse_script(carried[0]).commands]
        for inner in commands:
            target = _wipes(inner)
            if target is not None:
                return f"{argv[0]} exec deletes {target} inside a running container"
    return None


_LISTEN = ("TCP-L", "TCP4-L", "TCP6-L", "SSL-L", "OPENSSL-L", "UDP-L", "UDP4-L", "UDP6-L", "SCTP-L")


def judge_socket_relay(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    addresses = [a.upper() for a in argv[1:] if not a.startswith("-")]
    listens = any(a.startswith(_LISTEN) for a in addresses)
    unix = next((a for a in argv[1:] if a.upper().startswith(("UNIX", "ABSTRACT"))), None)
    if listens and unix is not None:
        return f"socat exposes the local socket {unix.split(':', 1)[-1]} on the network"
    return None


_CAPACITY = frozenset(
    {"--desired-count", "--desired-capacity", "--max-size", "--max-capacity", "--replicas", "--count"}
    | {"--max-instances", "--min-instances", "--instance-count", "--size", "--scale", "--num-nodes"}
)


def judge_scale_to_zero(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """``aws ecs update-service --desired-count 0``, ``... --max-size 0``, ``gcloud ... --num-nodes 0``."""
    args = list(argv[1:])
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if name in _CAPACITY and value.strip() in ("0", "web=0", "worker=0"):
            return f"{argv[0]} {name} {value} leaves nothing running"
    return None
