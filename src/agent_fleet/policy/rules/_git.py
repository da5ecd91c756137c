"""Git: what it runs through configuration and options, and which invocations destroy work or history.

``git_runs(argv)`` lists the shell texts git would run: ``-c alias.x='!CMD'``, ``-c core.editor=CMD``
(and every other configuration key whose value git runs as a command), ``git config KEY VALUE`` for
those keys, ``submodule foreach CMD``, ``rebase -x CMD``, ``bisect run CMD``, ``difftool -x CMD``,
``--upload-pack``/``--receive-pack``/``--exec``, ``grep -O``, ``ext::`` URLs. ``env_runs(name, value)``
does the same for environment variables (``GIT_SSH_COMMAND``, ``GIT_EDITOR``, ``PAGER``, ``BASH_ENV`` ...).
The shell layer parses those texts like any command, so ``git -c core.pager='rm -rf /' log`` is judged
as ``rm -rf /``.

``git_violation(argv)``: ``git-reset-hard``, ``git-push-force``, ``git-worktree-remove``, and
``git-destroy`` for everything else that discards uncommitted work or history (``clean``, ``checkout``
or ``restore`` of a whole tree, ``checkout -f``, ``switch --discard-changes``, ``stash clear|drop``,
``branch -D``, ``update-ref -d`` or moving a ref, ``symbolic-ref -d``, ``reflog expire|delete``,
``gc --prune=now``, ``prune``, ``filter-branch``, ``rm -r`` of a whole tree); ``git-config-shell`` for
configuration that runs code we cannot see (``core.hooksPath`` elsewhere, ``--config-env``,
``protocol.ext.allow=always``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_fleet.policy.bash._code import Inner
from agent_fleet.policy.rules._verdict import Violation

__all__ = ["DEFAULT_BRANCHES", "env_runs", "git_runs", "git_violation"]

DEFAULT_BRANCHES = frozenset({"main", "master", "refs/heads/main", "refs/heads/master"})

_SHELL_KEY = re.compile(
    r"core\.(editor|pager|sshcommand|askpass|fsmonitor|gitproxy)|sequence\.editor|diff\.external"
    r"|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process)|gpg(\..+)?\.program"
    r"|merge\..+\.driver|(merge|diff)tool\..+\.cmd|pager\..+|credential(\..+)?\.helper"
    r"|uploadpack\.packobjectshook|remote\..+\.(receivepack|uploadpack|proxy)|web\.browser"
    r"|browser\..+\.(cmd|path)|man\..+\.(cmd|path)|sendemail\.(smtpserver|sendmailcmd)|alias\..+",
    re.IGNORECASE,
)
_ENV_SHELL = frozenset(
    {"GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS"}
    | {"SSH_ASKPASS", "GIT_PROXY_COMMAND", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "GIT_SSH", "BROWSER"}
    | {"LESSOPEN", "LESSCLOSE", "PROMPT_COMMAND", "SUDO_ASKPASS", "RSYNC_RSH", "CVS_RSH", "DIFF_EXTERNAL"}
)
#: Variables that make programs load code from a file we cannot see.
_ENV_OPAQUE = frozenset(
    {"BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PERL5OPT", "PYTHONSTARTUP", "NODE_OPTIONS", "RUBYOPT"}
    | {"GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "ZDOTDIR", "DYLD_INSERT_LIBRARIES", "GCONV_PATH"}
    # A configuration file of its own (hooks path, fsmonitor, pager ... in a file we cannot see).
    | {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"}
)
#: NODE_OPTIONS flags that tune node without loading code (`--require`/`--import`/`--loader` do load it).
_NODE_SAFE = re.compile(
    r"--(max-old-space-size|max-semi-space-size|stack-size|enable-source-maps|no-warnings|trace-warnings"
    r"|no-deprecation|trace-deprecation|openssl-legacy-provider|experimental-vm-modules|max-http-header-size"
    r"|unhandled-rejections|dns-result-order|use-openssl-ca|tls-min-v1\.[0-3]|trace-uncaught|heapsnapshot-near-heap-limit"
    r"|experimental-specifier-resolution|no-experimental-fetch|disable-warning|expose-gc)(=\S*)?$"
)
_GLOBAL_VALUES = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--exec-path"}
)
#: Keys that make the new clone run a command (`git clone -c KEY=VALUE`).
_CLONE_CODE_KEYS = re.compile(
    r"core\.(fsmonitor|sshcommand|pager|editor|askpass|hookspath|gitproxy)|alias\..*|credential\..*helper"
    r"|filter\..*\.(clean|smudge|process)|diff\..*|merge\..*\.driver|protocol\..*\.allow|include\..*",
    re.IGNORECASE,
)
_BROAD = re.compile(r"^(?:\.|\./|\.\./?|:/|:/\*|:\(top\).*|\*|/|\*\*?/?.*|:\(glob\).*|:!.*|:\^.*|\.\*)$")


def _value_runs(key: str, value: str) -> list[Inner]:
    lower = key.lower()
    if lower.startswith("alias."):
        return [Inner("script", text=value[1:])] if value.startswith("!") else []
    if lower.startswith("credential") and not value.startswith("!") and not value.startswith("/"):
        return []  # credential.helper=store: a git-credential-* helper
    if _SHELL_KEY.fullmatch(lower):
        return [Inner("script", text=value[1:] if value.startswith("!") else value)]
    return []


def env_runs(name: str, value: str) -> list[Inner]:
    """What setting ``name=value`` in a command's environment makes run."""
    if name in _ENV_SHELL:
        return [Inner("script", text=value)] if value else []
    if name == "NODE_OPTIONS" and all(_NODE_SAFE.match(word) for word in value.split()):
        return []  # `--max-old-space-size=8192`: tuning, no code loaded
    if name in _ENV_OPAQUE and value:
        return [Inner("opaque", text=f"{name} makes programs load code from {value!r}")]
    if name == "GIT_CONFIG_PARAMETERS":
        found: list[Inner] = []
        for item in re.findall(r"'((?:[^']|'\\'')*)'", value):
            key, _, val = item.partition("=")
            found.extend(_value_runs(key, val))
        return found
    if name.startswith("GIT_CONFIG_VALUE_") and value:
        return [Inner("script", text=value)]
    return []


@dataclass(slots=True)
class _Invocation:
    sub: str = ""
    rest: list[str] = field(default_factory=list)
    config: list[tuple[str, str]] = field(default_factory=list)
    config_env: bool = False


def _parse(argv: Sequence[str]) -> _Invocation:
    args = list(argv[1:])
    inv = _Invocation()
    aliases: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in _GLOBAL_VALUES:
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if name == "-c":
                key, _, val = value.partition("=")
                inv.config.append((key, val))
                if key.lower().startswith("alias."):
                    aliases[key[len("alias.") :]] = val
            elif name == "--config-env":
                inv.config_env = True
        i += 1
    if i >= len(args):
        return inv
    inv.sub, inv.rest = args[i], args[i + 1 :]
    for _ in range(5):  # aliases defined on the command line: `git -c alias.x='reset --hard' x`
        alias = aliases.pop(inv.sub, None)
        if alias is None or alias.startswith("!"):
            break
        try:
            words = shlex.split(alias)
        except ValueError:
            break
        if not words:
            break
        inv.sub, inv.rest = words[0], words[1:] + inv.rest
    return inv


def _values(rest: Sequence[str], short: str, longs: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for i, arg in enumerate(rest):
        name, eq, value = arg.partition("=")
        if name in longs or (short and arg.startswith(short) and not arg.startswith("--")):
            if name in longs and eq:
                found.append(value)
            elif arg == short or name in longs:
                found.append(rest[i + 1] if i + 1 < len(rest) else "")
            elif short and arg.startswith(short) and len(arg) > len(short):
                found.append(arg[len(short) :])
    return found


def git_runs(argv: Sequence[str]) -> list[Inner]:
    """The shell texts and argvs this git invocation runs (see the module docstring)."""
    inv = _parse(argv)
    found: list[Inner] = []
    for key, value in inv.config:
        found.extend(_value_runs(key, value))
    rest = inv.rest
    operands = [arg for arg in rest if not arg.startswith("-")]
    scripts: list[str] = []
    match inv.sub:
        case "submodule":
            if operands[:1] == ["foreach"]:
                after = rest[rest.index("foreach") + 1 :]
                words = [w for w in after if w not in ("--recursive", "-q", "--quiet")]
                scripts.append(" ".join(words))
        case "rebase":
            scripts += _values(rest, "-x", ("--exec",))
        case "bisect":
            if operands[:1] == ["run"]:
                after = rest[rest.index("run") + 1 :]
                if after:
                    found.append(Inner("argv", argv=tuple(after)))
        case "difftool" | "mergetool":
            scripts += _values(rest, "-x", ("--extcmd",))
        case "grep":
            scripts += _values(rest, "-O", ("--open-files-in-pager",))
        case "send-email":
            scripts += _values(rest, "", ("--sendmail-cmd", "--smtp-server"))
        case "config":
            words = [w for w in rest if not w.startswith("-")]
            if words[:1] in (["set"], ["--add"]):
                words = words[1:]
            if len(words) >= 2:
                found.extend(_value_runs(words[0], words[1]))
        case _:
            pass
    scripts += _values(rest, "", ("--upload-pack", "--receive-pack", "--exec"))
    if inv.sub in ("clone", "fetch", "pull", "ls-remote"):
        scripts += _values(rest, "-u", ())
    for arg in rest:
        if arg.startswith("ext::"):  # words split on spaces; `% ` is a space inside a word, `%%` a `%`
            words = [w.replace("\0", " ").replace("%%", "%") for w in arg[5:].replace("% ", "\0").split()]
            found.append(Inner("argv", argv=tuple(words)))
    found.extend(Inner("script", text=text) for text in scripts if text)
    return found


def _destroy(reason: str) -> Violation:
    return Violation(rule="git-destroy", reason=reason)


def _long(arg: str, name: str, shortest: int) -> bool:
    """``arg`` is ``name`` or an unambiguous abbreviation git would accept (at least ``shortest`` long)."""
    base = arg.partition("=")[0]
    return len(base) >= shortest and name.startswith(base)


def _flags(rest: Sequence[str]) -> tuple[set[str], list[str], list[str]]:
    """Short letters and long names, operands before ``--``, and pathspecs after it."""
    flags: set[str] = set()
    operands: list[str] = []
    for i, arg in enumerate(rest):
        if arg == "--":
            return flags, operands, list(rest[i + 1 :])
        if arg.startswith("--"):
            flags.add(arg.partition("=")[0])
        elif arg.startswith("-") and len(arg) > 1:
            flags.update("-" + letter for letter in arg[1:])
        else:
            operands.append(arg)
    return flags, operands, []


def _has(flags: set[str], *names: str) -> bool:
    return any(
        name in flags
        or (name.startswith("--") and any(f.startswith("--") and _long(f, name, 4) for f in flags))
        for name in names
    )


def _broad(paths: Sequence[str]) -> str | None:
    return next((path for path in paths if _BROAD.match(path) or "*" in path or "?" in path), None)


def _project_hooks(path: str) -> bool:
    """A hooks directory of the project itself (``.githooks``, ``.husky``), or none at all: hooks the
    agent could as well run by hand. Anything that may point elsewhere (absolute, ``~``, ``$``, ``..``)
    is not; the domain pack judges an absolute path against the workspace."""
    if path in ("", "/dev/null"):
        return True
    return not path.startswith(("/", "~", "$", "-")) and ".." not in path.split("/")


def git_violation(argv: Sequence[str]) -> Violation | None:
    """The git rule this invocation breaks, or ``None`` (see the module docstring)."""
    inv = _parse(argv)
    if inv.config_env:
        return Violation(rule="git-config-shell", reason="git --config-env sets configuration we cannot see")
    for key, value in inv.config:
        lower = key.lower()
        if lower == "core.hookspath" and value not in ("", "/dev/null"):
            return Violation(
                rule="git-config-shell", reason=f"core.hooksPath={value!r} runs hooks we cannot see"
            )
        if lower.startswith("protocol.") and value.lower() == "always":
            return Violation(rule="git-config-shell", reason=f"{key}=always lets URLs run commands")
    rest = inv.rest
    if inv.sub in ("clone", "init") and any(a == "--template" or a.startswith("--template=") for a in rest):
        return Violation(
            rule="git-config-shell", reason=f"git {inv.sub} --template installs hooks we cannot see"
        )
    if inv.sub == "clone":  # `git clone -c core.fsmonitor=CMD URL`: configuration of the new repository
        for i, arg in enumerate(rest[:-1]):
            if arg in ("-c", "--config") and _CLONE_CODE_KEYS.match(rest[i + 1].partition("=")[0]):
                return Violation(rule="git-config-shell", reason=f"git clone {arg} {rest[i + 1]!r} runs code")
    flags, operands, paths = _flags(rest)
    if inv.sub == "config":
        words = [w for w in rest if not w.startswith("-")]
        words = words[1:] if words[:1] in (["set"], ["--add"]) else words
        if len(words) >= 2 and words[0].lower() == "core.hookspath" and not _project_hooks(words[1]):
            return Violation(
                rule="git-config-shell", reason=f"core.hooksPath {words[1]!r} runs hooks we cannot see"
            )
    match inv.sub:
        case "reset":
            for arg in rest:
                if arg == "--":
                    break
                if _long(arg, "--hard", 3):
                    return Violation(
                        rule="git-reset-hard", reason="git reset --hard discards uncommitted work"
                    )
            return None
        case "worktree":
            action = next((arg for arg in rest if not arg.startswith("-")), None)
            if action in ("remove", "prune"):
                return Violation(
                    rule="git-worktree-remove", reason=f"git worktree {action} deletes worktrees"
                )
            return None
        case "push":
            return _push(rest)
        case "clean":
            if _has(flags, "-n", "--dry-run"):
                return None
            return _destroy("git clean deletes untracked files")
        case "checkout" | "restore" if any("$" in p or "`" in p for p in paths):
            return _destroy(f"git {inv.sub} of pathspecs whose value cannot be known")
        case "checkout":
            if _has(flags, "-f", "--force"):
                return _destroy("git checkout --force discards uncommitted changes")
            broad = _broad(paths) or _broad(operands)
            if broad is not None:
                return _destroy(f"git checkout {broad!r} discards uncommitted changes in the whole tree")
            return None
        case "restore":
            staged_only = _has(flags, "-S", "--staged") and not _has(flags, "-W", "--worktree")
            broad = _broad(paths) or _broad(operands)
            if broad is not None and not staged_only:
                return _destroy(f"git restore {broad!r} discards uncommitted changes in the whole tree")
            return None
        case "switch":
            if _has(flags, "-f", "--force", "--discard-changes", "-C", "--force-create"):
                return _destroy("git switch --discard-changes/--force discards uncommitted changes")
            return None
        case "stash":
            if operands[:1] in (["clear"], ["drop"]):
                return _destroy(f"git stash {operands[0]} deletes stashed work")
            return None
        case "branch":
            if _has(flags, "-D", "-M", "-C", "-f", "--force") or (
                _has(flags, "-d", "--delete") and _has(flags, "-f", "--force")
            ):
                return _destroy("git branch -D/-M/--force deletes or overwrites branches")
            return None
        case "update-ref":
            if _has(flags, "-d", "--stdin"):
                return _destroy("git update-ref -d/--stdin deletes refs")
            if len(operands) >= 2:  # like `branch --force`: the commits the ref held are dropped from it
                return _destroy("git update-ref moves a ref to another commit")
            return None
        case "symbolic-ref":
            if _has(flags, "-d", "--delete"):
                return _destroy("git symbolic-ref -d deletes HEAD or another symbolic ref")
            return None
        case "reflog":
            if operands[:1] in (["expire"], ["delete"]):
                return _destroy(f"git reflog {operands[0]} drops the history that recovers lost commits")
            return None
        case "gc":
            prune = [arg.partition("=")[2] for arg in rest if arg.startswith("--prune=")]
            expiring = [v.lower() for k, v in inv.config if k.lower().startswith(("gc.prune", "gc.reflog"))]
            if prune or any(value in ("now", "all") or "now" in value for value in expiring):
                return _destroy("git gc --prune=<date> deletes unreachable commits early")
            return None
        case "lfs":
            if operands[:1] == ["prune"]:
                return _destroy("git lfs prune deletes local LFS objects")
            return None
        case "prune" | "filter-branch" | "filter-repo":
            return _destroy(f"git {inv.sub} rewrites or deletes history")
        case "rm":
            recursive = _has(flags, "-r")
            broad = _broad(paths) or _broad(operands)
            if recursive and broad is not None and not _has(flags, "--cached", "-n", "--dry-run"):
                return _destroy(f"git rm -r {broad!r} deletes the whole tree")
            return None
        case "checkout-index":
            if _has(flags, "-f", "--force") and _has(flags, "-a", "--all"):
                return _destroy("git checkout-index -a -f overwrites the working tree")
            return None
        case "read-tree":
            if _has(flags, "--reset") and _has(flags, "-u"):
                return _destroy("git read-tree --reset -u discards uncommitted changes")
            return None
        case "submodule":
            if operands[:1] == ["deinit"] and _has(flags, "-f", "--force"):
                return _destroy("git submodule deinit --force deletes submodule working trees")
            return None
        case _:
            return None


def _push(rest: Sequence[str]) -> Violation | None:
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
            if base == "--force" or (len(base) >= 5 and "--force".startswith(base) and base != "--force-"):
                force = True
            elif _long(arg, "--mirror", 4) or _long(arg, "--prune", 5):
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
        return Violation(
            rule="git-push-force", reason="git push --mirror/--prune overwrites and deletes remote refs"
        )
    for ref in refspecs:
        target = ref[1:] if ref.startswith(":") else ref
        if (ref.startswith(":") or delete) and target in DEFAULT_BRANCHES:
            return Violation(rule="git-push-force", reason=f"deleting the remote default branch {target!r}")
    return None
