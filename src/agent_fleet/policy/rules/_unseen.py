"""Destruction fed by data the policy does not see, and programs that delete what they read.

* ``unseen-operands``: a destructive verb (``rm``, ``shred``, ``unlink``, ``truncate``, ``git rm``,
  ``git checkout``/``restore`` of paths ...) whose operands arrive through a pipe (``xargs``,
  ``parallel``, a ``while read`` loop), a substitution (``rm $(git ls-files)``) or a ``for`` loop over
  one. Those operands are unknown, like an unknown ``$(...)``: the command is declined unless every
  source is a query that narrows by name (``find . -name '*.pyc'``, ``git ls-files '*.orig'``,
  ``grep -l PATTERN``, ``ls *.log``, a ``grep`` in the pipe) or lists files already gone
  (``git ls-files -d | xargs git rm``). Literal input (``echo a b | xargs rm``) is judged as the words
  it is, by the other rules.
* ``delete-sources``: archivers and syncers that delete what they read: ``tar --remove-files``,
  ``zip -m``, ``rsync --remove-source-files``, ``7z -sdel``, ``rar m``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.rules._verdict import RuleContext, Violation

__all__ = ["UNSEEN_RULES", "deletes_sources", "unseen_operands"]

UNSEEN_RULES: dict[str, str] = {
    "unseen-operands": "a destructive command whose operands come through a pipe, xargs, a read loop or a"
    " substitution from a listing the policy cannot see (git ls-files | xargs rm)",
    "delete-sources": "archivers and syncers that delete what they read (tar --remove-files, zip -m,"
    " rsync --remove-source-files, 7z -sdel)",
}

_FANS = frozenset({"xargs", "parallel", "sem"})
#: Filters a listing may pass through without widening it.
_FILTERS = frozenset(
    {"sort", "uniq", "head", "tail", "tr", "cut", "awk", "gawk", "mawk", "sed", "xargs", "tac", "cat", "rev"}
    | {"basename", "dirname", "realpath", "readlink", "sponge", "column", "paste", "fmt", "nl", "stdbuf"}
)
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep"})
_FIND_NARROW = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname"}
    | {"-ilname"}
)
_BROAD = re.compile(r"^(?:\.|\./|\*|\*\*|\*\*/\*|\.\*|:/|:/\*|/|~|~/|\$HOME/?|\$PWD/?|\.\./?)$")
_BROAD_PATTERN = re.compile(r"^(?:\*|\*\.\*|\*\*|\.\*|\.|\^|\^\.\*\$?|)$")


def _destructive(cmd: SimpleCommand) -> str | None:
    """What ``cmd`` destroys with the operands it is given, or ``None``."""
    argv = cmd.argv
    program = cmd.program
    if program in ("rm", "srm", "wipe", "shred", "unlink", "trash", "trash-put", "gio") and (
        program != "gio" or argv[1:2] == ("trash",)
    ):
        return program
    if program == "truncate":
        return "truncate"
    if program == "git":
        words = [a for a in argv[1:] if not a.startswith("-")]
        sub = words[0] if words else ""
        if sub == "rm" and "--cached" not in argv:
            return "git rm"
        if sub == "checkout" and "--" in argv:
            return "git checkout --"
        if sub in ("checkout", "restore") and len(words) == 1:
            staged = ("--staged" in argv or "-S" in argv) and not ("--worktree" in argv or "-W" in argv)
            return None if staged else f"git {sub}"
        if sub == "restore" and not (("--staged" in argv or "-S" in argv) and "-W" not in argv):
            return "git restore"
        if sub == "clean":
            return "git clean"
    return None


_UNKNOWN = re.compile(r"\$\(|`|\$\{?(?!(?:PWD|HOME|TMPDIR)\b)[A-Za-z_@*0-9]")


def _unknown(word: str) -> bool:
    """A word whose value is not known (``$PWD``, ``$HOME`` and ``$TMPDIR`` are)."""
    return _UNKNOWN.search(word) is not None


def _narrows(argv: Sequence[str], verb: str) -> bool | None:
    """Does a listing narrow by name (``True``), list everything or what we cannot see (``False``), or
    only pass data along (``None``, a filter)?"""
    if not argv:
        return False
    program, args = argv[0], list(argv[1:])
    operands = [a for a in args if not a.startswith("-")]
    if program in ("echo", "printf"):
        return True  # literal words: the other rules judge them as they are
    if program in _GREPS:
        if program == "rg" and ("--files" in args) and not any(a in ("-g", "--glob") for a in args):
            return False
        if any(a in ("-v", "--invert-match") or re.fullmatch(r"-[a-zA-Z]*v[a-zA-Z]*", a) for a in args):
            return None  # keeps what does not match: passes the listing on
        return not (operands and _BROAD_PATTERN.match(operands[0]))
    if program in _FILTERS:
        return None
    if program in ("fd", "fdfind"):
        if any(
            a in ("-e", "--extension", "-g", "--glob") or a.startswith(("--extension=", "--glob="))
            for a in args
        ):
            return True
        values = {
            "-t",
            "--type",
            "-d",
            "--max-depth",
            "-E",
            "--exclude",
            "-x",
            "--exec",
            "-X",
            "-j",
            "-c",
            "-S",
        }
        positional = [
            a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in values)
        ]
        return bool(positional) and not _BROAD_PATTERN.match(positional[0])
    if program == "find":
        starts = []
        for arg in args:
            if arg.startswith(("-", "(", "!")):
                break
            starts.append(arg)
        for i, arg in enumerate(args[:-1]):
            negated = i > 0 and args[i - 1] in (
                "-not",
                "!",
            )  # `-not -path './.git/*'` excludes, keeps the rest
            if arg in _FIND_NARROW and not negated and not _BROAD_PATTERN.match(args[i + 1].strip("'\"")):
                return True
        return bool(starts) and not any(_BROAD.match(s) or _unknown(s) for s in starts)
    if program == "ls":
        return bool(operands) and not any(_BROAD.match(o) or _unknown(o) for o in operands)
    if program == "git":
        words = [a for a in args if not a.startswith("-")]
        if verb == "git rm" and words[:1] == ["ls-files"] and any(a in ("-d", "--deleted") for a in args):
            return True  # files already deleted: `git rm` only records it
        if words[:1] in (["ls-files"], ["diff"], ["status"], ["ls-tree"], ["grep"]):
            paths = args[args.index("--") + 1 :] if "--" in args else words[1:]
            if words[:1] == ["ls-tree"] and "--" not in args:
                paths = paths[1:]  # the first operand is the tree
            if words[:1] == ["diff"]:
                paths = [p for p in paths if "/" in p or "." in p or "*" in p] if "--" not in args else paths
            if words[:1] == ["grep"] and "-l" in args:
                return True
            return bool(paths) and not any(_BROAD.match(p) or _unknown(p) for p in paths)
    return False


def unseen_operands(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    verb = _destructive(cmd)
    if verb is None:
        return None
    sources: list[tuple[str, ...]] = []
    fanned = bool(_FANS & set(cmd.wrappers))
    if fanned:
        read_file = any(r.op == "<" for r in cmd.redirects) and not cmd.stdin
        if read_file or any(w in ("-a", "--arg-file") or w.startswith("--arg-file=") for w in cmd.written):
            return _violation(verb, "a file nobody has read")
        sources += cmd.stdin
    if any(_unknown(word) for word in cmd.argv[1:]):
        sources += cmd.sources
        if not fanned and cmd.feeders:  # `... | while read f; do rm "$f"; done`
            sources += cmd.stdin
    if not sources:
        return None
    narrowed: bool | None = None
    unseen = sources[0]
    for source in sources:  # in pipeline order: the last query that is not a mere filter decides
        verdict = _narrows(source, verb)
        if verdict is not None:
            narrowed = verdict
            unseen = source if not verdict else unseen
    if narrowed is not True:
        return _violation(verb, " ".join(unseen)[:60])
    return None


def _violation(verb: str, source: str) -> Violation:
    return Violation(
        rule="unseen-operands", reason=f"{verb} of whatever {source!r} lists: operands nobody can see"
    )


def deletes_sources(cmd: SimpleCommand) -> Violation | None:
    program, args = cmd.program, cmd.argv[1:]
    found: str | None = None
    if program in ("tar", "gtar", "bsdtar") and any(
        len(a.partition("=")[0]) >= 5 and "--remove-files".startswith(a.partition("=")[0]) for a in args
    ):
        found = "tar --remove-files"
    elif program == "zip" and any(
        a == "--move" or (re.fullmatch(r"-[A-Za-z0-9$@]+", a) is not None and "m" in a[1:]) for a in args
    ):
        found = "zip -m"
    elif program == "rsync" and any(a in ("--remove-source-files", "--remove-sent-files") for a in args):
        found = "rsync --remove-source-files"
    elif program in ("7z", "7za", "7zr", "7zz") and "-sdel" in args:
        found = f"{program} -sdel"
    elif program in ("rar", "winrar") and (args[:1] in (("m",), ("mf",)) or "-df" in args):
        found = f"{program} {'m' if args[:1] in (('m',), ('mf',)) else '-df'}"
    if found is None:
        return None
    return Violation(rule="delete-sources", reason=f"{found} deletes the files it reads")
