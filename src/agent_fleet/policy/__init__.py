"""The approval engine: should the agent be allowed to do this? Pure, thread-safe, fails closed.

::

    from agent_fleet.policy import ApprovalPolicy, ApprovalRequest

    policy = ApprovalPolicy(spec.permission)             # None: built-in rules + default allow
    decision = policy.evaluate(ApprovalRequest(kind="command", command=["bash", "-lc", "ls"], cwd=cwd))
    decision.action, decision.rule, decision.reason      # "allow_for_session", None, "..."

Providers reuse the parts: ``parse_command`` gives the simple commands a shell text or argv would run
(unwrapped and normalised, e.g. for Claude's Bash tool), ``check_paths`` the containment verdict for
Edit/Write paths, ``evaluate_command`` a one-call decision. ``RULES`` lists every rule id a decline may
carry. The decision order and every documented choice are in ``agent_fleet.policy.engine``'s docstring;
the built-in rules in ``_rules``, shell parsing in ``_shell``, path containment in ``_paths``.
"""

from agent_fleet.policy._paths import check_paths
from agent_fleet.policy._shell import (
    ParsedScript,
    Redirect,
    SimpleCommand,
    UnparsableCommand,
    parse_command,
    parse_script,
)
from agent_fleet.policy._types import Action, ApprovalRequest, Decision, RequestKind
from agent_fleet.policy.engine import RULES, ApprovalPolicy, evaluate_command

__all__ = [
    "RULES",
    "Action",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Decision",
    "ParsedScript",
    "Redirect",
    "RequestKind",
    "SimpleCommand",
    "UnparsableCommand",
    "check_paths",
    "evaluate_command",
    "parse_command",
    "parse_script",
]
