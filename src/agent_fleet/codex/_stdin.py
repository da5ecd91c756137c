"""Input written to a running command (a ``kind: "writeStdin"`` command approval), judged by what reads it.

codex names the input as the last word of ``write_stdin --session-id N INPUT`` (shell-quoted) and the
process by the ``itemId`` of the command that started it. The command (from its ``item/started``) is
parsed like any other; every simple command it runs may read the input (``cat | bash`` feeds bash):

- a shell with no script (``bash``, ``sh -i``, ``bash -s``): the input is a command, judged as one;
- an interpreter reading its program or a REPL from stdin (``python3``, ``node``, ``perl``, ``ruby``,
  ``php``, ``lua``): the input is inline code, judged as ``python3 -c INPUT`` would be;
- a program whose input is commands or code we cannot look into (database clients, remote shells,
  debuggers, editors, other REPLs): declined (``opaque-code``);
- anything else reads data: the input changes nothing the command's own approval did not cover.

The command itself is judged again too (it must still be acceptable).

A shell or REPL keeps what it was given before (a half-typed line, an alias, an import): the input is
judged after everything this process accepted before (``history``), so ``rm -rf `` then ``/`` is
``rm -rf /``. The history is bounded; past ``HISTORY_LIMIT`` the input is declined (``too-large``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final, Literal

from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision, UnparsableCommand, parse_command

__all__ = ["HISTORY_LIMIT", "StdinHistory", "stdin_decision", "stdin_requests", "stdin_text"]

HISTORY_LIMIT: Final = 64 * 1024
_PROCESSES: Final = 32

_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "ash", "yash", "fish"})
_SHELLS_C: Final = frozenset({"csh", "tcsh", "rc", "es", "xonsh", "nu", "elvish", "pwsh", "powershell"})
#: Interpreter -> (its inline-code option, options that take a value, options that make it interactive).
_INTERPRETERS: Final[Mapping[str, tuple[str, frozenset[str], frozenset[str]]]] = {
    "python": ("-c", frozenset({"-W", "-X", "-Q"}), frozenset({"-i"})),
    "node": (
        "-e",
        frozenset({"-r", "--require", "--import", "--loader", "-C"}),
        frozenset({"-i", "--interactive"}),
    ),
    "perl": ("-e", frozenset({"-I", "-M", "-m"}), frozenset()),
    "ruby": ("-e", frozenset({"-I", "-r", "-C", "-E"}), frozenset()),
    "php": ("-r", frozenset({"-c", "-d", "-z"}), frozenset({"-a"})),
    "lua": ("-e", frozenset({"-l"}), frozenset({"-i"})),
}
#: Options that give the program some other way than stdin (then stdin is data, unless interactive).
_PROGRAM_GIVEN: Final = frozenset({"-c", "-m", "-e", "-E", "-p", "--eval", "--print", "-r", "-f"})
#: Programs whose input is commands or code the policy cannot judge.
_OPAQUE: Final = frozenset(
    {"irb", "pry", "ipython", "ipython3", "bpython", "jshell", "ghci", "R", "julia", "scala", "erl", "iex"}
    | {"clojure", "clj", "sbcl", "guile", "racket", "ocaml", "swipl", "tclsh", "wish", "expect", "bc", "dc"}
    | {
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "sqlcmd",
        "redis-cli",
        "mongo",
        "mongosh",
        "cqlsh",
        "clickhouse",
    }
    | {"gdb", "lldb", "pdb", "ssh", "mosh", "telnet", "nc", "ncat", "netcat", "socat", "ftp", "sftp", "lftp"}
    | {"ed", "ex", "vi", "vim", "nvim", "emacs", "nano", "su", "sudo", "doas", "login", "script", "screen"}
    | {"tmux", "docker", "podman", "kubectl", "nsenter", "chroot", "busybox", "toybox", "xargs", "parallel"}
    | {"at", "batch", "crontab"}
    | _SHELLS_C
)
#: Wrappers that turn their input into the arguments of the command they run (``xargs rm``).
_ARGUMENT_FEEDERS: Final = frozenset({"xargs", "parallel"})
_PYTHON = re.compile(r"^(?:python|pypy)[0-9.]*$")
_NODE = frozenset({"node", "nodejs"})
_LUA = re.compile(r"^lua(?:jit|[0-9.]*)$")

_Kind = Literal["shell", "code", "opaque", "data"]


class StdinHistory(dict[str, str]):
    """The input each process (by item id) accepted so far; the newest ``_PROCESSES`` processes."""

    def record(self, item: str, text: str) -> None:
        self[item] = self.pop(item, "") + text
        while len(self) > _PROCESSES:
            del self[next(iter(self))]


def stdin_text(command: object) -> str | None:
    """The input of a ``write_stdin`` approval's ``command``, or ``None`` when it is not that shape."""
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return None
    elif isinstance(command, list | tuple) and all(isinstance(w, str) for w in command):
        words = list(command)
    else:
        return None
    if len(words) < 2 or words[0] != "write_stdin":
        return None
    return str(words[-1])


def _interpreter(program: str) -> str | None:
    if _PYTHON.match(program):
        return "python"
    if program in _NODE:
        return "node"
    if _LUA.match(program):
        return "lua"
    return program if program in _INTERPRETERS else None


def _reads_program(argv: Sequence[str], takes_value: frozenset[str], interactive: frozenset[str]) -> bool:
    """The program (or a REPL) comes from stdin: no script operand and no inline program, or an
    interactive option, or ``-`` as the script."""
    operand = False
    skip = False
    for word in argv[1:]:
        if skip:
            skip = False
            continue
        if word in interactive or word == "-":
            return True
        if word == "--":
            operand = True
            break
        if word in _PROGRAM_GIVEN:
            return False
        if word in takes_value:
            skip = True
        elif not word.startswith("-"):
            operand = True
            break
    return not operand


def _kind(argv: Sequence[str]) -> _Kind:
    program = argv[0].rsplit("/", 1)[-1] if argv else ""
    if program in _SHELLS:
        flags = "".join(w[1:] for w in argv[1:] if w.startswith("-") and not w.startswith("--"))
        operands = [w for w in argv[1:] if not w.startswith(("-", "+"))]
        if "c" in flags:
            return "data"  # sh -c TEXT: the text was judged with the command; stdin is its data
        return "shell" if not operands or "s" in flags else "data"
    name = _interpreter(program)
    if name is not None:
        _, takes_value, interactive = _INTERPRETERS[name]
        return "code" if _reads_program(argv, takes_value, interactive) else "data"
    return "opaque" if program in _OPAQUE else "data"


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def stdin_requests(
    target: object, text: str, history: str, cwd: str, roots: tuple[str, ...]
) -> list[ApprovalRequest] | Decision:
    """The engine requests that judge ``text`` written to the process started as ``target`` (after
    ``history``, what it accepted before), or the bridge's own decline."""
    if not isinstance(target, str | list | tuple) or not target:
        return _decline("malformed-request", "input for a command whose command line is unknown")
    try:
        commands = parse_command(target if isinstance(target, str) else tuple(map(str, target)))
    except UnparsableCommand as exc:
        return _decline("malformed-request", f"input for a command that cannot be parsed: {exc}")
    seen = history + text
    if len(seen) > HISTORY_LIMIT:
        return _decline("too-large", f"more than {HISTORY_LIMIT} characters of input to one process")
    # The process itself first: it was approved when it started, and must still be (a process codex
    # started without asking, or one started before a handler changed its mind, is judged here).
    requests = [ApprovalRequest(kind="command", command=target, cwd=cwd, writable_roots=roots)]
    for command in commands:
        if command.carrier or not command.argv:
            continue
        feeders = [w for w in command.wrappers if w in _ARGUMENT_FEEDERS]
        match "opaque" if feeders else _kind(command.argv):
            case "shell":
                requests.append(replace(requests[0], command=seen))
            case "code":
                name = _interpreter(command.argv[0].rsplit("/", 1)[-1]) or ""
                flag = _INTERPRETERS[name][0]
                requests.append(replace(requests[0], command=(command.argv[0], flag, seen)))
            case "opaque":
                program = feeders[0] if feeders else command.argv[0]
                return _decline("opaque-code", f"input to an interactive {program!r} cannot be judged")
            case "data":
                pass
    return requests


def stdin_decision(
    policy: ApprovalPolicy,
    command: object,
    target: object,
    history: str,
    cwd: str,
    roots: tuple[str, ...],
    escalated: bool,
) -> tuple[Decision, str | None]:
    """The decision on a ``write_stdin`` approval's ``command`` for the process started as ``target``
    (after ``history``, what it accepted before), and the input it writes (``None`` when there is none
    to remember): ``stdin_requests``, each judged by ``policy`` (``escalated``: the process runs
    outside the sandbox, so its input does too). A module-level function of plain arguments, so the
    bridge can have it judged in the policy's child (``agent_fleet.policy.engine.judge_apart``):
    reading the input and the process's command line are parses of text a model chose."""
    text = stdin_text(command)
    if text is None:
        return _decline("malformed-request", "a stdin approval without the input it writes"), None
    if not text.strip(" \t\r\n\x03\x04"):  # a newline, Ctrl-C, Ctrl-D: nothing new runs
        return Decision(action="allow_once", reason="the input holds no command"), None
    found = stdin_requests(target, text, history, cwd, roots)
    if isinstance(found, Decision):
        return found, None
    for request in found:
        verdict = policy.evaluate(replace(request, escalated=True) if escalated else request)
        if not verdict.accepted:
            return verdict, None
    what = "judged after what the process was given before" if len(found) > 1 else "data for the command"
    return Decision(action="allow_once", reason=f"the input is {what}"), text
