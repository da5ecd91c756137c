"""Git: which invocations destroy work or history (what git runs is read in ``bash._git``).

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
from collections.abc import Sequence

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.bash._git import parse_git
from agent_fleet.policy.rules._verdict import Violation

__all__ = ["DEFAULT_BRANCHES", "RULES", "git_violation", "lease_on_default", "lease_push"]

#: The ids these rules decide, with what each guards against.
RULES: dict[str, str] = {
    "git-reset-hard": "git reset --hard (discards uncommitted work)",
    "git-push-force": "git push --force/-f/+refspec/--mirror, a lease-protected force to main/master, or"
    " deleting main/master on the remote",
    "git-worktree-remove": "git worktree remove|prune",
    "git-destroy": "git clean, checkout/restore of the whole tree, stash clear, branch -D, reflog expire,"
    " gc --prune=now, filter-branch, rm -r ., removing .git: uncommitted work or history destroyed",
    "git-config-shell": "git configuration that runs code we cannot see (core.hooksPath, --config-env)",
}

DEFAULT_BRANCHES = frozenset({"main", "master", "refs/heads/main", "refs/heads/master"})

#: Keys that make the new clone run a command (`git clone -c KEY=VALUE`).
_CLONE_CODE_KEYS = re.compile(
    r"core\.(fsmonitor|sshcommand|pager|editor|askpass|hookspath|gitproxy)|alias\..*|credential\..*helper"
    r"|filter\..*\.(clean|smudge|process)|diff\..*|merge\..*\.driver|protocol\..*\.allow|include\..*",
    re.IGNORECASE,
)
_BROAD = re.compile(r"^(?:\.|\./|\.\./?|:/|:/\*|:\(top\).*|\*|/|\*\*?/?.*|:\(glob\).*|:!.*|:\^.*|\.\*)$")


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
    inv = parse_git(argv)
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


def _branch(ref: str) -> str:
    """The branch a refspec's destination names: ``HEAD:refs/heads/main`` -> ``main``."""
    target = ref.lstrip("+").rpartition(":")[2] if ":" in ref else ref.lstrip("+")
    return target.removeprefix("refs/heads/")


def lease_push(rest: Sequence[str]) -> tuple[bool, list[str]]:
    """``(lease, branches)``: a lease-protected force (``--force-with-lease``, ``--force-if-includes``)
    and the branches the push names (its refspecs' destinations and the leases' refs)."""
    lease = False
    branches: list[str] = []
    positional: list[str] = []
    for arg in rest:
        name, eq, value = arg.partition("=")
        if name in ("--force-with-lease", "--force-if-includes") or (
            len(name) >= 9 and "--force-with-lease".startswith(name)
        ):
            lease = True
            if eq and value:
                branches.append(_branch(value.partition(":")[0]))
        elif not arg.startswith("-"):
            positional.append(arg)
    branches += [_branch(ref) for ref in positional[1:]]
    return lease, branches


def _push(rest: Sequence[str]) -> Violation | None:
    lease, branches = lease_push(rest)
    default = next((b for b in branches if b in DEFAULT_BRANCHES), None)
    if lease and default is not None:
        return Violation(
            rule="git-push-force",
            reason=f"a lease-protected force push still rewrites the default branch {default!r}",
        )
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


def lease_on_default(commands: Sequence[SimpleCommand]) -> Violation | None:
    """``git checkout main && git push --force-with-lease``: a lease push with no branch named, after
    the script switched to the default branch."""
    current: str | None = None
    for cmd in commands:
        if cmd.program != "git":
            continue
        inv = parse_git(cmd.argv)
        words = [a for a in inv.rest if not a.startswith("-")]
        if (
            inv.sub in ("checkout", "switch")
            and words
            and not any(a in ("-b", "-B", "-c", "-C") for a in inv.rest)
        ):
            current = _branch(words[0])
        elif inv.sub == "push":
            lease, branches = lease_push(inv.rest)
            if lease and not branches and current in DEFAULT_BRANCHES:
                return Violation(
                    rule="git-push-force",
                    reason=f"a lease-protected force push of {current!r}, the default branch",
                )
    return None
