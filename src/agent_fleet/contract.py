"""The provider contract: ``Provider`` starts sessions, a ``Handle`` drives one session's turns.

Calling order for a handle::

    handle = await provider.spawn(spec)        # first turn already running
    async for event in handle.events():        # ends right after one terminal event
        ...
    await handle.send("follow-up")             # next turn on the same session
    result = await handle.wait()               # drains the turn; raises TurnFailed on Error
    await handle.stop()                        # idempotent; interrupts a running turn

``events()`` may be called once per turn. Cancelling the task that iterates it stops the turn like
``stop()``. Providers are async context managers: leaving the context calls ``shutdown()``.
"""

from __future__ import annotations

import abc
import math
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from agent_fleet.errors import Unsupported, UsageError
from agent_fleet.events import Event, Goal, RateLimits, Result, TokenUsage

if TYPE_CHECKING:
    from agent_fleet.tools import Tool

__all__ = [
    "Capabilities",
    "Finding",
    "Handle",
    "Mode",
    "ModelInfo",
    "PermissionConfig",
    "Provider",
    "ReviewResult",
    "ReviewTarget",
    "Sandbox",
    "SessionInfo",
    "Spec",
    "Untranslated",
]

Sandbox = Literal["read-only", "workspace-write", "danger-full-access"]
Mode = Literal["build", "plan", "chat"]
SANDBOXES: tuple[str, ...] = ("read-only", "workspace-write", "danger-full-access")
#: Seconds a turn may go without any event (while no command or approval is in progress).
DEFAULT_IDLE_TIMEOUT: float = 300.0
MODES: tuple[str, ...] = ("build", "plan", "chat")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_text(text: str, what: str = "the prompt") -> str:
    """Return ``text`` if it can be sent as UTF-8; else raise ``UsageError`` (e.g. a lone surrogate
    from undecodable command-line bytes, which codex would never answer)."""
    if not isinstance(text, str):
        raise UsageError(f"{what} must be a string, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{what} is not valid text: {exc.reason} at character {exc.start} ({text[exc.start]!r}); "
            "pass it as UTF-8"
        ) from None
    return text


def refuse_turn_settings(owner: str, /, **settings: object) -> None:
    """Raise ``Unsupported`` naming the first per-turn setting of ``Handle.send`` that is given (not
    None): for a provider (``owner``) that cannot change it for one turn."""
    for name, value in settings.items():
        if value is not None:
            raise Unsupported(
                f"{owner} cannot change {name} for one turn (send(..., {name}=...)); start a session "
                "with the setting instead"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionConfig:
    """User approval rules, applied after the built-in safety rules.

    ``disallow_patterns`` decline first; when ``allow_patterns`` is non-empty only commands matching
    one are accepted; otherwise ``default`` decides (``allow`` accepts for the session; ``ask`` defers
    the request to an ``approval_handler`` such as the daemon's approval queue, and declines where no
    handler is there to ask).
    Patterns are Python regular expressions searched in the command text.
    ``rule_packs``: paths of TOML rule packs of the user's own, added to the built-in ones (which can
    never be removed; see docs/rule-packs.md). ``allowed_hosts``: host patterns (``fnmatch``, e.g.
    ``*.corp.example``) installs may fetch from and uploads may go to, besides the package indexes;
    they are also the only hosts a network request (a codex network approval, Claude's web tools) is
    granted for: empty means no network. An entry may name a port (``host:port``) and a protocol
    (``scheme://host``): a bare entry allows ``http``/``https`` only, ``socks5tcp://host`` SOCKS,
    ``*://host`` any protocol; the sandbox's whole network (a codex permission request) needs ``*://*``.
    ``mcp_tools``: tools of MCP servers (``fnmatch`` on ``server/tool``) an agent may call; empty means
    none. See docs/approvals.md for what each provider judges.

    Calls of the caller's own ``Spec.tools`` have their own patterns, searched in the tool name:
    ``tool_disallow_patterns`` decline, a non-empty ``tool_allow_patterns`` accepts only the names
    matching one; otherwise the call is allowed (``default`` does not apply: the caller wrote them).
    ``profile="strict"`` (for unattended fleets) accepts only commands the policy can prove harmless
    (known read-only and build/test programs, literal arguments inside the workspace); everything else is
    declined with rule ``strict-unproven``, which an ``approval_handler`` may turn into an accept.

    ``escalation_patterns``: Python regular expressions for requests that would let something run or
    write outside the OS sandbox (an escalated command, a permission grant, a network approval, a file
    change outside the writable roots). Such a request is accepted only when the strict profile proves it
    harmless, when it matches one of these (and no built-in rule or disallow pattern declines it), or
    when an ``approval_handler`` (a person) accepts it; ``default`` never covers it.

    ``narrowed_by``: a second configuration every request must satisfy as well. It is judged on its own
    (its patterns are never combined with these: a command must be accepted by both, each simple command
    matched by each set of allow patterns) and the stricter decision wins: a decline over an accept, a
    decline no ``approval_handler`` may turn over one it may, ``allow_once`` over ``allow_for_session``.
    So it can only narrow this configuration. ``agent-fleet serve`` runs a client's permission this way
    under the daemon's own (the floor).
    """

    allow_patterns: tuple[str, ...] = ()
    disallow_patterns: tuple[str, ...] = ()
    default: Literal["allow", "deny", "ask"] = "allow"
    rule_packs: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    mcp_tools: tuple[str, ...] = ()
    tool_allow_patterns: tuple[str, ...] = ()
    tool_disallow_patterns: tuple[str, ...] = ()
    profile: Literal["default", "strict"] = "default"
    escalation_patterns: tuple[str, ...] = ()
    narrowed_by: PermissionConfig | None = None

    def __post_init__(self) -> None:
        # Accept lists for convenience but store tuples so the config stays hashable and immutable.
        object.__setattr__(self, "allow_patterns", tuple(self.allow_patterns))
        object.__setattr__(self, "disallow_patterns", tuple(self.disallow_patterns))
        object.__setattr__(self, "rule_packs", tuple(str(path) for path in self.rule_packs))
        object.__setattr__(self, "allowed_hosts", tuple(self.allowed_hosts))
        object.__setattr__(self, "mcp_tools", tuple(self.mcp_tools))
        object.__setattr__(self, "tool_allow_patterns", tuple(self.tool_allow_patterns))
        object.__setattr__(self, "tool_disallow_patterns", tuple(self.tool_disallow_patterns))
        object.__setattr__(self, "escalation_patterns", tuple(self.escalation_patterns))
        if self.default not in ("allow", "deny", "ask"):
            raise ValueError(
                f"PermissionConfig.default must be 'allow', 'deny' or 'ask', not {self.default!r}"
            )
        if self.profile not in ("default", "strict"):
            raise ValueError(f"PermissionConfig.profile must be 'default' or 'strict', not {self.profile!r}")
        if self.narrowed_by is not None and not isinstance(self.narrowed_by, PermissionConfig):
            raise TypeError(
                f"PermissionConfig.narrowed_by must be a PermissionConfig or None, not "
                f"{type(self.narrowed_by).__name__}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """What to run: one session's prompt and settings. Fields a provider cannot honour are reported.

    ``timeout`` bounds each turn's total time (None: no limit). ``idle_timeout`` ends a turn that
    shows no sign of life for that many seconds (no event, no command or approval in progress) with
    ``Error(code="timeout")``; None or 0 turns the watchdog off.
    ``tools``: Python functions (or ``agent_fleet.tools.Tool`` wrappers) the model may call; they are
    turned into ``Tool`` objects here, so one that cannot be described raises ``UsageError`` at once.
    ``answers``: canned answers when the agent asks the user (question id, header or text -> answer),
    over the provider options' ``canned_answers`` (see ``agent_fleet.user_input``).
    ``env``: variables set in the environment of the commands the agent runs, on top of what the
    provider passes on (codex: its ``shell_environment_policy.set``; Claude Code: its process's
    environment, which its tools inherit). Names are environment variable names; values are strings.
    ``max_turns``: the most model round trips (agentic steps) a turn may take, and ``max_cost_usd`` the
    most it may spend, where the provider can enforce them (reported as untranslated otherwise); None:
    no limit.
    ``temp_dir``: the session's own temporary directory, part of its box (its workspace and this
    directory are its whole writable world): the agent's commands get it as ``TMPDIR`` and it is a
    writable root of the OS sandbox and of the policy, while the shared ``/tmp`` and the inherited
    ``TMPDIR`` are not. None: the provider makes a private one (mode 0700) for the session.
    """

    prompt: str
    cwd: str | Path | None = None
    model: str | None = None
    base_instructions: str | None = None
    developer_instructions: str | None = None
    reasoning_effort: str | None = None
    sandbox: Sandbox | None = None
    permission: PermissionConfig | None = None
    mcp_servers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    mode: Mode = "build"
    images: Sequence[str | Path] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    tools: Sequence[Tool | Callable[..., Any]] = ()
    answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    max_turns: int | None = None
    max_cost_usd: float | None = None
    temp_dir: str | Path | None = None

    def __post_init__(self) -> None:
        check_text(self.prompt)  # UsageError at once, before any provider sees it
        if self.tools:
            # Derive names and schemas now: a tool that cannot be described fails here, not at spawn.
            from agent_fleet.tools import as_tools

            object.__setattr__(self, "tools", as_tools(self.tools))
        else:
            object.__setattr__(self, "tools", ())
        if self.sandbox is not None and self.sandbox not in SANDBOXES:
            raise ValueError(f"Spec.sandbox must be one of {', '.join(SANDBOXES)}, not {self.sandbox!r}")
        if self.mode not in MODES:
            raise ValueError(f"Spec.mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        # `not 0 < t < inf`, not `t <= 0`: nan compares false with everything, and a timer of nan (or
        # inf) seconds never fires; None is how to say "no limit".
        if self.timeout is not None and not (0 < self.timeout < math.inf):
            raise ValueError(f"Spec.timeout must be a finite number of seconds > 0, not {self.timeout!r}")
        if self.idle_timeout is not None and not (0 <= self.idle_timeout < math.inf):
            raise ValueError(f"Spec.idle_timeout must be >= 0 seconds (0: off), not {self.idle_timeout!r}")
        if self.max_turns is not None and (
            isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) or self.max_turns < 1
        ):
            raise ValueError(f"Spec.max_turns must be a whole number >= 1, not {self.max_turns!r}")
        if self.max_cost_usd is not None and not (0 < self.max_cost_usd < math.inf):
            raise ValueError(f"Spec.max_cost_usd must be a finite amount > 0, not {self.max_cost_usd!r}")
        for question, answer in self.answers.items():
            if not isinstance(question, str) or not (
                isinstance(answer, str)
                or (isinstance(answer, Sequence) and all(isinstance(a, str) for a in answer))
            ):
                raise ValueError(
                    "Spec.answers must map question strings to a string or a sequence of strings"
                )
        for name, value in self.env.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise ValueError(f"Spec.env: {name!r} is not an environment variable name")
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(f"Spec.env: the value of {name} must be a string without NUL")


@dataclass(frozen=True, slots=True)
class Untranslated:
    """A ``Spec`` field (or part of one) a provider cannot carry, and why."""

    field: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a provider can do, reported honestly so callers can choose before they try."""

    supports_injection: bool
    supports_resume: bool
    supports_tool_plugins: bool
    supports_output_schema: bool
    supports_reasoning_effort: bool
    needs_permission_config: bool
    emits_subagent_events: bool
    tool_permission_format: str
    supports_review: bool = False  # ``Provider.review`` works
    supports_python_tools: bool = False  # ``Spec.tools`` functions can be called by the model
    #: False when the provider cannot ask for approvals, so ``Spec.permission`` would not be enforced
    #: (``codex exec``: codex's own sandbox is the only guard).
    enforces_approvals: bool = True
    #: The OS sandbox that confines the agent's commands and file writes (the wall behind the policy),
    #: in a few words (e.g. "codex sandbox: bubblewrap + seccomp"); None where there is none, so the
    #: approval policy is the only guard.
    os_sandbox: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """One model a provider offers. ``raw`` is the provider's own record (for ``--json``)."""

    id: str
    name: str = ""
    description: str = ""
    default_effort: str | None = None
    is_default: bool = False
    hidden: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A stored session: its id, a ``preview`` of its first prompt, where it ran, when it was created
    and last updated (epoch seconds), the session it was forked from, its ``name`` (title) where set.
    ``turns``: the provider's records of its turns, oldest first, where it was read with them
    (``Provider.read_session``; codex: ``{"id", "status", "items", "error", ...}``); ``raw`` is the
    provider's record."""

    id: str
    preview: str = ""
    cwd: str | None = None
    model: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    forked_from: str | None = None
    name: str | None = None
    turns: tuple[Mapping[str, Any], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewTarget:
    """What a review looks at: one ``commit`` (``sha``), everything since ``base`` (a commit), or the
    ``uncommitted`` changes of the work tree."""

    kind: Literal["commit", "base", "uncommitted"]
    sha: str | None = None
    base: str | None = None
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        out.update({k: v for k, v in (("sha", self.sha), ("base", self.base), ("title", self.title)) if v})
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One review finding. ``priority`` is 0 (P0, most severe) to 3, or None when untagged."""

    title: str
    priority: int | None
    location: str = ""
    body: str = ""

    @property
    def rank(self) -> int:
        """The priority used for thresholds (an untagged finding ranks as P3)."""
        return 3 if self.priority is None else self.priority

    def render(self) -> str:
        where = f" ({self.location})" if self.location else ""
        body = f"\n  {self.body.replace(chr(10), chr(10) + '  ')}" if self.body else ""
        return f"- {self.title}{where}{body}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewResult:
    """A finished review: the reviewer's ``text``, the parsed ``findings``, the overall ``explanation``,
    the reviewing session and what it looked at."""

    text: str
    findings: tuple[Finding, ...]
    explanation: str
    session_id: str
    target: ReviewTarget
    usage: TokenUsage | None = None

    def blocking(self, threshold: int) -> list[Finding]:
        """Findings at or above ``threshold`` (0 = P0 ... 3 = P3)."""
        return [f for f in self.findings if f.rank <= threshold]


class Handle(abc.ABC):
    """One live session. See the module docstring for the calling order."""

    @property
    @abc.abstractmethod
    def session_id(self) -> str:
        """The provider's session (thread) id, usable with ``Provider.resume``."""

    @abc.abstractmethod
    def events(self) -> AsyncIterator[Event]:
        """Events of the current turn; ends right after exactly one terminal event."""

    @abc.abstractmethod
    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        sandbox: Sandbox | None = None,
        approval_policy: str | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        """Start a follow-up turn on this session. The previous turn must have ended.

        ``images`` (paths or URLs) go with the prompt; ``output_schema`` asks for a structured answer
        (``Result.structured``) as ``Spec.output_schema`` does for the first turn. Raises
        ``Unsupported`` where the provider cannot carry one of them on a follow-up.

        Per-turn settings (``model``, ``reasoning_effort``, ``reasoning_summary``, ``sandbox``,
        ``approval_policy``, ``cwd``) apply to this turn only (the next turn has the session's own
        again) and never pass the session's walls: a sandbox no wider than the session's, an approval
        policy asking no less, a cwd inside the workspace (``UsageError``, nothing sent). A provider
        that cannot change one for a turn raises ``Unsupported`` naming it, before anything is sent
        (``refuse_turn_settings``)."""

    async def fork(self) -> Handle:
        """A new session that starts with a copy of this one's history; no turn runs until ``send()``.
        Raises ``Unsupported`` where the provider cannot fork."""
        raise Unsupported(f"{type(self).__name__} cannot fork a session")

    async def compact(self) -> None:
        """Compact the session's history (summarise it to free the context window) as a turn of its
        own: read it with ``events()`` / ``wait()``. Raises ``Unsupported`` where impossible."""
        raise Unsupported(f"{type(self).__name__} cannot compact a session")

    @abc.abstractmethod
    async def inject(self, text: str) -> None:
        """Steer the running turn with more input. Raises ``Unsupported`` where impossible."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Interrupt the running turn and end the stream with ``Error(code="cancelled")``. Idempotent."""

    async def rename(self, name: str) -> None:
        """Give the session a name (its title in session lists). Raises ``Unsupported`` where
        impossible."""
        raise Unsupported(f"{type(self).__name__} cannot rename a session")

    async def set_goal(self, objective: str, *, token_budget: int | None = None) -> Goal:
        """Set the session's goal (an objective the agent keeps working towards, with an optional token
        budget); returns it as the provider recorded it. A ``Goal`` event reports later changes.
        Raises ``Unsupported`` where the provider has no goals."""
        raise Unsupported(f"{type(self).__name__} has no session goals")

    async def clear_goal(self) -> None:
        """Clear the session's goal. Raises ``Unsupported`` where the provider has no goals."""
        raise Unsupported(f"{type(self).__name__} has no session goals")

    async def interrupt(self) -> None:
        """Stop the running turn but keep the session: the stream ends with ``Error(code="cancelled")``
        and the next ``send()`` continues the same session. A no-op when no turn is running. Raises
        ``Unsupported`` where the provider can only end the whole session (use ``stop()``)."""
        raise Unsupported(f"{type(self).__name__} cannot interrupt a turn and keep the session")

    @abc.abstractmethod
    async def wait(self) -> Result:
        """Drain the current turn; return its ``Result`` or raise ``TurnFailed``."""


class Provider(abc.ABC):
    """Starts and resumes sessions. Use as an async context manager.

    ``options`` is the provider's options object (its registry entry's options type)."""

    name: str
    options: Any

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    async def spawn(self, spec: Spec) -> Handle:
        """Start a new session and its first turn with ``spec.prompt``."""

    @abc.abstractmethod
    async def resume(self, session_id: str, spec: Spec) -> Handle:
        """Continue an existing session with a new turn running ``spec.prompt``."""

    @abc.abstractmethod
    async def shutdown(self) -> None:
        """Stop every session and release resources. Idempotent."""

    async def start(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Acquire resources (e.g. start a child process). Called on context entry."""

    @property
    def pid(self) -> int | None:
        """The provider's long-lived child process (for resource sampling), or None when it has none."""
        return None

    async def review(
        self,
        target: ReviewTarget,
        *,
        cwd: str | Path,
        model: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> ReviewResult:
        """Review the changes ``target`` names in ``cwd`` (read-only); ``on_event`` gets the reviewing
        session's events. Cancelling it (e.g. ``asyncio.timeout``) interrupts the review. Raises
        ``Unsupported`` unless ``capabilities.supports_review``."""
        raise Unsupported(f"the {self.name} provider cannot review changes")

    @property
    def rate_limits(self) -> RateLimits | None:
        """The latest rate-limit state the provider reported (None when it reported none)."""
        return None

    def notices(self) -> AsyncIterator[Event]:
        """Provider-wide notices (warnings, account and configuration changes, rate limits, MCP
        start-up) as events, starting with the most recent ones kept; ends at ``shutdown()``.
        Raises ``Unsupported`` where the provider has none."""
        raise Unsupported(f"the {self.name} provider has no notice stream")

    async def list_sessions(self, *, limit: int | None = None, archived: bool = False) -> list[SessionInfo]:
        """Stored sessions, newest first. Raises ``Unsupported`` where the provider cannot list them."""
        raise Unsupported(f"the {self.name} provider cannot list sessions")

    async def read_session(self, session_id: str) -> SessionInfo:
        """One stored session (with its turns in ``raw`` where the provider gives them)."""
        raise Unsupported(f"the {self.name} provider cannot read sessions")

    async def archive_session(self, session_id: str) -> None:
        """Archive a stored session (it no longer appears in ``list_sessions()``)."""
        raise Unsupported(f"the {self.name} provider cannot archive sessions")

    async def unarchive_session(self, session_id: str) -> None:
        """Bring an archived session back (it appears in ``list_sessions()`` and can be resumed)."""
        raise Unsupported(f"the {self.name} provider cannot unarchive sessions")

    async def list_models(self, *, include_hidden: bool = False) -> list[ModelInfo]:
        """The models this provider offers. Raises ``Unsupported`` where it cannot list them."""
        raise Unsupported(f"the {self.name} provider cannot list its models")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
