"""The built-in safety rules: always on, judged on parsed commands, never overridable.

Each rule is a function of one normalised ``SimpleCommand`` (or of the whole script, for fork bombs and
redirections) and a ``RuleContext``; it returns a ``Violation`` naming a stable rule id, or ``None``.
``find_violation`` runs them in a fixed order and returns the first that fires: script-level fork bomb
first, then every command in execution order (for each: the program-specific rule, then
download-to-shell, then privilege escalation), then redirections. So ``sudo rm -rf /`` reports
``rm-root``, the more specific reason.

Documented choices:

* ``git push`` with any plain force (``--force``, ``-f``, a ``+refspec``) is declined even when
  ``--force-with-lease`` is also given: only lease-protected forces pass.
* ``--delete`` / ``:ref`` deletions are declined for ``main`` and ``master`` only.
* ``rm`` needs ``-r``/``-R``/``--recursive`` (or ``--no-preserve-root``) to be judged; ``-f`` is not needed.
* ``chmod``/``chown``/``chgrp -R`` are declined on protected paths and on any absolute or home path
  outside the working directory and writable roots (any absolute path when no working directory is known).
* A write to any ``/dev`` node other than the harmless ones (``null``, ``zero``, ``tty``, ``stdout``,
  ``fd/*`` ...) counts as a disk write.
* Relative targets are resolved against the request's ``cwd`` when known and against every directory the
  script ``cd``s into (``cd / && rm -rf *``); ``find <protected> -delete`` (or ``-exec rm``) and
  ``rsync --delete ... <protected>`` count as ``rm-root``; ``xargs rm -rf`` fed by ``echo``/``printf``/
  ``find`` gets those words as operands.
* A program name we cannot resolve (``$X -rf /``, ``$(which git) reset --hard``) is judged as if it were
  ``rm``, ``git``, ``chmod`` and ``dd`` in turn.
* A pipeline runs what a download feeds it when a later stage is a shell or interpreter reading its
  code from standard input (``sh``, ``bash -s``, ``python -``, ``source /dev/stdin``, ``xargs bash -c``);
  ``python -m json.tool``, ``python -c CODE``, ``jq`` and ``sh script.sh`` read data, not code.

Out of reach (by design, not parsed): code inside other languages (``python -c "shutil.rmtree('/')"``),
decoded payloads (``base64 -d | sh``), and files run later (``curl -o x.sh && sh x.sh``).
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from agent_fleet.policy._shell import ParsedScript, Redirect, SimpleCommand
from agent_fleet.policy._targets import HOME_FALLBACK, inside, protected_reason, resolve_target
from agent_fleet.policy._unwrap import (
    DOWNLOADERS,
    PRIVILEGE,
    executes_stdin,
    expand_braces,
    is_dynamic,
    is_executor,
    normalise_program,
)

__all__ = ["BUILTIN_RULES", "RuleContext", "Violation", "find_violation"]

#: Stable ids of the built-in rules and what each guards against.
BUILTIN_RULES: dict[str, str] = {
    "rm-root": "recursive removal of /, the home directory, a system directory or a glob over one",
    "recursive-chmod-root": "recursive chmod/chown/chgrp of a protected path or one outside the workspace",
    "disk-write": "mkfs, dd of=/dev/..., shred/wipefs of devices, redirections into device nodes",
    "git-reset-hard": "git reset --hard (discards uncommitted work)",
    "git-push-force": "git push --force/-f/+refspec/--mirror, or deleting main/master on the remote",
    "git-worktree-remove": "git worktree remove|prune",
    "privilege-escalation": "sudo, sudoedit, doas, su, pkexec, run0",
    "download-to-shell": 'downloaded content executed: curl|sh, bash <(curl ...), sh -c "$(curl ...)"',
    "fork-bomb": "a function that calls itself in a pipeline or in the background",
}

DEFAULT_BRANCHES = frozenset({"main", "master", "refs/heads/main", "refs/heads/master"})
_HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout"}
    | {"/dev/stderr", "/dev/tty", "/dev/ptmx"}
)
_HARMLESS_DEVICE_TREES = ("/dev/fd/", "/dev/pts/", "/dev/shm/", "/dev/tcp/", "/dev/udp/", "/dev/mqueue/")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
_DEVICE_WRITERS = frozenset(
    {"shred", "wipefs", "blkdiscard", "mkswap", "fdisk", "sfdisk", "cfdisk", "sgdisk", "gdisk", "parted"}
    | {"tee", "cp", "mv", "pv", "badblocks", "hdparm", "nvme"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    rule: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleContext:
    """Where the command would run. ``cwd`` and ``roots`` are absolute and normalised.

    ``cd_targets``: directories the script itself ``cd``s into (``cd / && rm -rf *``); relative targets
    are judged against each of them as well as against ``cwd``.
    """

    cwd: str | None = None
    roots: tuple[str, ...] = ()
    home: str = HOME_FALLBACK
    cd_targets: tuple[str, ...] = ()

    @classmethod
    def build(
        cls, cwd: str | os.PathLike[str] | None, writable_roots: Iterable[str | os.PathLike[str]] = ()
    ) -> RuleContext:
        home = os.path.expanduser("~")
        if not home.startswith("/"):
            home = HOME_FALLBACK
        norm_cwd = posixpath.normpath(os.path.abspath(cwd)) if cwd else None
        roots: list[str] = [norm_cwd] if norm_cwd else []
        for root in (os.fspath(raw) for raw in writable_roots):
            if not root.startswith("/"):
                if norm_cwd is None:
                    continue
                root = posixpath.join(norm_cwd, root)
            roots.append(posixpath.normpath(root))
        return cls(cwd=norm_cwd, roots=tuple(roots), home=posixpath.normpath(home))


# --------------------------------------------------------------------------------------------------
# Helpers.


def _short_flags(args: Sequence[str]) -> tuple[set[str], list[str]]:
    """Split ``args`` into option letters/long names and operands (options may follow operands)."""
    flags: set[str] = set()
    operands: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            flags.add(arg[2:].partition("=")[0])
        elif arg.startswith("-") and len(arg) > 1:
            flags.update(arg[1:])
        else:
            operands.append(arg)
    return flags, operands


def _targets(words: Iterable[str], ctx: RuleContext) -> Iterable[tuple[str, str | None]]:
    cwds = dict.fromkeys((ctx.cwd, *ctx.cd_targets))
    for word in words:
        for variant in expand_braces(word):
            for cwd in cwds:
                yield variant, resolve_target(variant, cwd=cwd, home=ctx.home)


def _protected(words: Iterable[str], ctx: RuleContext) -> tuple[str, str] | None:
    """The first word naming a protected path, with the reason, judged from every possible cwd."""
    for word, path in _targets(words, ctx):
        why = protected_reason(path, home=ctx.home) if path is not None else None
        if why is not None:
            return word, why
    return None


def _cd_targets(commands: Sequence[SimpleCommand], ctx: RuleContext) -> tuple[str, ...]:
    """Where ``cd``/``pushd`` in the script may move, each resolved from the previous one."""
    found: list[str] = []
    current = ctx.cwd
    for cmd in commands:
        if cmd.program not in ("cd", "pushd"):
            continue
        operands = [arg for arg in cmd.argv[1:] if not arg.startswith("-") or arg == "-"]
        target = operands[0] if operands else "~"
        path = resolve_target(target, cwd=current, home=ctx.home) if target != "-" else None
        if path is not None:
            found.append(path)
        current = path
    return tuple(found)


def _xargs_input(cmd: SimpleCommand) -> list[str]:
    """Arguments ``xargs`` would append, when an earlier pipeline stage spells them out."""
    if "xargs" not in cmd.wrappers:
        return []
    words: list[str] = []
    for argv in cmd.stdin:
        if not argv:
            continue
        if argv[0] in ("echo", "printf"):
            for arg in argv[1:]:
                if not arg.startswith("-"):
                    words.extend(arg.replace("\\n", " ").replace("\\0", " ").split())
        elif argv[0] == "find":
            words.extend(_find_starts(argv[1:]))
    return words


def _find_starts(args: Sequence[str]) -> list[str]:
    starts: list[str] = []
    i = 0
    while i < len(args):  # find's own options come before the starting points
        if args[i] in ("-H", "-L", "-P") or args[i].startswith("-O"):
            i += 1
        elif args[i] == "-D":
            i += 2
        else:
            break
    for arg in args[i:]:
        if arg.startswith(("-", "(", "!")) or arg == ")":
            break
        starts.append(arg)
    return starts


def _is_device(word: str) -> bool:
    if not word.startswith("/"):
        return False
    path = posixpath.normpath("/" + word.lstrip("/"))
    if not path.startswith("/dev/") or path in _HARMLESS_DEVICES:
        return False
    return not path.startswith(_HARMLESS_DEVICE_TREES)


# --------------------------------------------------------------------------------------------------
# Program-specific rules.


def _rm(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    flags, operands = _short_flags(cmd.argv[1:])
    recursive = bool(flags & {"r", "R", "recursive"})
    if "no-preserve-root" in flags:
        return Violation(rule="rm-root", reason="rm --no-preserve-root removes the root directory")
    if not recursive:
        return None
    hit = _protected([*operands, *_xargs_input(cmd)], ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"recursive removal of {hit[0]!r}: {hit[1]}")
    return None


def _rsync(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    flags, operands = _short_flags(cmd.argv[1:])
    if not any(flag.startswith("del") for flag in flags) or not operands:  # --del, --delete-after ...
        return None
    hit = _protected(operands[-1:], ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"rsync --delete into {hit[0]!r}: {hit[1]}")
    return None


def _find(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    args = cmd.argv[1:]
    deletes = "-delete" in args
    for i, arg in enumerate(args[:-1]):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            deletes = deletes or normalise_program(args[i + 1]) in ("rm", "shred", "unlink", "rmdir")
    if not deletes:
        return None
    hit = _protected(_find_starts(args), ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"find deleting under {hit[0]!r}: {hit[1]}")
    return None


_CHMOD_LETTERS = frozenset("cfvR")
_CHOWN_LETTERS = frozenset("cfvRhHLP")


def _chmod(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    letters = _CHMOD_LETTERS if cmd.program == "chmod" else _CHOWN_LETTERS
    recursive = False
    has_reference = False
    operands: list[str] = []
    args = cmd.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            name = arg[2:].partition("=")[0]
            recursive = recursive or name == "recursive"
            has_reference = has_reference or name == "reference"
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= letters:
            recursive = recursive or "R" in arg
        else:
            operands.append(arg)  # includes chmod modes like -w, which are operands
    if not recursive:
        return None
    targets = operands if has_reference else operands[1:]
    hit = _protected(targets, ctx)
    if hit is not None:
        return Violation(
            rule="recursive-chmod-root", reason=f"recursive {cmd.program} of {hit[0]!r}: {hit[1]}"
        )
    for word in targets:
        path = resolve_target(word, cwd=ctx.cwd, home=ctx.home)
        if path is not None and not inside(path, ctx.roots):
            return Violation(
                rule="recursive-chmod-root",
                reason=f"recursive {cmd.program} of {word!r}, outside the working directory",
            )
    return None


def _git(cmd: SimpleCommand) -> Violation | None:
    args = list(cmd.argv[1:])
    aliases: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        if arg in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"):
            if arg == "-c" and i + 1 < len(args):
                key, _, value = args[i + 1].partition("=")
                if key.lower().startswith("alias."):
                    aliases[key[len("alias.") :]] = value
            i += 2
            continue
        i += 1
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    for _ in range(5):  # aliases defined on the command line: `git -c alias.x='reset --hard' x`
        alias = aliases.pop(sub, None)
        if alias is None or alias.startswith("!"):
            break
        try:
            words = shlex.split(alias)
        except ValueError:
            break
        if not words:
            break
        sub, rest = words[0], words[1:] + rest
    match sub:
        case "reset":
            return _git_reset(rest)
        case "worktree":
            action = next((arg for arg in rest if not arg.startswith("-")), None)
            if action in ("remove", "prune"):
                return Violation(
                    rule="git-worktree-remove", reason=f"git worktree {action} deletes worktrees"
                )
            return None
        case "push":
            return _git_push(rest)
        case _:
            return None


def _long(arg: str, name: str, shortest: int) -> bool:
    """``arg`` is ``name`` or an unambiguous abbreviation git would accept (at least ``shortest`` long)."""
    base = arg.partition("=")[0]
    return len(base) >= shortest and name.startswith(base)


def _git_reset(rest: Sequence[str]) -> Violation | None:
    for arg in rest:
        if arg == "--":
            break
        if _long(arg, "--hard", 3):
            return Violation(rule="git-reset-hard", reason="git reset --hard discards uncommitted work")
    return None


def _git_push(rest: Sequence[str]) -> Violation | None:
    force = delete = mirror = False
    positional: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            positional.extend(rest[i + 1 :])
            break
        if arg.startswith("--"):
            base = arg.partition("=")[0]
            if base == "--force":
                force = True
            elif _long(arg, "--mirror", 4):
                mirror = True
            elif _long(arg, "--delete", 4):
                delete = True
            elif base in ("--repo", "--receive-pack", "--exec", "--push-option") and "=" not in arg:
                i += 1
        elif arg.startswith("-") and len(arg) > 1:
            for j, letter in enumerate(arg[1:]):
                if letter == "f":
                    force = True
                elif letter == "d":
                    delete = True
                elif letter == "o":
                    if j == len(arg) - 2:
                        i += 1
                    break
        else:
            positional.append(arg)
        i += 1
    refspecs = positional[1:]
    if force or any(ref.startswith("+") for ref in refspecs):
        return Violation(
            rule="git-push-force",
            reason="force push (--force, -f or +refspec); use --force-with-lease alone",
        )
    if mirror:
        return Violation(rule="git-push-force", reason="git push --mirror overwrites and deletes remote refs")
    for ref in refspecs:
        target = ref[1:] if ref.startswith(":") else ref
        if (ref.startswith(":") or delete) and target in DEFAULT_BRANCHES:
            return Violation(rule="git-push-force", reason=f"deleting the remote default branch {target!r}")
    return None


def _dd(cmd: SimpleCommand) -> Violation | None:
    for arg in cmd.argv[1:]:
        if arg.startswith("of=") and _is_device(arg[3:]):
            return Violation(rule="disk-write", reason=f"dd writing to the device {arg[3:]!r}")
    return None


def _device_operands(cmd: SimpleCommand) -> Violation | None:
    for arg in cmd.argv[1:]:
        if _is_device(arg):
            return Violation(rule="disk-write", reason=f"{cmd.program} writing to the device {arg!r}")
    return None


# --------------------------------------------------------------------------------------------------
# Cross-cutting rules.


def _download_to_shell(cmd: SimpleCommand) -> Violation | None:
    program = cmd.program
    downloaded = [p for p in cmd.substituted if p in DOWNLOADERS]
    if downloaded and (is_executor(program) or is_dynamic(program)):
        return Violation(
            rule="download-to-shell",
            reason=f"{program} runs what {downloaded[0]} downloads (substitution)",
        )
    if executes_stdin(cmd.argv) or ("xargs" in cmd.wrappers and is_executor(program)):
        feeders = [argv[0] for argv in cmd.stdin if argv and argv[0] in DOWNLOADERS]
        if feeders:
            return Violation(
                rule="download-to-shell",
                reason=f"{program} runs what {feeders[0]} downloads (pipe)",
            )
    return None


def _privilege(cmd: SimpleCommand) -> Violation | None:
    for name in (*cmd.wrappers, cmd.program):
        if name in PRIVILEGE:
            return Violation(
                rule="privilege-escalation", reason=f"{name} runs commands with raised privileges"
            )
    return None


def _redirect(redirect: Redirect) -> Violation | None:
    if redirect.op in _WRITE_OPS and _is_device(redirect.target):
        return Violation(rule="disk-write", reason=f"redirection into the device {redirect.target!r}")
    return None


def _fork_bomb(commands: Sequence[SimpleCommand]) -> Violation | None:
    for cmd in commands:
        if cmd.program in cmd.functions and (cmd.in_pipeline or cmd.background):
            return Violation(
                rule="fork-bomb",
                reason=f"function {cmd.program!r} calls itself in a pipeline or in the background",
            )
    return None


def _program_rule(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    program = cmd.program
    match program:
        case "rm":
            return _rm(cmd, ctx)
        case "find":
            return _find(cmd, ctx)
        case "chmod" | "chown" | "chgrp":
            return _chmod(cmd, ctx)
        case "git":
            return _git(cmd)
        case "dd":
            return _dd(cmd)
        case "rsync":
            return _rsync(cmd, ctx)
        case "mke2fs":
            return Violation(rule="disk-write", reason=f"{program} creates a filesystem")
        case _ if program.startswith("mkfs"):
            return Violation(rule="disk-write", reason=f"{program} creates a filesystem")
        case _ if program in _DEVICE_WRITERS:
            return _device_operands(cmd)
        case _ if is_dynamic(program):
            return _unknown_program(cmd, ctx)
        case _:
            return None


def _unknown_program(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``$X -rf /``, ``$(which git) reset --hard``: judge the arguments as if the program were one of
    those whose arguments make them dangerous."""
    for candidate in ("rm", "git", "chmod", "dd"):
        found = _program_rule(replace(cmd, argv=(candidate, *cmd.argv[1:])), ctx)
        if found is not None:
            reason = f"unknown program {cmd.program!r} with arguments that would be: {found.reason}"
            return replace(found, reason=reason)
    return None


_COMMAND_RULES: tuple[Callable[[SimpleCommand, RuleContext], Violation | None], ...] = (
    _program_rule,
    lambda cmd, _ctx: _download_to_shell(cmd),
    lambda cmd, _ctx: _privilege(cmd),
)


def find_violation(script: ParsedScript, ctx: RuleContext) -> Violation | None:
    """The first built-in rule ``script`` breaks, in the documented order, or ``None``."""
    found = _fork_bomb(script.commands)
    if found is not None:
        return found
    ctx = replace(ctx, cd_targets=_cd_targets(script.commands, ctx))
    for cmd in script.commands:
        for rule in _COMMAND_RULES:
            found = rule(cmd, ctx)
            if found is not None:
                return found
    for redirect in script.redirects:
        found = _redirect(redirect)
        if found is not None:
            return found
    return None
