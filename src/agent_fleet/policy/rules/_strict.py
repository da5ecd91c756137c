"""The strict profile: accept only what can be proven harmless; everything else is ``strict-unproven``.

A command is proven harmless when every simple command it runs (nested and implied ones included) is
a known read-only program, or a known build/test invocation, run through known harmless wrappers,
with every word literal (no unresolved expansion), every path-like word and every written redirection
inside the workspace (reads of system files such as ``/etc/os-release`` are fine for read-only
programs; credential files were already declined by the built-in rules), and nothing opaque. Git is
limited to its read-only subcommands plus local ones (``add``, ``commit``, ``switch -c`` ...); interpreters
to test and lint modules (``python -m pytest``). Shells carrying an inline script (``bash -lc``) are
transparent: what they carry is judged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_fleet.policy.bash._commands import ParsedScript, SimpleCommand
from agent_fleet.policy.bash._unwrap import SHELLS, is_dynamic
from agent_fleet.policy.rules._files import escapes
from agent_fleet.policy.rules._targets import inside, resolve_target
from agent_fleet.policy.rules._verdict import RuleContext, Violation

__all__ = ["READ_ONLY", "STRICT_RULE", "program_ok", "strict_violation", "unproven"]

STRICT_RULE = "strict-unproven"

READ_ONLY = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "fd", "tree", "stat"}
    | {"file", "du", "df", "pwd", "echo", "printf", "true", "false", "test", "[", "which", "type"}
    | {"whereis", "date", "uname", "whoami", "id", "hostname", "printenv", "diff", "cmp", "comm"}
    | {"sort", "uniq", "cut", "tr", "nl", "column", "basename", "dirname", "realpath", "readlink"}
    | {"sha1sum", "sha256sum", "sha512sum", "md5sum", "cksum", "xxd", "od", "hexdump", "strings", "jq"}
    | {"yq", "seq", "sleep", "ps", "pgrep", "nproc", "free", "uptime", "tac", "rev", "fold", "fmt"}
    | {"paste", "join", "expand", "unexpand", "less", "more", "cd", "pushd", "popd", "export", "set"}
    | {"unset", "shift", "exit", "return", ":", "wait", "jobs", "umask", "lsof", "env", "locale"}
)
_BUILD = frozenset(
    {"make", "gmake", "cmake", "ctest", "ninja", "meson", "pytest", "tox", "nox", "mypy", "ruff"}
    | {"black", "isort", "flake8", "pylint", "pyright", "eslint", "prettier", "tsc", "jest", "vitest"}
    | {"mocha", "cargo", "go", "rustc", "gcc", "g++", "clang", "clang++", "javac", "mvn", "gradle"}
    | {"dotnet", "swift", "bazel", "buck2", "just", "npm", "yarn", "pnpm", "bun", "deno", "node-gyp"}
    | {"pre-commit", "shellcheck", "hadolint", "golangci-lint"}
)
_PACKAGE_SUBCOMMANDS = {
    "npm": frozenset(
        {"test", "t", "run", "run-script", "ci", "ls", "list", "view", "outdated", "audit", "pack"}
    ),
    "yarn": frozenset({"test", "run", "build", "lint", "list", "why", "install"}),
    "pnpm": frozenset({"test", "run", "build", "lint", "list", "why", "install"}),
    "bun": frozenset({"test", "run"}),
    "cargo": frozenset(
        {"build", "check", "test", "clippy", "fmt", "doc", "bench", "run", "tree", "metadata"}
    ),
    "go": frozenset({"build", "test", "vet", "fmt", "list", "env", "version", "doc", "generate"}),
    "deno": frozenset({"test", "check", "lint", "fmt"}),
    "dotnet": frozenset({"build", "test", "format", "restore"}),
}
_GIT_SAFE = frozenset(
    {"status", "diff", "log", "show", "rev-parse", "ls-files", "ls-tree", "blame", "grep", "describe"}
    | {"shortlog", "cat-file", "merge-base", "rev-list", "for-each-ref", "name-rev", "reflog", "whatchanged"}
    | {"add", "commit", "stash", "fetch", "branch", "tag", "remote", "switch", "checkout", "restore"}
    | {"show-ref", "version", "help", "count-objects", "fsck", "check-ignore", "config"}
)
_PYTHON_MODULES = frozenset(
    {"pytest", "unittest", "mypy", "ruff", "black", "isort", "flake8", "pylint", "json.tool", "py_compile"}
    | {"compileall", "doctest", "coverage", "tox", "nox", "pyright", "timeit", "tabnanny", "pydoc"}
)
_WRAPPERS = frozenset({"env", "nice", "time", "timeout", "command", "builtin", "stdbuf", "nohup", "xargs"})
_HARMLESS_PATHS = ("/dev/null", "/dev/stdout", "/dev/stderr")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", "&>|"})


def _python(argv: Sequence[str]) -> bool:
    args = list(argv[1:])
    if args[:1] in (["-V"], ["--version"]):
        return True
    while (args and args[0] in ("-q", "-B", "-u", "-X", "-W")) or (args and args[0].startswith(("-W", "-X"))):
        args = args[2:] if args[0] in ("-X", "-W") else args[1:]
    return len(args) >= 2 and args[0] == "-m" and args[1] in _PYTHON_MODULES


def program_ok(argv: Sequence[str]) -> bool:
    """``argv`` runs a known read-only program, a build/test invocation or a local git subcommand."""
    program = argv[0]
    if program in READ_ONLY:
        if program == "env":
            return len(argv) == 1
        if program in ("set", "export") and any(arg.startswith(("-", "+")) for arg in argv[1:2]):
            return program == "export"
        return True
    if program == "find":
        return not any(
            arg in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls")
            for arg in argv
        )
    if program in ("sed", "gsed"):
        return not any(arg.startswith(("-i", "--in-place")) for arg in argv)
    if program == "git":
        sub = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
        return sub in _GIT_SAFE and "-c" not in argv and not any(a.startswith("--exec-path") for a in argv)
    if program.startswith(("python", "pypy")):
        return _python(argv)
    if program in _PACKAGE_SUBCOMMANDS:
        sub = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
        return sub in _PACKAGE_SUBCOMMANDS[program]
    return program in _BUILD


def _paths_ok(cmd: SimpleCommand, ctx: RuleContext, *, read_only: bool) -> str | None:
    """Why a word or redirection of ``cmd`` is not provably inside the workspace, or ``None``."""
    for word in cmd.argv[1:]:
        value = word.partition("=")[2] if word.startswith("-") and "=" in word else word
        if value.startswith("-") or ("/" not in value and not value.startswith(("~", ".."))):
            continue
        if escapes(value):
            return f"{word!r} leaves the workspace"
        path = resolve_target(value, cwd=ctx.cwd, home=ctx.home)
        if path is None or path in _HARMLESS_PATHS or (read_only and value.startswith("/")):
            continue
        if not ctx.roots or not inside(path, ctx.roots):
            return f"{word!r} is not inside the workspace"
    for redirect in cmd.redirects:
        if redirect.op not in _WRITE_OPS or redirect.target in _HARMLESS_PATHS:
            continue
        if is_dynamic(redirect.target) or escapes(redirect.target):
            return f"redirection to {redirect.target!r}"
        path = resolve_target(redirect.target, cwd=ctx.cwd, home=ctx.home)
        if path is None or not ctx.roots or not inside(path, ctx.roots):
            return f"redirection to {redirect.target!r} is not inside the workspace"
    return None


def unproven(cmd: SimpleCommand, ctx: RuleContext, judge: Callable[[Sequence[str]], bool]) -> str | None:
    """Why ``cmd`` is not provably harmless (``judge`` decides on its argv), or ``None``."""
    if any(is_dynamic(word) for word in cmd.argv):
        return f"{cmd.program!r} has words whose value cannot be known"
    if not set(cmd.wrappers) <= _WRAPPERS | SHELLS:
        return f"{cmd.program!r} runs under {', '.join(cmd.wrappers)}"
    if not judge(cmd.argv):
        return f"{' '.join(cmd.argv[:2])!r} is not a known read-only or build/test command"
    return _paths_ok(cmd, ctx, read_only=cmd.program in READ_ONLY)


def strict_violation(script: ParsedScript, ctx: RuleContext) -> Violation | None:
    """``strict-unproven`` unless every command in ``script`` is provably harmless."""
    for cmd in script.commands:
        if not cmd.argv or (cmd.carrier and cmd.program in SHELLS):
            continue
        why = unproven(cmd, ctx, program_ok)
        if why is not None:
            return Violation(rule=STRICT_RULE, reason=f"strict profile: {why}")
    return None
