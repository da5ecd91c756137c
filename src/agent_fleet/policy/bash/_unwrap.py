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
    "DECODERS",
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
#: Programs whose output is a transformation of their input: piped into a shell, nothing can be judged.
DECODERS = frozenset(
    {"base64", "base32", "basenc", "xxd", "uudecode", "rev", "tr", "openssl", "gpg", "od", "hexdump"}
    | {"gunzip", "gzip", "zcat", "bzcat", "bunzip2", "xzcat", "unxz", "xz", "zstd", "zstdcat", "lz4cat"}
    | {"brotli", "iconv", "recode", "uncompress", "compress", "rot13", "caesar", "ruby", "perl", "python"}
    | {"python3", "node", "php", "awk", "gawk", "sed", "cut", "paste", "fold", "dd", "tac", "sort"}
    | {"unzip", "bsdtar", "tar", "cpio", "ar", "7z", "7za", "zpaq", "lua", "jq", "yq", "xargs"}
    | {"bzip2", "lz4", "lzma", "unlzma", "unzstd", "pigz", "pbzip2", "lzip", "lzop", "unpigz"}
)
PRIVILEGE = frozenset({"sudo", "sudoedit", "doas", "su", "pkexec", "run0"})

_ASSIGNMENT = re.compile(r"[^=\s-][^=]*=")  # env and sudo take any NAME=VALUE (`BASH_FUNC_f%%=...`)
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


@dataclass(frozen=True, slots=True)
class _Spec:
    """A wrapper that runs its operands as a command: ``short``/``long`` options take a value, ``skip``
    operands come before the command (``chroot DIR``, ``flock FILE``), ``sub`` is a required first word
    (``uv run``), ``inert`` options mean it runs nothing (``sudo -l``)."""

    short: str = ""
    long: frozenset[str] = frozenset()
    skip: int = 0
    sub: tuple[str, ...] = ()
    inert: frozenset[str] = frozenset()


def _spec(short: str = "", long: str = "", skip: int = 0, sub: str = "", inert: str = "") -> _Spec:
    return _Spec(short, frozenset(long.split()), skip, tuple(sub.split()), frozenset(inert.split()))


#: Transparent wrappers described as data: ``name -> _Spec``. Unknown options count as flags, which at
#: worst makes us look at an option's value as the program (never skips a command).
WRAPPER_SPECS: dict[str, _Spec] = {
    "builtin": _spec(),
    "exec": _spec("a"),
    "nohup": _spec(),
    "setsid": _spec(),
    "nocorrect": _spec(),
    "noglob": _spec(),
    "unbuffer": _spec(),
    "chronic": _spec(),
    "coproc": _spec(),
    "time": _spec("fo", "format output"),
    "xargs": _spec(
        "adEILnPs", "arg-file delimiter max-args max-procs max-chars process-slot-var max-lines replace"
    ),
    "doas": _spec("uC"),
    "pkexec": _spec("", "user"),
    "run0": _spec("uDM", "user unit property description slice chdir"),
    "stdbuf": _spec("ioe", "input output error"),
    "toybox": _spec(inert="help"),
    "unshare": _spec("SGRwt", "setuid setgid root wd"),
    "flock": _spec("wE", "timeout conflict-exit-code", skip=1, inert="c command"),
    "strace": _spec("oeEpPsuaIbOSXU", "output signal trace-path"),
    "ltrace": _spec("oeEpPsuaIbnAlL", "output"),
    "systemd-run": _spec(
        "upEMH",
        "unit property setenv uid gid working-directory machine host slice description on-calendar"
        " on-active on-boot on-unit-active timer-property path-property socket-property",
    ),
    "setpriv": _spec("", "reuid regid groups inh-caps ambient-caps bounding-set securebits selinux-label"),
    "runuser": _spec("ugG", "user group supp-group", inert="c command l login"),
    "chroot": _spec("", "userspec groups", skip=1),
    "nsenter": _spec("tSGrwF", "target setuid setgid root wd"),
    "firejail": _spec(),
    "cgexec": _spec("g"),
    "numactl": _spec("CNmplPi", "cpunodebind physcpubind membind preferred localalloc interleave"),
    "prlimit": _spec("p", "pid"),
    "trickle": _spec("udwtlLs"),
    "torsocks": _spec("uapP"),
    "torify": _spec(),
    "proxychains": _spec("f"),
    "proxychains4": _spec("f"),
    "faketime": _spec("", "", skip=1),
    "catchsegv": _spec(),
    "valgrind": _spec(),
    "eatmydata": _spec(),
    "fakeroot": _spec("ls"),
    "fakechroot": _spec(),
    "setarch": _spec("", "", skip=1),
    "linux32": _spec(),
    "linux64": _spec(),
    "daemonize": _spec("aceEopPluv"),
    "systemd-inhibit": _spec("", "what who why mode"),
    "dbus-run-session": _spec("", "config-file dbus-daemon"),
    "xvfb-run": _spec("nsfe", "server-num server-args auth-file error-file"),
    "tini": _spec("psel"),
    "dumb-init": _spec("r", "rewrite"),
    "gosu": _spec("", "", skip=1),
    "su-exec": _spec("", "", skip=1),
    "setuidgid": _spec("", "", skip=1),
    "chpst": _spec("ugUenlmdofpc/"),
    "ssh-agent": _spec("aEPt", inert="k s c l D"),
    "screen": _spec("cehpSsTt", "", inert="ls list r R x"),
    "rlwrap": _spec("aAcCfHlopPqsStw"),
    "cpulimit": _spec("lpe", "limit pid exe"),
    "runcon": _spec("urtl", "user role type range"),
    "systemd-cat": _spec("tp", "identifier priority"),
    "caffeinate": _spec("tw"),
    "entr": _spec(),
    "uv": _spec("p", "python with directory project", sub="run"),
    "poetry": _spec("C", "directory", sub="run"),
    "pipenv": _spec("", "", sub="run"),
    "pdm": _spec("p", "project", sub="run"),
    "hatch": _spec("e", "env", sub="run"),
    "bundle": _spec("", "", sub="exec"),
    "direnv": _spec("", "", skip=1, sub="exec"),
    "conda": _spec("npc", "name prefix cwd", sub="run"),
    "mamba": _spec("npc", "name prefix cwd", sub="run"),
    "pixi": _spec("e", "environment manifest-path", sub="run"),
    "distrobox-enter": _spec("n", "name"),
    "toolbox": _spec("c", "container", sub="run"),
    "flatpak-spawn": _spec(),
    "lxc-attach": _spec("nP", "name lxcpath"),
    "proot": _spec("rbwSq", "rootfs bind cwd"),
    "systemd-nspawn": _spec("DMuiEZ", "directory machine user image setenv chdir"),
    "dbus-launch": _spec(),
    "spawn": _spec(),  # expect's spawn, when an expect script is read as shell
    "sg": _spec("", "", skip=1, inert="c"),
}

_BWRAP_TWO = frozenset(
    [
        "--bind",
        "--ro-bind",
        "--dev-bind",
        "--bind-try",
        "--ro-bind-try",
        "--dev-bind-try",
        "--setenv",
        "--file",
        "--bind-data",
        "--ro-bind-data",
        "--symlink",
        "--chmod",
    ]
)


def _bwrap(args: Sequence[str]) -> list[str] | None:
    """``bwrap [--opt VALUE | --opt SRC DEST ...] [--] CMD ...``."""
    i = 0
    while i < len(args) and args[i].startswith("--"):
        if args[i] == "--":
            i += 1
            break
        if args[i] in _BWRAP_TWO:
            i += 3
        elif (
            args[i] in ("--unshare-all", "--share-net", "--die-with-parent", "--new-session", "--clearenv")
            or args[i].startswith("--unshare-")
            or args[i].startswith("--as-pid-1")
        ):
            i += 1
        else:
            i += 2
    return list(args[i:])


_SPECIAL_WRAPPERS: dict[str, Callable[[Sequence[str]], list[str] | None]] = {
    "bwrap": _bwrap,
    "env": _env,
    "command": _command,
    "nice": _nice,
    "timeout": _timeout,
    "sudo": _sudo,
    "ionice": _ionice,
    "chrt": _chrt,
    "taskset": _taskset,
    "busybox": _busybox,
    "watch": _watch,
}


def _by_spec(spec: _Spec, args: Sequence[str]) -> list[str] | None:
    args = list(args)
    for word in spec.sub:
        opts = _options(args, spec.short, spec.long)
        rest = args[opts.index :]
        if not rest or rest[0] != word:
            return None
        args = rest[1:]
    opts = _options(args, spec.short, spec.long)
    if opts.flags & spec.inert:
        return None
    rest = list(args[opts.index :])[spec.skip :]
    if spec.skip and rest[:1] and rest[0].startswith("-"):  # `flock FILE -c CMD`: options after the file
        more = _options(rest, spec.short, spec.long)
        if more.flags & spec.inert:
            return None
        rest = rest[more.index :]
    return rest


def split_wrapper(argv: Sequence[str]) -> list[str] | None:
    """If ``argv`` is a transparent wrapper, the argv it runs (possibly empty); else ``None``."""
    if not argv:
        return None
    special = _SPECIAL_WRAPPERS.get(argv[0])
    if special is not None:
        return special(argv[1:])
    spec = WRAPPER_SPECS.get(argv[0])
    return None if spec is None else _by_spec(spec, argv[1:])


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
    (re.compile(r"tclsh[0-9.]*|wish|expect|pwsh|osascript"), "ec", "", frozenset({"command"})),
    (re.compile(r"Rscript|julia|bun|deno|irb|jshell|groovy|scala|kotlinc?|ghci|swift"), "e", "", frozenset()),
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
