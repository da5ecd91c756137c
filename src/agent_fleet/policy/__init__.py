"""The approval engine: should the agent be allowed to do this? Pure, thread-safe, fails closed.

::

    from agent_fleet.policy import ApprovalPolicy, ApprovalRequest

    policy = ApprovalPolicy(spec.permission)             # None: built-in rules + default allow
    decision = policy.evaluate(ApprovalRequest(kind="command", command=["bash", "-lc", "ls"], cwd=cwd))
    decision.action, decision.rule, decision.reason      # "allow_for_session", None, "..."

Providers reuse the parts: ``parse_command`` gives the simple commands a shell text or argv would run
(unwrapped and normalised, e.g. for Claude's Bash tool), ``check_paths`` the containment verdict for
Edit/Write paths, ``evaluate_command`` a one-call decision. ``RULES`` lists every rule id a decline may
carry. The decision order and every documented choice are in ``agent_fleet.policy.engine``'s docstring.

The package, one subpackage per job (each one's docstring states its contract)::

    bash/       reading bash: text -> the simple commands it would run (parse, walk, unwrap, expansion)
    rules/      the built-in rules: always on, never overridable
    packs/      the domain packs: TOML rule files per domain and the judges they name
    requests/   the requests that are not shell commands (file changes, reads, network, permissions, tools)
    engine/     ApprovalPolicy: the order of the steps, the limits, the rule table
"""

from agent_fleet.policy._types import Action, ApprovalRequest, Decision, RequestKind
from agent_fleet.policy.bash._shell import (
    ParsedScript,
    Redirect,
    SimpleCommand,
    UnparsableCommand,
    parse_command,
    parse_script,
)
from agent_fleet.policy.engine import RULES, ApprovalPolicy, evaluate_command
from agent_fleet.policy.requests._paths import check_paths

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
