"""Flags shared by ``run`` and ``batch``, and turning them into a ``Task`` template and options."""

from __future__ import annotations

import dataclasses
import math
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from agent_fleet.contract import DEFAULT_IDLE_TIMEOUT, MODES, SANDBOXES, PermissionConfig, Spec
from agent_fleet.errors import UsageError
from agent_fleet.policy import ApprovalPolicy
from agent_fleet.runner import (
    PRIORITY_NAMES,
    PROVIDER_NAMES,
    GateConfig,
    ReviewConfig,
    Task,
    parse_priority,
    provider_entry,
)
from agent_fleet.runner._outage import DEFAULT_MODEL_TIMEOUT
from agent_fleet.runner.gate import DEFAULT_GATE_TIMEOUT
from agent_fleet.runner.providers import check_permission_enforced

__all__ = [
    "ALLOW",
    "ALLOW_ESCALATION",
    "ALLOW_HOST",
    "ALLOW_MCP",
    "DENY",
    "Common",
    "common_options",
    "parse_answers",
    "parse_config_overrides",
    "permission_config",
    "pop_common",
    "provider_options",
    "read_prompt",
]


# -- option parsing ------------------------------------------------------------------------------------


def parse_config_overrides(values: Sequence[str]) -> dict[str, Any]:
    """``-c key=value`` flags -> config mapping. The value is TOML when it parses, else the raw string
    (codex's own rule). Raises ``UsageError`` for an entry without ``=`` or key."""
    config: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f'-c {item!r}: expected key=value (e.g. -c model="gpt-5.5")')
        try:
            value: Any = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError:
            value = raw
        config[key] = value
    return config


def read_prompt(prompt: str) -> str:
    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):  # FloatRange lets nan through
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


def permission_config(
    allow: Sequence[str],
    deny: Sequence[str],
    default: str,
    hosts: Sequence[str] = (),
    mcp: Sequence[str] = (),
    escalation: Sequence[str] = (),
) -> PermissionConfig | None:
    if not allow and not deny and default == "allow" and not hosts and not mcp and not escalation:
        return None
    config = PermissionConfig(
        allow_patterns=tuple(allow),
        disallow_patterns=tuple(deny),
        default="deny" if default == "deny" else "ask" if default == "ask" else "allow",
        allowed_hosts=tuple(hosts),
        mcp_tools=tuple(mcp),
        escalation_patterns=tuple(escalation),
    )
    ApprovalPolicy(config)  # a bad regular expression is a UsageError naming it
    return config


@dataclass(frozen=True, slots=True, kw_only=True)
class Common:
    """Flags shared by ``run`` and ``batch``."""

    provider: str
    model: str | None
    effort: str | None
    sandbox: str | None
    mode: str
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    default_approval: str
    allow_host: tuple[str, ...]
    allow_mcp: tuple[str, ...]
    config: tuple[str, ...]
    gate_cmd: str | None
    gate_timeout: float
    require_commit: bool
    max_followups: int
    timeout: float | None
    retries: int
    retry_delay: float
    idle_timeout: float
    model_timeout: float
    json_output: bool
    review: bool
    review_threshold: str
    server: str | None = None
    allow_escalation: tuple[str, ...] = ()
    quiet: bool = False
    verbose: bool = False

    @property
    def verbosity(self) -> int:
        """-1 (``-q``), 0, 1 (``-v``). Raises ``UsageError`` for both."""
        if self.quiet and self.verbose:
            raise UsageError("-q (quiet) and -v (verbose) contradict each other: give one")
        return -1 if self.quiet else 1 if self.verbose else 0

    def remote(self) -> Any:
        """A ``RemoteProvider`` for ``--server`` (token from ``AGENT_FLEET_TOKEN``), or None."""
        if self.server is None:
            return None
        from agent_fleet.remote import RemoteProvider

        return RemoteProvider(self.server, provider=self.provider)

    answers: tuple[str, ...] = ()

    def options(self) -> Any:
        return provider_options(self.provider, self.config, self.answers)

    def template(self, prompt: str, cwd: Path | None, task_id: str) -> Task:
        review = None
        if self.review:
            if provider_entry(self.provider).reviewer is None:
                raise UsageError("--review needs a codex provider (--provider codex or codex-exec)")
            review = ReviewConfig(threshold=parse_priority(self.review_threshold))
        spec = Spec(
            prompt=prompt,
            cwd=str(cwd) if cwd is not None else None,
            model=self.model,
            reasoning_effort=self.effort,
            sandbox=self.sandbox,  # type: ignore[arg-type]  # validated by click.Choice
            mode=self.mode,  # type: ignore[arg-type]
            permission=permission_config(
                self.allow,
                self.deny,
                self.default_approval,
                self.allow_host,
                self.allow_mcp,
                self.allow_escalation,
            ),
            idle_timeout=self.idle_timeout or None,
        )
        check_permission_enforced(spec, self.provider)  # exit 2 before any work
        return Task(
            id=task_id,
            spec=spec,
            gate=GateConfig(
                require_commit=self.require_commit, command=self.gate_cmd, command_timeout=self.gate_timeout
            ),
            review=review,
            max_followups=self.max_followups,
            timeout=self.timeout,
            retries=self.retries,
            retry_delay=self.retry_delay,
            model_timeout=self.model_timeout or None,
        )


_F = TypeVar("_F", bound=Callable[..., Any])

# The approval policy's flags, shared by run, batch and serve (one definition each).
ALLOW = click.option(
    "--allow", multiple=True, metavar="REGEX", help="Accept only commands matching (repeatable)."
)
DENY = click.option("--deny", multiple=True, metavar="REGEX", help="Decline commands matching (repeatable).")
ALLOW_HOST = click.option(
    "--allow-host",
    multiple=True,
    metavar="PATTERN",
    help="Host the agent may reach (fnmatch, e.g. '*.pypi.org'; repeatable). Default: no network.",
)
ALLOW_ESCALATION = click.option(
    "--allow-escalation",
    multiple=True,
    metavar="REGEX",
    help="A command that may run outside the sandbox when the agent asks (repeatable; every command it "
    "runs must match one). Default: only what is proven harmless (read-only, git to record its work).",
)
ALLOW_MCP = click.option(
    "--allow-mcp",
    multiple=True,
    metavar="PATTERN",
    help="MCP tool the agent may call, as server/tool (fnmatch; repeatable). Default: none.",
)


def common_options(fn: _F) -> _F:
    options = [
        click.option(
            "--provider",
            type=click.Choice(PROVIDER_NAMES),
            default="codex",
            show_default=True,
            help="codex: the app-server (one child, many sessions); codex-exec: one `codex exec` per turn; "
            "claude: Claude Code.",
        ),
        click.option("-m", "--model", help="Model to use (default: the provider's)."),
        click.option("--effort", help="Reasoning effort (e.g. low, medium, high)."),
        click.option(
            "-s", "--sandbox", type=click.Choice(SANDBOXES), help="Sandbox for the agent's commands."
        ),
        click.option("--mode", type=click.Choice(MODES), default="build", show_default=True),
        ALLOW,
        DENY,
        click.option(
            "--default-approval",
            type=click.Choice(["allow", "deny", "ask"]),
            default="allow",
            show_default=True,
            help="Decision for commands no rule decides (ask: `run` on a terminal asks you; with --server "
            "the daemon's dashboard or API asks; elsewhere ask is refused: nobody could answer).",
        ),
        click.option(
            "--server",
            metavar="URL",
            help="Run the sessions on an `agent-fleet serve` daemon (token from AGENT_FLEET_TOKEN).",
        ),
        ALLOW_HOST,
        ALLOW_MCP,
        ALLOW_ESCALATION,
        click.option(
            "-c",
            "config",
            multiple=True,
            metavar="KEY=VALUE",
            help="Codex config override (repeatable); VALUE is TOML, else a plain string.",
        ),
        click.option(
            "--gate-cmd", metavar="CMD", help="Gate: this shell command must exit 0 in the task dir."
        ),
        click.option(
            "--gate-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=DEFAULT_GATE_TIMEOUT,
            show_default=True,
            callback=_finite,
            metavar="SECONDS",
            help="Time limit for each run of the gate command (the task's --timeout bounds it too).",
        ),
        click.option("--require-commit", is_flag=True, help="Gate: HEAD must move to a new commit."),
        click.option(
            "--max-followups",
            type=click.IntRange(min=0),
            default=2,
            show_default=True,
            help="Follow-up turns after a failed gate or blocking review findings.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            callback=_finite,
            metavar="SECONDS",
            help="Time limit for a whole task (turns, gates, reviews).",
        ),
        click.option(
            "--idle-timeout",
            type=click.FloatRange(min=0, max=1e9),
            default=DEFAULT_IDLE_TIMEOUT,
            show_default=True,
            callback=_finite,
            metavar="SECONDS",
            help="End a turn with a timeout after this long with no event from the agent (0: off).",
        ),
        click.option(
            "--model-timeout",
            type=click.FloatRange(min=0, max=1e9),
            default=DEFAULT_MODEL_TIMEOUT,
            show_default=True,
            callback=_finite,
            metavar="SECONDS",
            help="End and retry a turn after this long with no progress from the model (its "
            "reconnecting notices do not count; a running command does not either; 0: off).",
        ),
        click.option(
            "--retries",
            type=click.IntRange(min=0),
            default=2,
            show_default=True,
            help="Retries of a turn that failed retryably (rate limit, 5xx, dropped connection).",
        ),
        click.option(
            "--retry-delay",
            type=click.FloatRange(min=0, max=3600),
            default=5.0,
            show_default=True,
            callback=_finite,
            metavar="SECONDS",
            help="First retry backoff; it doubles per retry, with jitter (a provider's rate-limit reset "
            "wins).",
        ),
        click.option(
            "--json", "json_output", is_flag=True, help="Write events as JSON Lines, then a summary."
        ),
        click.option(
            "-q", "--quiet", is_flag=True, help="No progress: only the result (run: the final message too)."
        ),
        click.option(
            "-v",
            "--verbose",
            is_flag=True,
            help="More lines: every command's exit code and its output's last lines (batch: every task's "
            "lines above the live view).",
        ),
        click.option(
            "--answer",
            "answers",
            multiple=True,
            metavar="QUESTION=ANSWER",
            help="Canned answer when the agent asks (question id, header or text; repeatable). "
            "Unanswered questions are declined: the agent is told to decide itself.",
        ),
        click.option("--review", is_flag=True, help="Codex review of the changes once the gate passes."),
        click.option(
            "--review-threshold",
            type=click.Choice(PRIORITY_NAMES, case_sensitive=False),
            default="P1",
            show_default=True,
            help="Findings at or above this priority go back to the agent.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def parse_answers(values: Sequence[str]) -> dict[str, str]:
    """``--answer QUESTION=ANSWER`` flags -> canned answers. Raises ``UsageError`` without ``=``."""
    answers: dict[str, str] = {}
    for item in values:
        key, sep, answer = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--answer {item!r}: expected QUESTION=ANSWER (e.g. --answer Database=sqlite)")
        answers[key.strip()] = answer
    return answers


def provider_options(provider: str, config: Sequence[str], answers: Sequence[str] = ()) -> Any:
    """The options object of ``provider``'s registry entry, with the ``-c`` overrides (for the
    providers whose options take a ``config`` mapping) and ``--answer`` canned answers (for those
    whose options take ``canned_answers``)."""
    entry = provider_entry(provider)
    kwargs: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(entry.options_type)}
    overrides = parse_config_overrides(config)
    if overrides:
        if "config" not in names:
            raise UsageError("-c overrides apply to the codex providers only")
        kwargs["config"] = overrides
    canned = parse_answers(answers)
    if canned:
        if "canned_answers" not in names:
            raise UsageError(f"--answer does not apply to the {provider} provider")
        kwargs["canned_answers"] = canned
    return entry.options_type(**kwargs)


def pop_common(kwargs: dict[str, Any]) -> Common:
    names = Common.__dataclass_fields__
    return Common(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
