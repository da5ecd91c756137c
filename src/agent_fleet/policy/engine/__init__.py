"""``ApprovalPolicy``: one decision per request, a pure function of the request and the configuration.

Job: put the layers together (``bash`` reads a command, ``rules`` and ``packs`` judge it, ``requests``
judges the other kinds) in a fixed order, apply the user's patterns and default, and keep the judge
itself safe (bounded work, an event loop that never waits long, the same verdict at any stack depth).

Contract: ``ApprovalPolicy(config).evaluate(request)`` returns a ``Decision`` and never raises (a
failure declines, rule ``policy-error``); ``evaluate_async`` gives the same decision without holding
the event loop; ``RULES`` names every rule id a decision can carry; the policy holds no mutable state
and is safe to share between threads.

Order for a ``command`` request (the first step that decides wins):

0. shape: a command that is not text or a list of strings (bytes, numbers ...) -> ``malformed``; NUL or
   other control characters -> ``control-characters``; more than ``MAX_COMMAND_CHARS`` characters ->
   ``too-large`` (a command too large to judge is not judged);
1. parse (``_shell``); text that is not valid shell, nests too deeply, or is empty (``None``, ``""``,
   ``[]``, only blanks or comments) -> ``decline`` with rule ``unparsable``;
2. built-in safety rules (``_rules``), always on, not overridable by any pattern; then the rule packs
   (``_packs``: the built-in domain packs plus ``PermissionConfig.rule_packs``), just as binding; a pack
   decline's rule is ``domain/name`` (``database/sql-destructive``);
3. ``disallow_patterns`` in order -> ``user-deny``;
4. the strict profile (``profile="strict"``): anything not provably harmless -> ``strict-unproven``
   (``_strict``), a decline a provider's ``approval_handler`` may turn into an accept;
5. ``allow_patterns`` when any is given: every simple command must match one, else ``not-allowed``;
   a request marked ``escalated`` (it would run outside the OS sandbox) stops here (``_escalation``):
   accepted for this request only (``allow_once``) when every simple command is proven harmless
   (the strict profile, with git narrowed to recording work) or matches one of
   ``escalation_patterns``; else ``decline`` with rule ``escalation-unproven``, which a provider's
   approval handler may turn into an accept. The default never decides it;
6. ``default``: ``allow`` -> ``allow_for_session``, ``deny`` -> ``decline`` with rule ``default-deny``,
   ``ask`` -> ``decline`` with rule ``default-ask`` (the other decline a provider hands to its approval
   handler: the daemon parks it for a person; with no handler it stays declined, failing closed).

``evaluate`` never raises: an internal error declines with rule ``policy-error``.

The judge's own limits (see docs/approval-policy.md, "The judge's own safety"):

* work before the parse is bounded: more than ``MAX_COMMAND_CHARS`` characters is ``too-large``, and so
  is a text with more than ``bash._shell.MAX_PIPES`` pipes (tree-sitter-bash's time and memory grow
  with the square of a pipeline's stages), checked before that text is parsed; the walk stops at
  ``MAX_COMMANDS`` simple commands, ``MAX_PARSES`` inline scripts and ``MAX_NESTING`` levels;
* ``evaluate_async`` judges a request whose size (command text, paths, host, tool name) is over
  ``INLINE_CHARS`` in a child process (``_child``): the loop only waits on a pipe, and a request that
  would need more than ``_child.MEMORY_LIMIT`` is declined there (``too-large``) instead of growing
  this process;
* every decision is made on a judging thread (``_JUDGES``) whose stack always starts the same way, so
  no caller's stack depth (and no recursion limit) can change a verdict; recursion that still runs
  out fails closed.

User patterns are Python regular expressions searched (``re.search``) in several texts: the command as
sent (argv joined with ``shlex.join``) and, for each simple command it runs, its words as written
(``env X=1 git status``) and its unwrapped argv (``git status``). A disallow pattern declines when it
matches any of them. An allow pattern set accepts only when *every* simple command (carriers such as the
``bash -lc`` wrapper excepted) is matched, on its written or unwrapped form, by some allow pattern:
``git status && rm x`` is not allowed by ``^git``. Text that runs no simple command (``export X=1``)
must match an allow pattern as a whole. A command request's ``cwd`` and ``writable_roots`` only help the
built-in rules resolve relative targets (``rm -rf ../..``) and let the packs read a few regular files
(the repository's remote, SQL or requirements files a command names, the project's registry settings).

``file_change``: a change naming no path is declined (``no-paths``: nothing to judge); every path
must stay inside ``cwd`` or a writable root (``_paths``), else ``path-escape``; a path that writes code
run later -- a repository's git machinery, ``core.hooksPath`` targets, ``.pth`` / ``sitecustomize``,
the agents' own settings, shell start-up files (``_protected``) -- is declined with ``vital-path``
even inside the workspace. User patterns do not apply (they describe commands); then the default
decides.

The other kinds are judged in ``_requests`` (see there): ``read`` (credential files, containment;
a read that passes is accepted whatever the default, as codex's sandbox reads freely), ``network``
(``allowed_hosts`` alone decides: an explicit list, so the default neither opens nor closes it),
``permissions`` (contained write roots, network only with ``*://*``; then the default, and a grant is
``allow_once``: for the turn, never the session), ``tool`` named ``mcp:server/tool`` (MCP tools by
``mcp_tools``; then the default) or ``builtin:Name`` (the agent's own session tools, e.g. subagents:
the default). ``unknown`` is always declined (``unknown-request``), as is a tool with no name.

``tool`` (a caller-defined ``Spec.tools`` function): ``tool_disallow_patterns`` searched in the tool
name -> ``tool-deny``; when ``tool_allow_patterns`` are given and none matches -> ``tool-not-allowed``;
otherwise allowed whatever ``default`` says (the caller wrote and passed the tool).

A configuration with ``narrowed_by`` is judged twice, by itself and by that one (each with its own
patterns: they are never combined by text), and the stricter decision wins (``_stricter``); the daemon
runs a client's configuration this way under its own.

A ``None`` configuration is the built-in rules plus default ``allow``. ``ApprovalPolicy`` compiles its
patterns once, in the constructor (a bad pattern raises ``UsageError``, a ``ValueError``, naming it),
holds no mutable state, and is safe to use from many threads at once.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shlex
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import assert_never

from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.policy._types import ApprovalRequest, Decision
from agent_fleet.policy.bash._commands import CommandTooLarge
from agent_fleet.policy.bash._shell import ParsedScript, UnparsableCommand, parse_script
from agent_fleet.policy.engine._child import child_judge
from agent_fleet.policy.packs._packs import PACK_RULES, pack_set
from agent_fleet.policy.requests._paths import check_paths
from agent_fleet.policy.requests._requests import (
    REQUEST_RULES,
    host_patterns,
    judge_network,
    judge_permissions,
    judge_read,
    judge_tool,
)
from agent_fleet.policy.rules._escalation import ESCALATION_RULE, escalation_violation
from agent_fleet.policy.rules._protected import protected_reason
from agent_fleet.policy.rules._rules import BUILTIN_RULES, RuleContext, find_violation
from agent_fleet.policy.rules._strict import STRICT_RULE, strict_violation

__all__ = [
    "ESCALATION_RULE",
    "INLINE_CHARS",
    "MAX_COMMAND_CHARS",
    "RULES",
    "STRICT_RULE",
    "ApprovalPolicy",
    "evaluate_command",
]

#: Commands longer than this are declined as ``too-large`` without being judged: at this size one step
#: of tree-sitter's parse (it holds the GIL) stays under ~30 ms on a loaded core.
MAX_COMMAND_CHARS = 128 * 1024
#: Commands up to this size are judged on the event loop by ``evaluate_async`` (see bench/policy_eval.py).
INLINE_CHARS = 1024
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
#: The declines an ``approval_handler`` may still turn into an accept (``_provider.refine`` uses the same
#: set): the strict profile's "not proven harmless" and ``default="ask"``'s "nobody decided".
REFINABLE_RULES: frozenset[str] = frozenset({STRICT_RULE, ESCALATION_RULE, "default-ask"})

#: Every rule id a decline can carry, with what it means.
RULES: dict[str, str] = {
    **BUILTIN_RULES,
    **PACK_RULES,
    "unparsable": "the command is not valid shell, nests too deeply, or is empty",
    "malformed": "the command is neither text nor a list of strings",
    "control-characters": "the command holds NUL or other control characters",
    "too-large": f"the command is longer than {MAX_COMMAND_CHARS} characters, or runs more simple commands"
    " or inline scripts than the policy judges",
    "policy-error": "the policy itself failed on this request (fails closed)",
    STRICT_RULE: "strict profile: not provably harmless (an approval_handler may still accept it)",
    ESCALATION_RULE: "it would run outside the OS sandbox and is neither proven harmless nor allowed by "
    "escalation_patterns (an approval_handler may still accept it)",
    "path-escape": "a file change resolves outside the working directory and writable roots",
    "user-deny": "the command matches one of the configuration's disallow_patterns",
    "not-allowed": "allow_patterns are set and a command matches none of them",
    "default-deny": "nothing accepted the request and the configuration's default is deny",
    "default-ask": "nothing decided the request and the configuration's default is ask (nobody answered)",
    "tool-deny": "the tool's name matches one of the configuration's tool_disallow_patterns",
    "tool-not-allowed": "tool_allow_patterns are set and the tool's name matches none of them",
    **REQUEST_RULES,
    "malformed-request": "the request's fields are not what the tool or method defines",
    "foreign-cwd": "the request names a working directory outside the session's workspace",
    "unknown-thread": "an approval for a thread that belongs to no session of the provider",
    "not-offered": "the policy accepted, but the provider offered no decision that carries out an accept",
}


def _compile(patterns: Sequence[str], field: str) -> tuple[re.Pattern[str], ...]:
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except (re.error, TypeError) as exc:
            raise UsageError(
                f"PermissionConfig.{field}: invalid regular expression {pattern!r}: {exc}"
            ) from exc
    return tuple(compiled)


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def _allow(reason: str) -> Decision:
    return Decision(action="allow_for_session", reason=reason)


class ApprovalPolicy:
    """Decides ``ApprovalRequest``s under one ``PermissionConfig`` (see the module docstring)."""

    __slots__ = (
        "_allow",
        "_config",
        "_default",
        "_disallow",
        "_escalation",
        "_hosts",
        "_mcp_tools",
        "_narrower",
        "_packs",
        "_strict",
        "_tool_allow",
        "_tool_disallow",
    )

    def __init__(self, config: PermissionConfig | None = None) -> None:
        self._config = config
        self._disallow = _compile(config.disallow_patterns, "disallow_patterns") if config else ()
        self._allow = _compile(config.allow_patterns, "allow_patterns") if config else ()
        self._escalation = _compile(config.escalation_patterns, "escalation_patterns") if config else ()
        self._tool_disallow = (
            _compile(config.tool_disallow_patterns, "tool_disallow_patterns") if config else ()
        )
        self._tool_allow = _compile(config.tool_allow_patterns, "tool_allow_patterns") if config else ()
        self._default = config.default if config else "allow"
        self._packs = (
            pack_set(config.rule_packs, host_patterns(config.allowed_hosts)) if config else pack_set()
        )
        self._strict = config is not None and config.profile == "strict"
        self._hosts = config.allowed_hosts if config else ()
        self._mcp_tools = config.mcp_tools if config else ()
        narrower = config.narrowed_by if config else None
        self._narrower = ApprovalPolicy(narrower) if narrower is not None else None

    @property
    def config(self) -> PermissionConfig | None:
        return self._config

    def __repr__(self) -> str:
        return f"ApprovalPolicy({self._config!r})"

    def evaluate(self, request: ApprovalRequest) -> Decision:
        """The decision for ``request``. Never raises: anything unexpected declines (``policy-error``).
        Judged on a judging thread (the caller waits), so the caller's stack depth cannot matter."""
        if _on_judging_thread():
            return self._judged(request)
        return _judges().submit(self._judged, request).result()

    async def evaluate_async(self, request: ApprovalRequest) -> Decision:
        """``evaluate`` without stalling the event loop: a request larger than ``INLINE_CHARS`` (its
        command, paths, host and tool name together) is judged while the loop runs."""
        judge = child_judge()
        if _size(request) <= INLINE_CHARS:
            judge.warm()  # the first call in a process starts the child, for the large ones to come
            return self.evaluate(request)
        return await asyncio.wrap_future(judge.submit(self._config, request))

    def _judged(self, request: ApprovalRequest) -> Decision:
        """The decision, on the judging thread: this configuration's, and the stricter of it and the
        narrowing configuration's when there is one (``narrowed_by``)."""
        decision = self._judged_alone(request)
        if self._narrower is None:
            return decision
        return _stricter(decision, self._narrower._judged(request))

    def _judged_alone(self, request: ApprovalRequest) -> Decision:
        try:
            return self._evaluate(request)
        except RecursionError:  # an explicit bound was missed: fail closed, never let it through
            return _decline("unparsable", "the request nests too deeply to judge")
        except MemoryError:
            return _decline("too-large", "the request is too large to judge")
        except Exception as exc:  # fail closed on our own bugs, never crash the session
            return _decline("policy-error", f"the approval policy failed: {type(exc).__name__}: {exc}")

    def _evaluate(self, request: ApprovalRequest) -> Decision:
        match request.kind:
            case "command":
                return self._command(request)
            case "file_change":
                return self._file_change(request)
            case "read":
                return judge_read(request) or _allow("read inside the workspace")
            case "network":
                return judge_network(request, self._hosts) or _allow("host in allowed_hosts")
            case "permissions":
                verdict = judge_permissions(request, self._hosts) or self._by_default("permission request")
                if verdict.action == "allow_for_session":  # wider rights: for the turn only
                    return Decision(action="allow_once", reason=verdict.reason)
                return verdict
            case "tool":
                name = request.tool or ""
                if not name or name.startswith(("mcp:", "builtin:")):  # not the caller's own tool
                    return judge_tool(request, self._mcp_tools) or self._by_default(f"tool {name}")
                return self._tool(name)
            case "unknown":
                return _decline("unknown-request", "a request the provider could not classify")
            case _:
                assert_never(request.kind)

    def _by_default(self, what: str) -> Decision:
        match self._default:
            case "allow":
                return _allow(f"{what}: default allow")
            case "deny":
                return _decline("default-deny", f"{what}: default deny")
            case "ask":
                return _decline("default-ask", f"{what}: nothing decided it and nobody was asked")
            case _:
                assert_never(self._default)

    def _tool(self, name: str) -> Decision:
        for pattern in self._tool_disallow:
            if pattern.search(name):
                return _decline("tool-deny", f"tool {name!r} matches disallowed pattern {pattern.pattern!r}")
        if self._tool_allow and not any(pattern.search(name) for pattern in self._tool_allow):
            return _decline("tool-not-allowed", f"tool {name!r} matches no allowed tool pattern")
        return _allow(f"tool {name!r}: the caller's own tool")

    def _file_change(self, request: ApprovalRequest) -> Decision:
        if not request.paths:
            return _decline("no-paths", "a file change that names no path")
        escaped = check_paths(request.paths, request.cwd, request.writable_roots)
        if escaped is not None:
            return escaped
        cwd = os.fspath(request.cwd) if request.cwd is not None else None
        for path in request.paths:
            why = protected_reason(os.fspath(path), cwd, request.writable_roots)
            if why is not None:
                return _decline("vital-path", f"a file change of {os.fspath(path)!r}: {why}")
        return self._by_default("file change inside the workspace")

    def _command(self, request: ApprovalRequest) -> Decision:
        command = request.command
        shape = _shape(command)
        if shape is not None:
            return shape
        assert command is None or isinstance(command, str | tuple)
        if command is None or not (command.strip() if isinstance(command, str) else command):
            return _decline("unparsable", "empty command")
        text = command if isinstance(command, str) else shlex.join(command)
        try:
            script = parse_script(command)
        except CommandTooLarge as exc:
            return _decline("too-large", str(exc))
        except UnparsableCommand as exc:
            return _decline("unparsable", str(exc))
        if script.empty:
            return _decline("unparsable", "empty command (only blanks or comments)")

        ctx = RuleContext.build(request.cwd, request.writable_roots)
        violation = find_violation(script, ctx)
        if violation is not None:
            return _decline(violation.rule, violation.reason)
        in_pack = self._packs.check_script(script, text, ctx.cwd, ctx.roots, ctx.home, _elsewhere)
        if in_pack is not None:
            return _decline(in_pack.rule, in_pack.reason)

        units = [
            (shlex.join(cmd.written), shlex.join(cmd.argv))
            for cmd in script.commands
            if not cmd.carrier and not cmd.implied
        ]
        for pattern in self._disallow:
            if pattern.search(text) or any(pattern.search(u) for unit in units for u in unit):
                return _decline("user-deny", f"matches disallowed pattern {pattern.pattern!r}")
        if self._strict:
            unproven = strict_violation(script, ctx)
            if unproven is not None:
                return _decline(unproven.rule, unproven.reason)
        if self._allow:
            for unit in units or [(text, text)]:
                if not any(pattern.search(u) for pattern in self._allow for u in unit):
                    return _decline("not-allowed", f"{unit[0]!r} matches no allowed pattern")
            if not request.escalated:
                return _allow("every command matches an allowed pattern")
        if request.escalated:
            return self._escalated(script, ctx, units or [(text, text)])
        return self._by_default("command")

    def _escalated(
        self, script: ParsedScript, ctx: RuleContext, units: Sequence[tuple[str, str]]
    ) -> Decision:
        """A command that would run outside the sandbox: proof, or an escalation pattern (``_escalation``)."""
        if self._escalation and all(
            any(pattern.search(u) for pattern in self._escalation for u in unit) for unit in units
        ):
            return Decision(action="allow_once", reason="outside the sandbox: matches escalation_patterns")
        unproven = escalation_violation(script, ctx)
        if unproven is not None:
            return _decline(unproven.rule, unproven.reason)
        return Decision(action="allow_once", reason="outside the sandbox: proven harmless")


def _rank(decision: Decision) -> int:
    if decision.action == "allow_for_session":
        return 0
    if decision.action == "allow_once":
        return 1
    if decision.action == "decline" and decision.rule in REFINABLE_RULES:
        return 2  # a person may still accept it
    return 3  # final


def _stricter(outer: Decision, inner: Decision) -> Decision:
    """The stricter of two configurations' decisions on one request (``outer``'s when they rank the
    same): a final decline over one a handler may turn, over ``allow_once``, over ``allow_for_session``."""
    return inner if _rank(inner) > _rank(outer) else outer


def _size(request: ApprovalRequest) -> int:
    """How much a request gives the judge to read: its command, paths, host and tool name."""
    command = request.command
    size = len(command) if isinstance(command, str) else sum(len(str(w)) for w in command or ())
    for path in (*request.paths, *request.writable_roots):
        size += len(os.fspath(path)) + 1
    return size + len(str(request.host or "")) + len(str(request.tool or ""))


# The judging threads: a decision is made on one of these, whose stack always starts the same way,
# so how deep the caller's stack is (and the recursion limit it leaves) cannot change a verdict. A few
# threads, so concurrent callers are not serialised behind one long request; made again after a fork.
_JUDGING_THREADS = 4
_judging = threading.local()
_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _mark_judging_thread() -> None:
    _judging.active = True


def _on_judging_thread() -> bool:
    return getattr(_judging, "active", False)


def _judges() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is not None and pool[0] == os.getpid():
        return pool[1]
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():  # none yet, or inherited through fork (no threads)
            executor = ThreadPoolExecutor(
                max_workers=_JUDGING_THREADS,
                thread_name_prefix="agent-fleet-policy",
                initializer=_mark_judging_thread,
            )
            _pool = (os.getpid(), executor)
        return _pool[1]


def _elsewhere(script: ParsedScript) -> tuple[str, str] | None:
    """The built-in rules for a script run in a container or on another machine (no known cwd)."""
    found = find_violation(script, RuleContext.build(None))
    return (found.rule, found.reason) if found is not None else None


def _shape(command: object) -> Decision | None:
    """A decline for a command that cannot be judged as given, or ``None``."""
    if command is None:
        return None
    if isinstance(command, str):
        texts: Sequence[str] = (command,)
    elif isinstance(command, tuple | list) and all(isinstance(word, str) for word in command):
        texts = command
    else:
        return _decline("malformed", f"the command is a {type(command).__name__}, not text or strings")
    if sum(len(text) for text in texts) > MAX_COMMAND_CHARS:
        return _decline("too-large", f"the command is longer than {MAX_COMMAND_CHARS} characters")
    if any(_CONTROL.search(text) for text in texts):
        return _decline("control-characters", "the command holds NUL or other control characters")
    return None


@functools.lru_cache(maxsize=64)
def _policy(config: PermissionConfig | None) -> ApprovalPolicy:
    return ApprovalPolicy(config)


def evaluate_command(
    command: str | Sequence[str],
    *,
    config: PermissionConfig | None = None,
    cwd: str | os.PathLike[str] | None = None,
    writable_roots: Sequence[str | os.PathLike[str]] = (),
) -> Decision:
    """Shorthand for ``ApprovalPolicy(config).evaluate(ApprovalRequest(kind="command", ...))``.

    Policies are cached per configuration, so calling this repeatedly compiles patterns once.
    """
    try:
        request = ApprovalRequest(kind="command", command=command, cwd=cwd, writable_roots=writable_roots)
    except (TypeError, ValueError) as exc:
        return _decline("malformed", f"the request cannot be built: {exc}")
    return _policy(config).evaluate(request)
