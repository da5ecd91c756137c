"""Argv-level knowledge of programs that run other programs.

Pure functions over argument lists, no parsing of shell syntax: which programs are transparent wrappers
(``env``, ``sudo``, ``nohup``, ``timeout 5`` ...) and what they run, which ones carry an inline script
(``sh -c SCRIPT``, ``eval``, ``watch``), which ones execute code read from standard input
(``curl ... | sh``), and what ``find -exec`` runs. Option tables are deliberately approximate: when an
option is unknown we treat it as a flag, which at worst makes us look at the wrong word as the program
-- never skip a command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DOWNLOADERS",
    "EXECUTORS",
    "INTERPRETERS",
    "PRIVILEGE",
    "SHELLS",
    "exec_commands",
    "executes_stdin",
    "expand_braces",
    "inline_script",
    "is_dynamic",
    "normalise_program",
    "split_wrapper",
]

SHELLS = frozenset(
    {"sh", "bash", "rbash", "zsh", "dash", "ksh", "ksh93", "mksh", "pdksh", "oksh", "ash", "yash", "posh"}
    | {"fish", "csh", "tcsh"}
)
_INTERPRETER_RE = re.compile(
    r"(python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|pwsh|osascript)[0-9.]*"
)
#: Interpreters named in the rules; ``python3.12`` and friends match by pattern (``is_interpreter``).
INTERPRETERS = frozenset(
    {"python", "python3", "pypy3", "perl", "ruby", "node", "nodejs", "php", "lua", "pwsh"}
)
#: Programs that execute text they are given: shells, interpreters, ``eval`` and ``source``.
EXECUTORS = SHELLS | INTERPRETERS | frozenset({"eval", "source", "."})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request"})
PRIVILEGE = frozenset({"sudo", "sudoedit", "doas", "su", "pkexec", "run0"})

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


def expand_braces(word: str, limit: int = 64) -> list[str]:
    """Naive brace expansion (``{/,x}`` -> ``/``, ``x``), capped at ``limit`` results."""
    results = [word]
    changed = True
    while changed and len(results) < limit:
        changed = False
        expanded: list[str] = []
        for item in results:
            match = _BRACES.search(item)
            if match is None:
                expanded.append(item)
                continue
            changed = True
            for option in match.group(1).split(","):
                expanded.append(item[: match.start()] + option + item[match.end() :])
        results = expanded[:limit]
    return results


def normalise_program(word: str) -> str:
    """``/bin/rm`` -> ``rm``. Words with unresolved expansions (``$X``, ``$(...)``) are kept as they are."""
    if is_dynamic(word):
        return word
    base = word.rstrip("/").rsplit("/", 1)[-1]
    return base or word


def is_dynamic(word: str) -> bool:
    """True when the word still holds an expansion we could not resolve, so its value is unknown."""
    return "$" in word or "`" in word


def is_interpreter(program: str) -> bool:
    return _INTERPRETER_RE.fullmatch(program) is not None


def is_executor(program: str) -> bool:
    return program in EXECUTORS or is_interpreter(program)


@dataclass(slots=True)
class _Opts:
    index: int = 0
    flags: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)


def _options(
    args: Sequence[str],
    short_values: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    numeric: bool = False,
) -> _Opts:
    """Skip leading options (getopt style: clusters, attached or separate values, ``--``)."""
    opts = _Opts()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            opts.flags.add(name)
            if not eq and name in long_values:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            opts.values[name] = value
            i += 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            if numeric and arg[1:].isdigit():
                i += 1
                continue
            for j in range(1, len(arg)):
                letter = arg[j]
                opts.flags.add(letter)
                if letter in short_values:
                    value = arg[j + 1 :]
                    if not value:
                        value = args[i + 1] if i + 1 < len(args) else ""
                        i += 1
                    opts.values[letter] = value
                    break
            i += 1
            continue
        break
    opts.index = i
    return opts


def _skip_assignments(args: Sequence[str]) -> list[str]:
    i = 0
    while i < len(args) and _ASSIGNMENT.match(args[i]):
        i += 1
    return list(args[i:])


def _env(args: Sequence[str]) -> list[str] | None:
    args = list(args)
    while args and args[0] == "-":  # a lone "-" means -i
        args = args[1:]
    opts = _options(args, "uCSP", frozenset({"unset", "chdir", "split-string", "argv0"}))
    rest = list(args[opts.index :])
    split = opts.values.get("S", opts.values.get("split-string"))
    if split:
        try:
            rest = shlex.split(split) + rest
        except ValueError:
            rest = split.split() + rest
    return _skip_assignments(rest)


def _command(args: Sequence[str]) -> list[str] | None:
    opts = _options(args)
    if opts.flags & {"v", "V"}:  # command -v only looks the name up
        return None
    return list(args[opts.index :])


def _plain(
    short_values: str = "", long_values: frozenset[str] = frozenset()
) -> Callable[[Sequence[str]], list[str] | None]:
    def strip(args: Sequence[str]) -> list[str] | None:
        return list(args[_options(args, short_values, long_values).index :])

    return strip


def _nice(args: Sequence[str]) -> list[str] | None:
    return list(args[_options(args, "n", frozenset({"adjustment"}), numeric=True).index :])


def _timeout(args: Sequence[str]) -> list[str] | None:
    rest = args[_options(args, "sk", frozenset({"signal", "kill-after"})).index :]
    return list(rest[1:])  # the duration


def _sudo(args: Sequence[str]) -> list[str] | None:
    long_values = frozenset(
        {"user", "group", "close-from", "chdir", "host", "prompt", "role", "type", "command-timeout"}
        | {"other-user", "chroot"}
    )
    opts = _options(args, "ugCDhprtTUR", long_values)
    return _skip_assignments(args[opts.index :])


def _ionice(args: Sequence[str]) -> list[str] | None:
    opts = _options(args, "cnpPu")
    if {"p", "P", "u"} & opts.values.keys():
        return None
    return list(args[opts.index :])


def _chrt(args: Sequence[str]) -> list[str] | None:
    opts = _options(args, "TPD")
    if "p" in opts.flags:
        return None
    rest = list(args[opts.index :])
    if rest and rest[0].isdigit():
        rest = rest[1:]
    return rest


def _taskset(args: Sequence[str]) -> list[str] | None:
    opts = _options(args)
    if "p" in opts.flags or "pid" in opts.flags:
        return None
    return list(args[opts.index + 1 :])  # the CPU mask or list


def _busybox(args: Sequence[str]) -> list[str] | None:
    if args and args[0].startswith("-"):
        return None
    return list(args)


def _watch(args: Sequence[str]) -> list[str] | None:
    opts = _options(args, "n", frozenset({"interval"}))
    if opts.flags & {"x", "exec"}:  # watch -x runs argv directly; otherwise it is an inline script
        return list(args[opts.index :])
    return None


_WRAPPERS: dict[str, Callable[[Sequence[str]], list[str] | None]] = {
    "env": _env,
    "command": _command,
    "builtin": _plain(),
    "exec": _plain("a"),
    "nice": _nice,
    "nohup": _plain(),
    "setsid": _plain(),
    "nocorrect": _plain(),
    "noglob": _plain(),
    "unbuffer": _plain(),
    "chronic": _plain(),
    "timeout": _timeout,
    "time": _plain("fo", frozenset({"format", "output"})),
    "xargs": _plain(
        "adEILnPs",
        frozenset({"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}),
    ),
    "sudo": _sudo,
    "doas": _plain("uC"),
    "pkexec": _plain("", frozenset({"user"})),
    "run0": _plain("uDM", frozenset({"user", "unit", "property", "description", "slice", "chdir"})),
    "stdbuf": _plain("ioe", frozenset({"input", "output", "error"})),
    "ionice": _ionice,
    "chrt": _chrt,
    "taskset": _taskset,
    "busybox": _busybox,
    "watch": _watch,
}


def split_wrapper(argv: Sequence[str]) -> list[str] | None:
    """If ``argv`` is a transparent wrapper, the argv it runs (possibly empty); else ``None``."""
    if not argv:
        return None
    strip = _WRAPPERS.get(argv[0])
    return None if strip is None else strip(argv[1:])


@dataclass(slots=True)
class _ShellOpts:
    command_mode: bool = False
    stdin_mode: bool = False
    index: int = 0


def _shell_options(args: Sequence[str]) -> _ShellOpts:
    opts = _ShellOpts()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--", "-"):
            i += 1
            break
        if arg.startswith("--"):
            if arg in ("--rcfile", "--init-file"):
                i += 1
            elif arg == "--command":  # fish
                opts.command_mode = True
            i += 1
            continue
        if arg[:1] in ("-", "+") and len(arg) > 1:
            letters = arg[1:]
            if "c" in letters and arg[0] == "-":
                opts.command_mode = True
            if "s" in letters:
                opts.stdin_mode = True
            if "o" in letters or "O" in letters:
                i += 1  # the option name
            i += 1
            continue
        break
    opts.index = i
    return opts


def inline_script(argv: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """``(script, positional parameters)`` for commands that run a script given as words, else ``None``.

    ``sh -c SCRIPT [$0 $1 ...]``, ``eval WORDS``, ``watch WORDS``, ``alias NAME=SCRIPT``,
    ``trap SCRIPT SIGNAL``. The parameters are ``$0``, ``$1`` ... for ``sh -c`` (empty otherwise).
    """
    if not argv:
        return None
    program, args = argv[0], argv[1:]
    match program:
        case _ if program in SHELLS:
            opts = _shell_options(args)
            if opts.command_mode and opts.index < len(args):
                return args[opts.index], tuple(args[opts.index + 1 :])
            for arg in args:  # fish --command=SCRIPT
                if arg.startswith("--command="):
                    return arg.partition("=")[2], ()
            return None
        case "eval":
            return " ".join(args), ()
        case "watch":
            watch = _options(args, "n", frozenset({"interval"}))
            if watch.flags & {"x", "exec"}:
                return None
            return " ".join(args[watch.index :]), ()
        case "alias":
            bodies = [arg.partition("=")[2] for arg in args if "=" in arg]
            return ("\n".join(bodies), ()) if bodies else None
        case "trap":
            rest = list(args[1:] if args[:1] == ["--"] else args)
            if len(rest) >= 2 and not rest[0].startswith("-"):
                return rest[0], ()
            return None
        case _:
            return None


# For each interpreter family: option letters that give the code on the command line (so stdin is data),
# and option letters that take a separate value.
_CODE_FLAGS: tuple[tuple[re.Pattern[str], str, str, frozenset[str]], ...] = (
    (re.compile(r"(python|pypy)[0-9.]*"), "cm", "WXQ", frozenset()),
    (re.compile(r"perl[0-9.]*"), "eE", "", frozenset()),
    (re.compile(r"ruby[0-9.]*"), "e", "rICFE", frozenset()),
    (re.compile(r"(node|nodejs)[0-9.]*"), "ep", "r", frozenset({"eval", "print", "require"})),
    (re.compile(r"php[0-9.]*"), "rfBRFE", "dcz", frozenset()),
    (re.compile(r"(lua|luajit)[0-9.]*"), "e", "l", frozenset()),
    (re.compile(r"tclsh[0-9.]*|pwsh|osascript"), "ec", "", frozenset({"command"})),
)


def executes_stdin(argv: Sequence[str]) -> bool:
    """True when ``argv`` is a shell or interpreter that would run code read from standard input."""
    if not argv:
        return False
    program, args = argv[0], argv[1:]
    if program in ("source", "."):
        return bool(args) and args[0] in _STDIN_FILES
    if program in SHELLS:
        opts = _shell_options(args)
        if opts.command_mode:
            return False
        return opts.stdin_mode or opts.index >= len(args) or args[opts.index] in _STDIN_FILES
    for pattern, code, values, long_code in _CODE_FLAGS:
        if pattern.fullmatch(program) is None:
            continue
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "-":
                return True
            if arg == "--":
                return i + 1 >= len(args) or args[i + 1] == "-"
            if arg.startswith("--"):
                if arg[2:].partition("=")[0] in long_code:
                    return False
                i += 1
                continue
            if arg.startswith("-") and len(arg) > 1:
                letters = arg[1:]
                if any(letter in code for letter in letters):
                    return False
                if letters[-1] in values:
                    i += 1
                i += 1
                continue
            return arg in _STDIN_FILES  # otherwise a script file, and stdin is data for it
        return True
    return False


def exec_commands(argv: Sequence[str]) -> list[list[str]]:
    """The commands ``find ... -exec CMD ;`` (and ``-execdir``, ``-ok``, ``-okdir``) runs."""
    if not argv or argv[0] != "find":
        return []
    found: list[list[str]] = []
    i = 1
    while i < len(argv):
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+"):
                j += 1
            if j > i + 1:
                found.append(list(argv[i + 1 : j]))
            i = j
        i += 1
    return found
