"""The built-in safety rules: always on, judged on parsed commands, never overridable.

Each rule is a function of one normalised ``SimpleCommand`` (or of the whole script, for fork bombs,
redirections and code we cannot see) and a ``RuleContext``; it returns a ``Violation`` naming a stable
rule id, or ``None``. ``find_violation`` runs them in a fixed order and returns the first that fires:
script-level fork bomb and opaque code first, then every command in execution order (for each: the
program-specific rule, git, whole-system commands, download-to-shell, decoder-to-shell, credentials,
written paths, privilege escalation, links, more of the machine, secrets shown, shell escapes and
command lines held in unknown variables), then redirections, then files written from a download or
decoder and run later, repositories cloned and run. So ``sudo rm -rf /`` reports ``rm-root``, the more
specific reason. Path judgments live in ``_files`` (through ``_links``), git in ``_git``, whole-system
commands in ``_system`` and ``_machine``, secrets shown in ``_secret_use``; files the command writes and
then runs are followed by the walker (``_later``).

Documented choices:

* ``git push`` with any plain force (``--force``, ``-f``, a ``+refspec``) is declined even when
  ``--force-with-lease`` is also given: only lease-protected forces pass.
* ``--delete`` / ``:ref`` deletions are declined for ``main`` and ``master`` only.
* ``rm`` needs ``-r``/``-R``/``--recursive`` (or ``--no-preserve-root``; GNU abbreviations such as
  ``--recu`` count) to be judged as ``rm-root``; any ``rm`` of a vital path is ``vital-path``.
  A recursive ``rm`` whose target cannot be resolved (``rm -rf $R``, ``rm -rf "$(cmd)"``) is declined
  (``dynamic-command``), and so is removing a ``.git`` directory (``git-destroy``).
* ``chmod``/``chown``/``chgrp -R`` are declined on protected paths and on any absolute or home path
  outside the working directory and writable roots (any absolute path when no working directory is known).
* A write to any ``/dev`` node other than the harmless ones (``null``, ``zero``, ``tty``, ``stdout``,
  ``fd/*`` ...) counts as a disk write.
* Relative targets are resolved against the request's ``cwd`` when known and against every directory the
  script ``cd``s into (``cd / && rm -rf *``); ``find <protected> -delete`` (or ``-exec rm``) and
  ``rsync --delete ... <protected>`` count as ``rm-root``; ``xargs rm -rf`` fed by ``echo``/``printf``/
  ``find`` gets those words as operands.
* A program name we cannot resolve (``$X -rf /``, ``$(which git) reset --hard``, ``/b?n/r?``) is judged
  as if it were each program that has a rule here, with ``rm`` taken as recursive.
* A pipeline runs what a download feeds it when a later stage is a shell or interpreter reading its
  code from standard input (``sh``, ``bash -s``, ``python -``, ``source /dev/stdin``, ``xargs bash -c``);
  ``python -m json.tool``, ``python -c CODE``, ``jq`` and ``sh script.sh`` read data, not code. The same
  with a decoder (``base64 -d``, ``xxd -r``, ``rev``, ``tr`` ...) is ``decoder-to-shell``; so is a file
  written from a download or decoder and then run (``curl -o x.sh URL && sh x.sh``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Final

from agent_fleet.policy.bash._code import UNKNOWN
from agent_fleet.policy.bash._shell import ParsedScript, Redirect, SimpleCommand
from agent_fleet.policy.bash._unwrap import (
    PRIVILEGE,
    expand_braces,
    is_dynamic,
    normalise_program,
)
from agent_fleet.policy.rules._execution import RULES as EXECUTION_RULES
from agent_fleet.policy.rules._execution import (
    cloned_then_run,
    decoder_to_shell,
    download_to_shell,
    lone_dynamic,
    opaque_script,
    run_later,
    shell_escape,
    unresolved_program,
)
from agent_fleet.policy.rules._files import RULES as FILE_RULES
from agent_fleet.policy.rules._files import (
    credential_violation,
    leaked_later,
    path_violation,
    redirect_violation,
)
from agent_fleet.policy.rules._flags import LONG_OPTIONS, canonical, short_flags
from agent_fleet.policy.rules._git import RULES as GIT_RULES
from agent_fleet.policy.rules._git import git_violation, lease_on_default
from agent_fleet.policy.rules._links import (
    LINK_RULES,
    link_violation,
    links_made,
    through_links,
    virtual_links,
)
from agent_fleet.policy.rules._machine import machine_violation
from agent_fleet.policy.rules._secret_use import secret_exposure
from agent_fleet.policy.rules._system import RULES as SYSTEM_RULES
from agent_fleet.policy.rules._system import system_violation
from agent_fleet.policy.rules._targets import inside, protected_reason, resolve_target
from agent_fleet.policy.rules._unseen import UNSEEN_RULES, deletes_sources, unseen_operands
from agent_fleet.policy.rules._verdict import VIRTUAL_CWD, RuleContext, Violation

__all__ = ["BUILTIN_RULES", "RULES", "RuleContext", "Violation", "find_violation"]

#: The ids this module's rules decide, with what each guards against.
RULES: dict[str, str] = {
    "rm-root": "recursive removal of /, the home directory, a system directory or a glob over one",
    "recursive-chmod-root": "recursive chmod/chown/chgrp of a protected path or one outside the workspace",
    "disk-write": "mkfs, dd of=/dev/..., shred/wipefs of devices, redirections into device nodes",
    "privilege-escalation": "sudo, sudoedit, doas, su, pkexec, run0",
    "fork-bomb": "a function that calls itself in a pipeline or in the background",
}

#: Every id a built-in rule may decide, gathered from the tables the rule modules keep next to the
#: rules (a test checks that every id a rule can return is in one of them).
BUILTIN_RULES: dict[str, str] = {
    **RULES,
    **GIT_RULES,
    **EXECUTION_RULES,
    **SYSTEM_RULES,
    **FILE_RULES,
    **LINK_RULES,
    **UNSEEN_RULES,
}

_HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout"}
    | {"/dev/stderr", "/dev/tty", "/dev/ptmx"}
)
_HARMLESS_DEVICE_TREES = ("/dev/fd/", "/dev/pts/", "/dev/shm/", "/dev/tcp/", "/dev/udp/", "/dev/mqueue/")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&", "&>|"})
_DEVICE_WRITERS = frozenset(
    {"shred", "wipefs", "blkdiscard", "mkswap", "fdisk", "sfdisk", "cfdisk", "sgdisk", "gdisk", "parted"}
    | {"tee", "cp", "mv", "pv", "badblocks", "hdparm", "nvme"}
    | {"debugfs", "tune2fs", "e2fsck", "fsck", "xfs_repair", "resize2fs", "zerofree", "dumpe2fs"}
)


# --------------------------------------------------------------------------------------------------
# Helpers.


_GLUED_PREFIX = re.compile(
    r"^(?:\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\([^)]*\)|`[^`]*`)+([A-Za-z0-9._][^$`]*)$"
)


def _targets(words: Iterable[str], ctx: RuleContext) -> Iterable[tuple[str, str | None]]:
    cwds = dict.fromkeys((ctx.cwd, *ctx.cd_targets))
    for word in words:
        for variant in expand_braces(word):
            for cwd in cwds:
                path = resolve_target(variant, cwd=cwd, home=ctx.home)
                yield variant, path
                for landed in through_links(path, ctx) if path is not None else ():
                    yield variant, landed
            for landed in virtual_links(variant, ctx):
                yield variant, landed
            glued = _GLUED_PREFIX.match(variant)
            if glued is not None:  # `${x}etc`: an unknown prefix may end in `/` (`x=${PATH:0:1}`)
                yield variant, resolve_target("/" + glued.group(1), cwd=None, home=ctx.home)


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
    # With no cwd, a stand-in that still shows `cd ..` climbing out of the working directory.
    current: str | None = ctx.cwd or VIRTUAL_CWD
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
    for redirect in cmd.redirects:
        if redirect.op in ("<<<", "<<", "<<-"):
            words.extend(redirect.target.split())
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


_DYNAMIC_TARGET = re.compile(r"^(?:\$\{[^}]*\}|\$[A-Za-z_0-9@*#?!$-]+|\$\(.*\)|`.*`|[/.*\s])*$", re.DOTALL)


def _shown(word: str) -> str:
    """A target for a reason: a path inline code computes (``$?`` in ``_code``) is said so."""
    if word == UNKNOWN:
        return "a path the inline code computes"
    return repr(word.replace(UNKNOWN, "<computed>")) if UNKNOWN in word else repr(word)


def _unresolvable(word: str) -> bool:
    """A target whose value is wholly unknown: ``$R``, ``"$(cmd)"``, ``${X}/``; not ``$TMPDIR/foo``."""
    return is_dynamic(word) and _DYNAMIC_TARGET.match(word) is not None


def _rm(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    flags, operands = short_flags(cmd.argv[1:], "rm")
    recursive = bool(flags & {"r", "R", "recursive"})
    if "no-preserve-root" in flags:
        return Violation(rule="rm-root", reason="rm --no-preserve-root removes the root directory")
    targets = [*operands, *_xargs_input(cmd)]
    for word in targets:
        if ".git" in posixpath.normpath(word.rstrip("/*") or "/").split("/"):
            return Violation(rule="git-destroy", reason=f"removing {word!r} deletes the repository's history")
    if not recursive:
        return None
    hit = _protected(targets, ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"recursive removal of {hit[0]!r}: {hit[1]}")
    if "xargs" in cmd.wrappers and any(
        w in ("-a", "--arg-file") or w.startswith("--arg-file=") for w in cmd.written
    ):
        return Violation(rule="dynamic-command", reason="xargs rm -r of names read from a file")
    for word in targets:
        if _unresolvable(word):
            reason = f"recursive removal of {_shown(word)}, whose value cannot be known"
            return Violation(rule="dynamic-command", reason=reason)
    return None


def _mv(cmd: SimpleCommand) -> Violation | None:
    _, operands = short_flags(cmd.argv[1:])
    for word in operands[:-1]:
        if ".git" in posixpath.normpath(word.rstrip("/") or "/").split("/"):
            return Violation(
                rule="git-destroy", reason=f"moving {word!r} away takes the repository's history"
            )
    return _device_operands(cmd)


def _rsync(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    flags, operands = short_flags(cmd.argv[1:])
    if not any(flag.startswith("del") for flag in flags) or not operands:  # --del, --delete-after ...
        return None
    hit = _protected(operands[-1:], ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"rsync --delete into {hit[0]!r}: {hit[1]}")
    return _dynamic_target(cmd, operands[-1:], "rsync --delete into")


def _find(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    args = cmd.argv[1:]
    deletes = "-delete" in args
    for i, arg in enumerate(args[:-1]):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            deletes = deletes or normalise_program(args[i + 1]) in ("rm", "shred", "unlink", "rmdir")
    if not deletes:
        return None
    gits = [s for s in _find_starts(args) if ".git" in posixpath.normpath(s).split("/")]
    for i, arg in enumerate(args[:-1]):
        if gits or (arg in ("-name", "-iname", "-path", "-wholename", "-regex") and ".git" in args[i + 1]):
            return Violation(rule="git-destroy", reason="find deleting .git directories deletes history")
    found = _dynamic_target(cmd, _find_starts(args), "find deleting under")
    if found is not None:
        return found
    starts = [s for s in _find_starts(args) if s.rstrip("/") not in _TEMP_DIRS]  # find /tmp -name x -delete
    hit = _protected(starts, ctx)
    if hit is not None:
        return Violation(rule="rm-root", reason=f"find deleting under {hit[0]!r}: {hit[1]}")
    return None


_TEMP_DIRS = frozenset({"/tmp", "/var/tmp", "/dev/shm"})
_CHMOD_LETTERS = frozenset("cfvR")
_CHOWN_LETTERS = frozenset("cfvRhHLP")


def _chmod(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    letters = _CHMOD_LETTERS if cmd.program == "chmod" else _CHOWN_LETTERS
    options = LONG_OPTIONS.get(cmd.program, ())
    recursive = False
    has_reference = False
    operands: list[str] = []
    args = cmd.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            name = canonical(arg[2:].partition("=")[0], options)
            recursive = recursive or name == "recursive"
            has_reference = has_reference or name == "reference"
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= letters:
            recursive = recursive or "R" in arg
        else:
            operands.append(arg)  # includes chmod modes like -w, which are operands
    if not recursive:
        return None
    targets = operands if has_reference else operands[1:]
    found = _dynamic_target(cmd, targets, f"recursive {cmd.program} of")
    if found is not None:
        return found
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


def _dd(cmd: SimpleCommand) -> Violation | None:
    for arg in cmd.argv[1:]:
        if arg.startswith("of=") and _is_device(arg[3:]):
            return Violation(rule="disk-write", reason=f"dd writing to the device {arg[3:]!r}")
    return _dynamic_target(cmd, [arg[3:] for arg in cmd.argv[1:] if arg.startswith("of=")], "dd writing to")


def _device_operands(cmd: SimpleCommand) -> Violation | None:
    for arg in cmd.argv[1:]:
        if _is_device(arg):
            return Violation(rule="disk-write", reason=f"{cmd.program} writing to the device {arg!r}")
    if cmd.program in ("shred", "wipefs", "blkdiscard"):  # they destroy what they are given
        return _dynamic_target(cmd, short_flags(cmd.argv[1:])[1], cmd.program)
    return None


def _dynamic_target(cmd: SimpleCommand, words: Sequence[str], what: str) -> Violation | None:
    """A destructive command's target whose value cannot be known (``chmod -R 777 $X``)."""
    for word in words:
        if _unresolvable(word):
            reason = f"{what} {_shown(word)}, whose value cannot be known"
            return Violation(rule="dynamic-command", reason=reason)
    return None


# --------------------------------------------------------------------------------------------------
# Cross-cutting rules.


# Programs whose command runs on another machine: a sudo after one of them raises privileges there, not
# here (the other rules still judge what it runs).
_REMOTE: Final = frozenset({"ssh", "autossh", "mosh"})


def _privilege(cmd: SimpleCommand) -> Violation | None:
    for name in (*cmd.wrappers, cmd.program):
        if name in _REMOTE:
            return None
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
        case "rm" | "srm" | "wipe":
            return _rm(cmd, ctx)
        case "trash" | "trash-put" | "rmtrash" | "gtrash":  # they take whole trees away, flag or not
            return _rm(replace(cmd, argv=("rm", "-r", *cmd.argv[1:])), ctx)
        case "mv":
            return _mv(cmd)
        case "find":
            return _find(cmd, ctx)
        case "chmod" | "chown" | "chgrp":
            return _chmod(cmd, ctx)
        case "git":
            return git_violation(cmd.argv)
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
        case _ if unresolved_program(program):
            return _unknown_program(cmd, ctx)
        case _:
            return None


#: Programs some rule here judges: what an unresolved or globbed program name is tried as.
_RULE_PROGRAMS = (
    "rm",
    "git",
    "chmod",
    "chown",
    "dd",
    "rsync",
    "find",
    "kill",
    "pkill",
    "killall",
    "shred",
    "mkfs",
    "mkfs.ext4",
    "mkfs.xfs",
    "mkfs.vfat",
    "wipefs",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init",
    "systemctl",
    "iptables",
    "setenforce",
    "sysctl",
    "ufw",
    "killall5",
    "sudo",
    "su",
    "doas",
    "crontab",
    "passwd",
    "useradd",
    "usermod",
    "mount",
    "umount",
    "swapoff",
    "curl",
    "wget",
    "sh",
    "bash",
)


def _unknown_program(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``$X -rf /``, ``$(which git) reset --hard``, ``/b?n/r?``: judge the command as each program a
    glob could name, or (for an unknown name) as each program with a rule, ``rm`` taken as recursive."""
    program = cmd.program
    if not is_dynamic(program):
        named = [name for name in _RULE_PROGRAMS if re.fullmatch(_glob_regex(program), name)]
        if named:
            return Violation(
                rule="dynamic-command", reason=f"the program {program!r} is a glob that may name {named[0]}"
            )
    args = cmd.argv[1:]
    for candidate in ("rm", "git", "chmod", "dd", "kill", "find", "rsync"):
        argv = (candidate, *args) if candidate != "rm" else ("rm", "-r", *args)
        found = _program_rule(replace(cmd, argv=argv), ctx) or system_violation(argv)
        if found is not None:
            reason = f"unknown program {program!r} with arguments that would be: {found.reason}"
            return replace(found, reason=reason)
    return None


def _glob_regex(pattern: str) -> str:
    import fnmatch

    return fnmatch.translate(pattern)


def _privilege_rule(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    return _privilege(cmd) or opaque_script(cmd)


_COMMAND_RULES: tuple[Callable[[SimpleCommand, RuleContext], Violation | None], ...] = (
    _program_rule,
    lambda cmd, _ctx: download_to_shell(cmd),
    lambda cmd, _ctx: decoder_to_shell(cmd),
    _privilege_rule,
    lambda cmd, _ctx: system_violation(cmd.argv),
    credential_violation,
    path_violation,
    link_violation,
    machine_violation,
    secret_exposure,
    lambda cmd, _ctx: shell_escape(cmd) or lone_dynamic(cmd),
    unseen_operands,
    lambda cmd, _ctx: deletes_sources(cmd),
)


def find_violation(script: ParsedScript, ctx: RuleContext) -> Violation | None:
    """The first built-in rule ``script`` breaks, in the documented order, or ``None``."""
    found = _fork_bomb(script.commands)
    if found is not None:
        return found
    ctx = replace(ctx, cd_targets=_cd_targets(script.commands, ctx))
    ctx = replace(ctx, links=links_made(script.commands, ctx))
    for cmd in script.commands:
        for rule in _COMMAND_RULES:
            found = rule(cmd, ctx)
            if found is not None:
                return found
    for redirect in script.redirects:
        found = _redirect(redirect) or redirect_violation(redirect, ctx)
        if found is not None:
            return found
    if script.opaque:
        return Violation(rule="opaque-code", reason=script.opaque[0])
    return (
        run_later(script.commands, ctx)
        or cloned_then_run(script.commands)
        or leaked_later(script.commands, ctx)
        or lease_on_default(script.commands)
    )
