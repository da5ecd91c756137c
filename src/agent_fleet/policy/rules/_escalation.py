"""Escalation: a request that lets something run or write outside the OS sandbox needs proof.

A command request marked ``escalated`` (the agent asked to run it unsandboxed, or the provider cannot
keep it inside its sandbox) is accepted only when

* every simple command it runs is one of the strict profile's read-only programs (``_strict``; its
  build and test invocations are not proof here: they run the workspace's own code, which the
  policy cannot see), or git narrowed to what an agent needs to record its work in its own
  repository: the read-only subcommands, ``add``, ``commit``, ``switch -c``, ``branch`` and ``tag``
  without deleting, moving or forcing, ``stash`` / ``stash push``; no git option before the
  subcommand (``-C``, ``-c``, ``--git-dir`` ...), so it is the workspace's own repository; or
* every simple command matches one of ``PermissionConfig.escalation_patterns`` (on its written or
  unwrapped form), and no built-in rule or disallow pattern declined it; or
* an ``approval_handler`` (a person) accepts the ``escalation-unproven`` decline.

``default="allow"`` never covers it. An accepted escalation is for this request only (``allow_once``).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_fleet.policy.bash._commands import ParsedScript
from agent_fleet.policy.bash._unwrap import SHELLS
from agent_fleet.policy.rules._strict import READ_ONLY, program_ok, unproven
from agent_fleet.policy.rules._verdict import RuleContext, Violation

__all__ = ["ESCALATION_RULE", "escalation_violation", "git_records_work"]

ESCALATION_RULE = "escalation-unproven"

_GIT_READ = frozenset(
    {"status", "diff", "log", "show", "rev-parse", "ls-files", "ls-tree", "blame", "grep", "describe"}
    | {"shortlog", "cat-file", "merge-base", "rev-list", "for-each-ref", "name-rev", "show-ref", "version"}
    | {"help", "count-objects", "check-ignore", "whatchanged"}
)
#: Options that delete, move, overwrite or repoint refs (long forms, and short letters in any cluster).
_BRANCH_LONG = ("--delete", "--force", "--move", "--copy", "--set-upstream", "--unset-upstream", "--edit")
_BRANCH_SHORT = frozenset("dDfmMcCu")
_TAG_LONG = ("--delete", "--force")
_TAG_SHORT = frozenset("df")
_SWITCH_CREATE = frozenset({"-c", "--create"})
_SWITCH_BAD = ("--force-create", "--discard-changes", "--force", "--orphan", "--detach")
_ANYWHERE_BAD = ("--git-dir", "--work-tree", "--exec-path", "--namespace", "--super-prefix")


def _flagged(args: Sequence[str], long: tuple[str, ...], short: frozenset[str]) -> bool:
    for arg in args:
        if arg == "--":
            return False
        if arg.startswith("--"):
            if arg.startswith(long):
                return True
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) & short:
            return True
    return False


def git_records_work(argv: Sequence[str]) -> bool:
    """``argv`` is a git command an agent needs to record its work in its own repository (or reads)."""
    if len(argv) < 2 or argv[0] != "git":
        return False
    sub, args = argv[1], list(argv[2:])
    if sub.startswith("-") or any(arg.startswith(_ANYWHERE_BAD) for arg in args):
        return False
    match sub:
        case _ if sub in _GIT_READ:
            return True
        case "reflog":
            return not args or args[0] == "show"
        case "add" | "commit":
            return True
        case "switch":
            return bool(_SWITCH_CREATE & set(args)) and not any(a.startswith(_SWITCH_BAD) for a in args)
        case "branch":
            return not _flagged(args, _BRANCH_LONG, _BRANCH_SHORT)
        case "tag":
            return not _flagged(args, _TAG_LONG, _TAG_SHORT)
        case "stash":
            return not args or args[0] == "push" or args[0].startswith("-")
        case _:
            return False


def _proven(argv: Sequence[str]) -> bool:
    if argv and argv[0] == "git":
        return git_records_work(argv)
    return bool(argv) and (argv[0] in READ_ONLY or argv[0] in ("find", "sed", "gsed")) and program_ok(argv)


def escalation_violation(script: ParsedScript, ctx: RuleContext) -> Violation | None:
    """``escalation-unproven`` unless every command of ``script`` is proven harmless (see above)."""
    for cmd in script.commands:
        if not cmd.argv or (cmd.carrier and cmd.program in SHELLS):
            continue
        why = unproven(cmd, ctx, _proven)
        if why is not None:
            return Violation(
                rule=ESCALATION_RULE,
                reason=f"it would run outside the sandbox and is not proven harmless: {why} (allow it with "
                "PermissionConfig.escalation_patterns / --allow-escalation, or ask a person)",
            )
    return None
