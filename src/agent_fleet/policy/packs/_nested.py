"""Commands that run another command somewhere else: in an environment (``uv run``, ``poetry run``,
``bundle exec``, ``doppler run --``, ``aws-vault exec p --``), in a container (``docker exec db psql``,
``docker compose exec``, ``kubectl exec pod --``), or on another machine (``ssh host 'cmd'``,
``heroku run``, ``gcloud compute ssh --command``).

``nested_commands(argv)`` gives what such a command runs, as an argv (a list) or as shell text (a str),
so rule packs judge ``docker compose exec db psql -c "DROP TABLE users"`` like ``psql -c ...``.
The option tables are approximate: an unknown option taking a value makes us look at the wrong word,
which at worst misses a nested command (the outer one is still judged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["nested_commands"]


@dataclass(frozen=True, slots=True)
class _Runner:
    prefixes: tuple[tuple[str, ...], ...]  # the words selecting the run mode: ("run",), ("compose", "exec")
    values: frozenset[str] = frozenset()  # options taking a value
    targets: int = 0  # positionals naming where to run (container, profile, directory) before the argv
    text_options: tuple[str, ...] = ()  # options whose value is shell text (`--command "..."`)


_DOCKER_EXEC = frozenset({"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys"})
_DOCKER_RUN = _DOCKER_EXEC | frozenset(
    {"-v", "--volume", "-p", "--publish", "--name", "--network", "--net", "--entrypoint", "--mount"}
    | {"--platform", "-l", "--label", "--hostname", "-h", "--add-host", "--cpus", "-m", "--memory", "--pull"}
    | {"--restart", "--log-driver", "--cap-add", "--cap-drop", "--device", "--gpus", "--ulimit", "--tmpfs"}
    | {"--shm-size", "--dns", "--ipc", "--pid", "--security-opt", "--stop-signal", "--link", "--expose"}
)
_COMPOSE = frozenset(
    {"-f", "--file", "-p", "--project-name", "--profile", "--env-file", "--project-directory"}
)
_CONTAINER = _Runner(
    prefixes=(("exec",), ("container", "exec"), ("run",), ("container", "run")),
    values=_DOCKER_RUN,
    targets=1,
)
_COMPOSE_RUN = _Runner(
    prefixes=(("compose", "exec"), ("compose", "run")), values=_DOCKER_RUN | _COMPOSE, targets=1
)
_ENV_RUN = _Runner(prefixes=(("run",),), values=frozenset({"-e", "--env", "--env-file", "-p", "--project"}))

RUNNERS: dict[str, tuple[_Runner, ...]] = {
    "docker": (_CONTAINER, _COMPOSE_RUN),
    "podman": (_CONTAINER, _COMPOSE_RUN),
    "nerdctl": (_CONTAINER, _COMPOSE_RUN),
    "finch": (_CONTAINER,),
    "docker-compose": (_Runner((("exec",), ("run",)), _DOCKER_RUN | _COMPOSE, 1),),
    "podman-compose": (_Runner((("exec",), ("run",)), _DOCKER_RUN | _COMPOSE, 1),),
    "kubectl": (
        _Runner(
            (("exec",), ("run",), ("debug",)),
            frozenset(
                {"-n", "--namespace", "-c", "--container", "--context", "--image", "-f", "--kubeconfig"}
            ),
            targets=1,
        ),
    ),
    "oc": (
        _Runner((("exec",), ("rsh",), ("run",)), frozenset({"-n", "--namespace", "-c", "--container"}), 1),
    ),
    "uv": (
        _Runner(
            (("run",), ("tool", "run")),
            frozenset({"--with", "--python", "-p", "--project", "--directory", "--env-file", "--extra"})
            | frozenset(
                {"--group", "--package", "--index", "--with-requirements", "--from", "--with-editable"}
            ),
        ),
    ),
    "uvx": (_Runner(((),), frozenset({"--from", "--with", "--python", "-p", "--index"})),),
    "poetry": (_Runner((("run",),), frozenset({"-C", "--directory", "-P", "--project"})),),
    "pipenv": (_Runner((("run",),)),),
    "pdm": (_Runner((("run",),), frozenset({"-p", "--project"})),),
    "rye": (_Runner((("run",),)),),
    "hatch": (_Runner((("run",),), frozenset({"-e", "--env"})),),
    "pixi": (_Runner((("run",), ("exec",)), frozenset({"-e", "--environment", "--manifest-path"})),),
    "devbox": (_Runner((("run",),)),),
    "bundle": (_Runner((("exec",),)),),
    "conda": (_Runner((("run",),), frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})),),
    "mamba": (_Runner((("run",),), frozenset({"-n", "--name", "-p", "--prefix"})),),
    "micromamba": (_Runner((("run",),), frozenset({"-n", "--name", "-p", "--prefix"})),),
    "npx": (_Runner(((),), frozenset({"-p", "--package"})),),
    "bunx": (_Runner(((),), frozenset({"-p", "--package"})),),
    "pnpx": (_Runner(((),)),),
    "pnpm": (_Runner((("exec",), ("dlx",)), frozenset({"-C", "--dir", "--filter", "-F"})),),
    "npm": (_Runner((("exec",), ("x",)), frozenset({"-p", "--package", "-w", "--workspace"})),),
    "yarn": (_Runner((("exec",), ("dlx",)), frozenset({"-p", "--package"})),),
    "bun": (_Runner((("x",),)),),
    "mise": (_Runner((("exec",), ("x",)), frozenset({"-C", "--cd", "-E", "--env"})),),
    "rtx": (_Runner((("exec",), ("x",))),),
    "asdf": (_Runner((("exec",),)),),
    "direnv": (_Runner((("exec",),), targets=1),),
    "dotenv": (_Runner(((),), frozenset({"-e", "-f", "-v", "-c"})),),
    "dotenvx": (_Runner((("run",),), frozenset({"-f", "--env-file", "-e", "--env"})),),
    "op": (_Runner((("run",),), frozenset({"--env-file", "--account"})),),
    "doppler": (
        _Runner((("run",),), frozenset({"-p", "--project", "-c", "--config"}), text_options=("--command",)),
    ),
    "infisical": (
        _Runner((("run",),), frozenset({"--env", "--path", "--projectId"}), text_options=("--command",)),
    ),
    "teller": (_Runner((("run",),)),),
    "aws-vault": (
        _Runner((("exec",),), frozenset({"-d", "--duration", "--region", "-t", "--mfa-token"}), 1),
    ),
    "saml2aws": (_Runner((("exec",),), frozenset({"-a", "--idp-account", "--exec-profile"})),),
    "chamber": (_Runner((("exec",),), targets=1),),
    "envchain": (_Runner(((),), targets=1),),
    "torsocks": (_Runner(((),), frozenset({"-u", "-p", "-a", "-P"})),),
    "proxychains": (_Runner(((),), frozenset({"-f"})),),
    "proxychains4": (_Runner(((),), frozenset({"-f"})),),
    "flock": (_Runner(((),), frozenset({"-w", "--timeout", "-E"}), 1, text_options=("-c", "--command")),),
    "chroot": (_Runner(((),), frozenset({"--userspec", "--groups"}), 1),),
    "firejail": (_Runner(((),)),),
    "caffeinate": (_Runner(((),), frozenset({"-t", "-w"})),),
    "nix-shell": (_Runner(((),), frozenset({"-p", "-I", "-A"}), text_options=("--run", "--command")),),
    "script": (_Runner(((),), frozenset({"-E", "-T", "-t"}), text_options=("-c", "--command")),),
    "heroku": (_Runner((("run",),), frozenset({"-a", "--app", "-s", "--size", "-e", "--env", "-r"})),),
    "railway": (_Runner((("run",),), frozenset({"-s", "--service", "-e", "--environment"})),),
    "fly": (
        _Runner((("ssh", "console"),), frozenset({"-a", "--app", "-s"}), text_options=("-C", "--command")),
    ),
    "flyctl": (_Runner((("ssh", "console"),), frozenset({"-a", "--app"}), text_options=("-C", "--command")),),
    "gcloud": (
        _Runner((("compute", "ssh"),), frozenset({"--zone", "--project"}), 1, text_options=("--command",)),
    ),
    "vagrant": (_Runner((("ssh",),), targets=0, text_options=("-c", "--command")),),
    "lxc": (_Runner((("exec",),), targets=1),),
    "incus": (_Runner((("exec",),), targets=1),),
    "multipass": (_Runner((("exec",),), targets=1),),
}
_SSH_VALUES = frozenset("bcDEeFIiJLlmOopQRSWw")


def _ssh(args: Sequence[str]) -> list[str | list[str]]:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or len(arg) < 2:
            break
        for j, letter in enumerate(arg[1:], start=1):
            if letter in _SSH_VALUES:
                if j == len(arg) - 1:
                    i += 1
                break
        i += 1
    rest = list(args[i + 1 :])  # after the destination
    return [" ".join(rest)] if rest else []


def _option_text(args: Sequence[str], names: tuple[str, ...]) -> list[str | list[str]]:
    found: list[str | list[str]] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in names:
            if eq:
                found.append(value)
            elif i + 1 < len(args):
                found.append(args[i + 1])
    return found


def _after_prefix(args: Sequence[str], prefix: tuple[str, ...], values: frozenset[str]) -> int | None:
    """Index in ``args`` just after ``prefix`` (options allowed before and between its words)."""
    i = 0
    for word in prefix:
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in values and "=" not in args[i] else 1
        if i >= len(args) or args[i] != word:
            return None
        i += 1
    return i


def _run(args: Sequence[str], runner: _Runner) -> list[str | list[str]] | None:
    for prefix in runner.prefixes:
        start = _after_prefix(args, prefix, runner.values)
        if start is None:
            continue
        rest = list(args[start:])
        texts = _option_text(rest, runner.text_options) if runner.text_options else []
        if "--" in rest:
            inner = rest[rest.index("--") + 1 :]
            return [*texts, inner] if inner else texts
        i = 0
        targets = runner.targets
        while i < len(rest):
            word = rest[i]
            if word.startswith("-") and len(word) > 1:
                takes = (word in runner.values or word in runner.text_options) and "=" not in word
                i += 2 if takes else 1
                continue
            if targets:
                targets -= 1
                i += 1
                continue
            break
        inner = rest[i:]
        return [*texts, inner] if inner else texts
    return None


def nested_commands(argv: Sequence[str]) -> list[str | list[str]]:
    """What ``argv`` runs inside another environment, container or machine: argvs and shell texts."""
    if not argv:
        return []
    program, args = argv[0], argv[1:]
    if program in ("ssh", "autossh", "mosh"):
        return _ssh(args)
    for runner in RUNNERS.get(program, ()):
        found = _run(args, runner)
        if found is not None:
            return found
    return []
