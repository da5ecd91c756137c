"""What rule packs and judges see of one command: the argv split into flags and positionals, the
context it runs in (``JudgeContext``), and small helpers the judges share."""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from agent_fleet.policy._hosts import HostList
from agent_fleet.policy.bash._shell import ParsedScript, SimpleCommand

__all__ = [
    "WRITE_OPS",
    "Args",
    "JudgeContext",
    "assignments",
    "cd_targets",
    "effective_argv",
    "expand",
    "option_values",
    "read_small_file",
    "split_args",
    "stdin_texts",
    "written_files",
]

WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
_MAX_FILE = 1024 * 1024
_BUNDLE = re.compile(r"-[A-Za-z]{2,4}")
_WHICH = re.compile(r"^(?:\$\(|`)\s*(?:which|command\s+-v|type\s+-[pP])\s+([^\s)`]+)\s*(?:\)|`)$")
_ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|)]*)")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_SYSTEM_TOP = frozenset(
    {"etc", "root", "boot", "proc", "sys", "dev", "var", "usr", "bin", "sbin", "lib", "lib32", "lib64"}
    | {"home", "Users", "System", "Library", "private", "Applications", "Volumes", "snap", "nix", "run"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeContext:
    """Where the script runs: ``cwd``/``roots``/``home`` absolute and normalised (``cwd`` may be
    unknown); ``cd_targets`` every directory the script ``cd``s into; ``hosts`` the allow-list;
    ``builtin`` the engine's built-in rules, applied to commands run elsewhere."""

    cwd: str | None
    roots: tuple[str, ...]
    home: str
    hosts: HostList
    script: ParsedScript
    text: str
    cd_targets: tuple[str, ...] = ()
    # `NAME=value` assignments of the script, expanded in the words rules see.
    variables: dict[str, str] = field(default_factory=dict)
    # Files the script itself writes before using them (`echo 'DROP TABLE t' > x.sql && psql -f x.sql`).
    written: dict[str, str] = field(default_factory=dict)
    # The engine's built-in rules, for scripts run elsewhere (``ssh host 'rm -rf /srv'``): (rule, reason).
    builtin: Callable[[ParsedScript], tuple[str, str] | None] | None = None

    def resolve(self, word: str, cwd: str | None = None) -> str | None:
        """The absolute path ``word`` names (``~``, ``$HOME``, relative to ``cwd``), or ``None``."""
        if not word or "$(" in word or "`" in word:
            return None
        if word == "~" or word.startswith("~/"):
            word = self.home + word[1:]
        elif word.startswith(("$HOME", "${HOME}")):
            word = self.home + word[len("${HOME}") if word.startswith("${") else len("$HOME") :]
        elif word.startswith("~"):
            user, _, rest = word[1:].partition("/")
            word = f"/home/{user}/{rest}"
        if "$" in word:
            return None
        if not word.startswith("/"):
            base = cwd if cwd is not None else self.cwd
            if base is None:
                return None
            word = posixpath.join(base, word)
        return posixpath.normpath(word)

    def inside(self, path: str) -> bool:
        """``path`` (absolute) is inside the working directory or a writable root."""
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in self.roots)

    def sensitive_dir(self, path: str) -> bool:
        """``/``, the home directory or one of its ancestors, or a top-level system directory."""
        if path == "/" or path == self.home or self.home.startswith(path.rstrip("/") + "/"):
            return True
        return path.count("/") == 1 and path[1:] in _SYSTEM_TOP


@dataclass(frozen=True, slots=True)
class Args:
    """``flags``: every flag spelling present (``--x=1`` -> ``--x``; ``-abc`` -> ``-abc``, ``-a``, ``-b``,
    ``-c``); ``positionals``: the other words, skipping values of ``value_options``; ``operands``: every
    word that is not a flag (values of options included)."""

    flags: frozenset[str]
    positionals: tuple[str, ...]
    operands: tuple[str, ...]


def split_args(args: Sequence[str], value_options: Iterable[str] = ()) -> Args:
    takes_value = frozenset(value_options)
    flags: set[str] = set()
    positionals: list[str] = []
    operands: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            operands.append(arg)
            continue
        if arg == "--":
            positionals.extend(args[i + 1 :])
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("-") and len(arg) > 1:
            name = arg.partition("=")[0]
            flags.add(name)
            if not arg.startswith("--"):
                flags.update(f"-{letter}" for letter in name[1:])
            skip = name in takes_value and "=" not in arg
            continue
        positionals.append(arg)
        operands.append(arg)
    return Args(frozenset(flags), tuple(positionals), tuple(operands))


def option_values(args: Sequence[str], names: Iterable[str], *, attached: bool = True) -> list[str]:
    """Values of the options ``names`` (``--x V``, ``--x=V``, ``-xV`` for one-letter ``-x`` when
    ``attached``), in order."""
    wanted = frozenset(names)
    found: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in wanted:
            if eq:
                found.append(value)
            elif i + 1 < len(args):
                found.append(args[i + 1])
                i += 1
        elif attached and len(arg) > 2 and arg[:2] in wanted and not arg.startswith("--"):
            found.append(arg[2:])
        elif attached and _BUNDLE.fullmatch(arg) and f"-{arg[-1]}" in wanted and i + 1 < len(args):
            found.append(args[i + 1])  # `psql -qAtc SQL`: a bundle of flags ending in the option
            i += 1
        i += 1
    return found


def assignments(text: str) -> dict[str, str]:
    """``NAME=value`` assignments anywhere in the script text (the last one wins), quotes removed."""
    found: dict[str, str] = {}
    for name, value in _ASSIGNMENT.findall(text):
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        found[name] = value
    return found


def expand(argv: Sequence[str], variables: dict[str, str]) -> tuple[str, ...]:
    """``$NAME``/``${NAME}`` replaced by the script's own assignments (``SQL=...; psql -c "$SQL"``)."""
    if not variables or not any("$" in word for word in argv):
        return tuple(argv)

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return variables.get(name, match.group(0))

    words = [_VARIABLE.sub(value, word) for word in argv]
    if words and "/" in words[0] and not words[0].startswith("$"):
        words[0] = words[0].rstrip("/").rsplit("/", 1)[-1]
    return tuple(words)


def effective_argv(cmd: SimpleCommand, variables: dict[str, str] | None = None) -> tuple[str, ...]:
    """``python -m pip install x`` -> ``pip install x``; ``$(which terraform) destroy`` -> ``terraform
    destroy``; ``$TF destroy`` after ``TF=terraform`` -> ``terraform destroy``."""
    argv = expand(cmd.argv, variables or {})
    which = _WHICH.match(argv[0]) if argv else None
    if which is not None:
        argv = (which.group(1).rsplit("/", 1)[-1], *argv[1:])
    if len(argv) >= 3 and argv[0].startswith(("python", "py")) and argv[1] == "-m":
        module = argv[2]
        if module in ("pip", "pip3", "uv", "pipx", "twine", "poetry", "pdm", "hatch", "flit", "conda"):
            return (module, *argv[3:])
    return argv


def stdin_texts(cmd: SimpleCommand, ctx: JudgeContext) -> list[str]:
    """Text known to reach ``cmd``'s standard input: here-documents, here-strings, ``< file`` (read when
    small and resolvable), and ``echo``/``printf``/``cat file`` earlier in its pipeline."""
    texts: list[str] = []
    for redirect in cmd.redirects:
        if redirect.op in ("<<", "<<-", "<<<"):
            texts.append(redirect.target)
        elif redirect.op == "<":
            content = read_small_file(redirect.target, ctx)
            if content is not None:
                texts.append(content)
    for argv in cmd.stdin:
        if not argv:
            continue
        if argv[0] in ("echo", "printf"):
            words = [arg for arg in argv[1:] if not (arg.startswith("-") and len(arg) <= 3)]
            texts.append(" ".join(words).replace("\\n", "\n"))
        elif argv[0] in ("cat", "zcat", "gunzip", "bzcat", "xzcat"):
            for word in argv[1:]:
                content = read_small_file(word, ctx) if not word.startswith("-") else None
                if content is not None:
                    texts.append(content)
    return texts


def read_small_file(word: str, ctx: JudgeContext) -> str | None:
    """The text of the file ``word`` names: written earlier by the script itself, or on disk when it
    resolves, exists and is at most 1 MiB."""
    if word in ctx.written:
        return ctx.written[word]
    path = ctx.resolve(word)
    if path is None:
        return None
    if path in ctx.written:
        return ctx.written[path]
    try:
        info = os.stat(path)
        # Only regular files: a FIFO, a device or /dev/stdin would block or never end.
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(_MAX_FILE)
    except (OSError, ValueError):
        return None


def cd_targets(script: ParsedScript, cwd: str | None, home: str) -> tuple[str, ...]:
    """Every directory the script ``cd``s/``pushd``s into, each resolved from the one before."""
    found: list[str] = []
    current = cwd
    for cmd in script.commands:
        if cmd.program not in ("cd", "pushd"):
            continue
        operands = [arg for arg in cmd.argv[1:] if not arg.startswith("-")]
        target = operands[0] if operands else "~"
        if target == "~" or target.startswith("~/"):
            target = home + target[1:]
        elif target.startswith("$HOME"):
            target = home + target[len("$HOME") :]
        if "$" in target or "`" in target or (not target.startswith("/") and current is None):
            current = None
            continue
        current = posixpath.normpath(posixpath.join(current or "/", target))
        found.append(current)
    return tuple(found)


def written_files(script: ParsedScript, cwd: str | None) -> dict[str, str]:
    """What the script writes into files with ``echo``/``printf``/``cat <<EOF`` and a redirection, by
    the word as written and by its absolute path."""
    found: dict[str, str] = {}
    for cmd in script.commands:
        text: str | None = None
        if cmd.program in ("echo", "printf"):
            words = [arg for arg in cmd.argv[1:] if not (arg.startswith("-") and len(arg) <= 3)]
            text = " ".join(words).replace("\\n", "\n")
        elif cmd.program == "cat" and len(cmd.argv) == 1:
            bodies = [r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<")]
            text = "\n".join(bodies) if bodies else None
        if text is None:
            continue
        targets = [r.target for r in cmd.redirects if r.op in (">", ">>", ">|")]
        if cmd.program == "tee":
            targets += [arg for arg in cmd.argv[1:] if not arg.startswith("-")]
        for target in targets:
            found[target] = found.get(target, "") + "\n" + text
            if cwd is not None and not target.startswith(("/", "~", "$")):
                found[posixpath.normpath(posixpath.join(cwd, target))] = found[target]
    return found
