"""The ``agent-fleet`` command line: a thin shell over ``agent_fleet.runner``.

Every command builds library objects from its flags, calls one library function (``run_task``,
``run_batch``, ``run_demo``, ``diagnose``, ``CodexProvider.list_models``) and prints the result.

Exit codes: 0 success; 1 the task failed (gate never passed, turn failed, stopped); 2 usage error (bad
flag, missing directory, bad regular expression, bad tasks file); 3 the provider is unavailable or the
credential is missing or refused. Every failure prints one line saying what to do, never a traceback
(set ``AGENT_FLEET_DEBUG=1`` to get one for an internal error).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import time
import tomllib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent_fleet import __version__
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.contract import MODES, SANDBOXES, PermissionConfig, Spec
from agent_fleet.errors import AgentFleetError, ProviderUnavailable, UsageError
from agent_fleet.events import AssistantMessage, Error, Reasoning, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.policy import ApprovalPolicy
from agent_fleet.runner import (
    PROVIDER_NAMES,
    GateConfig,
    Redactor,
    ReviewConfig,
    Task,
    TaskEvent,
    TaskResult,
    check_provider,
    event_record,
    run_task,
)
from agent_fleet.runner._delta_redact import DeltaCoalescer
from agent_fleet.runner.batch import BatchEntry, BatchResult, load_tasks, run_batch
from agent_fleet.runner.review import PRIORITY_NAMES, parse_priority

__all__ = ["cli", "describe", "main", "parse_config_overrides"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
_T = TypeVar("_T")


def _die(code: int, message: str = "") -> NoReturn:
    """Print ``message`` (one line) to stderr and leave with ``code``."""
    if message:
        click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


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


def _read_prompt(prompt: str) -> str:
    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt


def _permission(allow: Sequence[str], deny: Sequence[str], default: str) -> PermissionConfig | None:
    if not allow and not deny and default == "allow":
        return None
    config = PermissionConfig(
        allow_patterns=tuple(allow),
        disallow_patterns=tuple(deny),
        default="deny" if default == "deny" else "allow",
    )
    ApprovalPolicy(config)  # a bad regular expression is a UsageError naming it
    return config


@dataclass(frozen=True, slots=True, kw_only=True)
class _Common:
    """Flags shared by ``run`` and ``batch``."""

    provider: str
    model: str | None
    effort: str | None
    sandbox: str | None
    mode: str
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    default_approval: str
    config: tuple[str, ...]
    gate_cmd: str | None
    require_commit: bool
    max_followups: int
    timeout: float | None
    json_output: bool
    review: bool
    review_threshold: str

    def options(self) -> CodexOptions:
        overrides = parse_config_overrides(self.config)
        if overrides and self.provider == "claude":
            raise UsageError("-c overrides apply to the codex providers only")
        return CodexOptions(config=overrides)

    def template(self, prompt: str, cwd: Path | None, task_id: str) -> Task:
        review = None
        if self.review:
            if self.provider == "claude":
                raise UsageError("--review needs a codex provider (--provider codex or codex-exec)")
            review = ReviewConfig(threshold=parse_priority(self.review_threshold))
        spec = Spec(
            prompt=prompt,
            cwd=str(cwd) if cwd is not None else None,
            model=self.model,
            reasoning_effort=self.effort,
            sandbox=self.sandbox,  # type: ignore[arg-type]  # validated by click.Choice
            mode=self.mode,  # type: ignore[arg-type]
            permission=_permission(self.allow, self.deny, self.default_approval),
        )
        return Task(
            id=task_id,
            spec=spec,
            gate=GateConfig(require_commit=self.require_commit, command=self.gate_cmd),
            review=review,
            max_followups=self.max_followups,
            timeout=self.timeout,
        )


_F = TypeVar("_F", bound=Callable[..., Any])


def _common_options(fn: _F) -> _F:
    options = [
        click.option(
            "--provider",
            type=click.Choice(PROVIDER_NAMES),
            default="codex",
            show_default=True,
            help="codex: the app-server (one child, many sessions); codex-exec: one `codex exec` per turn; "
            "claude: Claude Code.",
        ),
        click.option("--model", help="Model to use (default: the provider's)."),
        click.option("--effort", help="Reasoning effort (e.g. low, medium, high)."),
        click.option("--sandbox", type=click.Choice(SANDBOXES), help="Sandbox for the agent's commands."),
        click.option("--mode", type=click.Choice(MODES), default="build", show_default=True),
        click.option(
            "--allow", multiple=True, metavar="REGEX", help="Accept only commands matching (repeatable)."
        ),
        click.option(
            "--deny", multiple=True, metavar="REGEX", help="Decline commands matching (repeatable)."
        ),
        click.option(
            "--default-approval",
            type=click.Choice(["allow", "deny"]),
            default="allow",
            show_default=True,
            help="Decision for commands no rule decides.",
        ),
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
            metavar="SECONDS",
            help="Time limit for a whole task (turns, gates, reviews).",
        ),
        click.option(
            "--json", "json_output", is_flag=True, help="Write events as JSON Lines, then a summary."
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


def _common(kwargs: dict[str, Any]) -> _Common:
    names = _Common.__dataclass_fields__
    return _Common(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})


# -- running coroutines with Ctrl-C as a clean stop ------------------------------------------------------


def _run_async(factory: Callable[[asyncio.Event], Coroutine[Any, Any, _T]], console: Console) -> _T:
    """Run ``factory(stop)``. The first Ctrl-C sets ``stop`` (a clean stop); a second one cancels."""

    async def main() -> _T:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        current = asyncio.current_task()
        presses = 0

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                console.print("[yellow]stopping: interrupting running turns (Ctrl-C again to force)[/]")
                stop.set()
            elif current is not None:
                current.cancel()

        installed = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        try:
            return await factory(stop)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        _die(EXIT_FAILED, "interrupted")


# -- describing events for people ------------------------------------------------------------------------


def _command_text(command: Any) -> str:
    """``/bin/bash -lc 'git status'`` -> ``git status``."""
    text = command if isinstance(command, str) else shlex.join(str(c) for c in command or [])
    with contextlib.suppress(ValueError):
        words = shlex.split(text)
        if (
            len(words) == 3
            and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
            and words[1] in ("-c", "-lc")
        ):
            return words[2]
    return text


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(task_event: TaskEvent) -> str | None:
    """One line for a person, or None for events not worth a line (deltas, usage, raw notifications)."""
    event = task_event.event
    prefix = "[review] " if task_event.source == "review" else ""
    match event:
        case ToolUse(name="shell", synthetic=False, input=data):
            return f"{prefix}$ {_command_text(data.get('command'))}"
        case ToolUse(name="apply_patch", synthetic=False, input=data):
            changes = data.get("changes") or []
            paths = ", ".join(f"{c.get('kind')} {Path(str(c.get('path'))).name}" for c in changes)
            return f"{prefix}edit: {paths}"
        case ToolUse(synthetic=False, name=name):
            return f"{prefix}tool: {name}"
        case ToolResult(synthetic=False, exit_code=code) if code not in (None, 0):
            return f"{prefix}  (exit {code})"
        case System(subtype="approval_denied", data=data):
            what = data.get("command")
            shown = (
                _command_text(what)
                if what
                else ", ".join(map(str, data.get("paths") or [])) or data.get("kind")
            )
            return f"{prefix}declined: {shown} ({data.get('rule') or 'policy'}: {data.get('reason')})"
        case AssistantMessage(text=text) if task_event.source == "agent":
            return f"agent: {_first_line(text)}"
        case Reasoning(text=text) if task_event.source == "agent":
            return f"thinking: {_first_line(text)}"
        case Error(code=code, message=message):
            return f"{prefix}turn ended: {code}: {_first_line(message)}"
        case System(subtype="runner.gate", data=data):
            return (
                f"gate: {data.get('summary')}"
                if data.get("passed")
                else f"gate FAILED: {data.get('summary')}"
            )
        case System(subtype="runner.followup", data=data):
            return (
                f"follow-up {data.get('number')}/{data.get('limit')}: {_first_line(str(data.get('prompt')))}"
            )
        case System(subtype="runner.review_started", data=data):
            target = data.get("target") or {}
            what = target.get("sha") or target.get("branch") or target.get("type")
            return f"review #{data.get('number')}: {target.get('type')} {str(what)[:12]}"
        case System(subtype="runner.review", data=data):
            findings = data.get("findings") or []
            lines = [f"review: {len(findings)} finding(s), {data.get('blocking')} blocking"]
            lines += [f"  - {f.get('title')}" for f in findings]
            return "\n".join(lines)
        case System(subtype="runner.review_skipped", data=data):
            return f"review skipped: {data.get('reason')}"
        case System(subtype="runner.attempt_failed", data=data):  # --backend ray: a node or actor died
            return f"{_first_line(str(data.get('reason')))}" + (" (retrying)" if data.get("retry") else "")
    return None


# -- progress output -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    task_id: str
    started: float = field(default_factory=time.monotonic)
    step: str = "starting"
    status: str = "running"
    commands: list[str] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    tokens: int = 0
    review_tokens: int = 0
    followups: int = 0
    ended: float | None = None

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


class _Progress:
    """Shows a task's (or a batch's) events: rich ``Live`` on a terminal, plain lines otherwise, JSON Lines
    with ``--json`` (then people's output goes to stderr)."""

    def __init__(
        self, console: Console, *, json_output: bool, batch: bool, out: IO[str] | None = None
    ) -> None:
        self.console = console
        self.json_output = json_output
        self.batch = batch
        self.out = out or sys.stdout
        self.live_mode = console.is_terminal and not json_output
        self.rows: dict[str, _Row] = {}
        self.redactor = Redactor()
        self.deltas = DeltaCoalescer(self.redactor)
        self.live: Live | None = None
        self.started = time.monotonic()

    def __enter__(self) -> _Progress:
        if self.live_mode:
            self.live = Live(
                console=self.console, refresh_per_second=4, get_renderable=self.render, transient=False
            )
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def row(self, task_id: str) -> _Row:
        if task_id not in self.rows:
            self.rows[task_id] = _Row(task_id)
        return self.rows[task_id]

    def on_event(self, task_event: TaskEvent) -> None:
        if self.json_output:
            for streamed in self.deltas.events(task_event):  # deltas held back, redacted as a whole
                record = event_record(streamed, self.redactor)
                self.out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self.out.flush()
        row = self.row(task_event.task_id)
        event = task_event.event
        line = describe(task_event)
        if line is not None:
            line = self.redactor.text(line)
        match event:
            case TokenUsage(total_tokens=total):
                if task_event.source == "agent":
                    row.tokens = total
                else:
                    row.review_tokens = total
            case ToolUse(name="shell", synthetic=False, input=data) if task_event.source == "agent":
                row.commands.append(self.redactor.text(_command_text(data.get("command"))))
            case System(subtype="approval_denied"):
                if line:
                    row.declined.append(line.removeprefix("declined: "))
            case System(subtype="runner.followup", data=data):
                row.followups = int(data.get("number") or 0)
            case System(subtype="runner.gate_started"):
                row.step = "gate"
            case System(subtype="runner.review_started"):
                row.step = "review"
            case System(subtype="runner.finished", data=data):
                row.status = str(data.get("status"))
                row.step = _first_line(self.redactor.text(str(data.get("reason"))), 80)
                row.ended = time.monotonic()
        if line and not line.startswith("  (exit") and row.ended is None:
            row.step = _first_line(line, 80)
        if line and not self.live_mode:
            tag = f"[{task_event.task_id}] " if self.batch else ""
            for part in line.splitlines():
                self.console.print(Text(tag + part), highlight=False, soft_wrap=True)

    def render(self) -> RenderableType:
        if self.batch:
            table = Table(box=None, pad_edge=False)
            for name in ("task", "status", "step", "follow-ups", "elapsed", "tokens"):
                table.add_column(name)
            for row in self.rows.values():
                table.add_row(
                    row.task_id,
                    row.status,
                    row.step,
                    str(row.followups),
                    f"{row.elapsed():.0f}s",
                    f"{row.tokens + row.review_tokens:,}",
                )
            declined = [f"[{r.task_id}] {d}" for r in self.rows.values() for d in r.declined][-5:]
            parts: list[RenderableType] = [table]
            if declined:
                parts.append(Text("declined:\n" + "\n".join(declined), style="yellow"))
            return Group(*parts)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for row in self.rows.values():
            grid.add_row("step", row.step)
            recent = row.commands[-5:]
            grid.add_row("commands", f"{len(row.commands)}" + ("".join(f"\n$ {c}" for c in recent)))
            grid.add_row("declined", "\n".join(row.declined) if row.declined else "none")
            grid.add_row(
                "progress",
                f"follow-ups {row.followups}   elapsed {row.elapsed():.1f}s   "
                f"tokens {row.tokens + row.review_tokens:,}",
            )
        return grid

    def summary(self, payload: dict[str, Any]) -> None:
        if self.json_output:
            self.out.write(json.dumps({"type": "summary", **payload}, default=str) + "\n")
            self.out.flush()


_HINTS = {
    "gate_failed": "fix the gate by hand, or allow more --max-followups",
    "review_failed": "address the findings, or allow more --max-followups / raise --review-threshold",
    "turn_failed": "see the transcript (--transcript FILE) for what the agent did",
    "timeout": "allow more time with --timeout",
    "cancelled": "run it again when ready",
}


def _result_line(result: TaskResult) -> tuple[str, str]:
    took = f"{result.duration:.1f}s, {result.followups} follow-up(s), {result.tokens:,} tokens"
    reason = Redactor().text(result.reason)
    if result.ok:
        return "green", f"succeeded ({took}): {reason}"
    hint = _HINTS.get(result.error_code or "", "")
    return "red", f"{result.status} ({took}): {reason}" + (f" — {hint}" if hint else "")


def _exit_code(result: TaskResult) -> int:
    if result.ok:
        return EXIT_OK
    return EXIT_UNAVAILABLE if result.fatal else EXIT_FAILED


def _consoles(json_output: bool) -> tuple[Console, Console]:
    """(progress console, message console): with --json people's output goes to stderr."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if json_output:
        return err, err
    out = Console(highlight=False, soft_wrap=True)
    return out, out


def _preflight(provider: str, options: CodexOptions) -> None:
    try:
        check_provider(provider, options)
    except ProviderUnavailable as exc:
        _die(EXIT_UNAVAILABLE, exc.message)


# -- commands ------------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-fleet")
def cli() -> None:
    """Run coding agents (OpenAI Codex, Claude Code) at fleet scale.

    New here? `agent-fleet demo` runs a scripted task end to end, offline, with no credentials.
    """


@cli.command("run")
@click.argument("prompt")
@click.option("--cwd", type=click.Path(path_type=Path), help="Directory the agent works in (default: here).")
@click.option(
    "--transcript", type=click.Path(dir_okay=False, path_type=Path), help="Write every event here (JSONL)."
)
@_common_options
def run_command(prompt: str, cwd: Path | None, transcript: Path | None, **kwargs: Any) -> None:
    """Run one task: PROMPT (or - for stdin) -> gate -> follow-ups -> result."""
    common = _common(kwargs)
    with _handled():
        text = _read_prompt(prompt)
        if cwd is not None and not cwd.is_dir():
            raise UsageError(f"--cwd {str(cwd)!r} does not exist or is not a directory")
        options = common.options()
        task = common.template(text, cwd, f"run-{time.strftime('%Y%m%d-%H%M%S')}")
        _preflight(common.provider, options)
        progress_console, console = _consoles(common.json_output)
        progress = _Progress(progress_console, json_output=common.json_output, batch=False)

        async def go(stop: asyncio.Event) -> TaskResult:
            with progress:
                return await run_task(
                    task,
                    provider_name=common.provider,
                    options=options,
                    on_event=progress.on_event,
                    transcript=transcript,
                    stop=stop,
                )

        result = _run_async(go, progress_console)
        progress.summary(result.to_dict())
        style, line = _result_line(result)
        console.print(Text(line, style=style))
        if result.transcript is not None:
            console.print(f"transcript: {result.transcript}")
        _die(_exit_code(result))


@cli.command("batch")
@click.argument("tasks_file", metavar="TASKS.jsonl", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=4, show_default=True, help="Tasks at a time."
)
@click.option(
    "--worktrees", is_flag=True, help="Each task in its own git worktree on branch agent-fleet/<id>."
)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Transcripts + summary.json."
)
@click.option(
    "--cwd", type=click.Path(path_type=Path), help="Directory for tasks without a cwd (default: here)."
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: one provider here; ray: one provider per node of a Ray cluster, JOBS per node "
    "(needs agent-fleet[ray]).",
)
@click.option(
    "--ray-address", metavar="ADDRESS", help="Ray cluster to use (default: $RAY_ADDRESS, else a local one)."
)
@click.option(
    "--repo-url",
    metavar="URL",
    help="Ray: a git URL each node clones (implies --worktrees; tasks have no cwd).",
)
@_common_options
def batch_command(
    tasks_file: Path,
    jobs: int,
    worktrees: bool,
    out_dir: Path | None,
    cwd: Path | None,
    backend: str,
    ray_address: str | None,
    repo_url: str | None,
    **kwargs: Any,
) -> None:
    """Run every task of TASKS.jsonl on one shared provider (or one per Ray node), JOBS at a time."""
    common = _common(kwargs)
    with _handled():
        tasks = load_tasks(tasks_file)
        if cwd is not None and not cwd.is_dir():
            raise UsageError(f"--cwd {str(cwd)!r} does not exist or is not a directory")
        if backend != "ray" and (ray_address is not None or repo_url is not None):
            raise UsageError("--ray-address and --repo-url need --backend ray")
        options = common.options()
        template = common.template("(per task)", cwd, "batch")
        out = out_dir or Path(f"agent-fleet-batch-{time.strftime('%Y%m%d-%H%M%S')}")
        if backend == "local":  # with ray each node checks its own binary and credential
            _preflight(common.provider, options)
        progress_console, console = _consoles(common.json_output)
        progress = _Progress(progress_console, json_output=common.json_output, batch=True)

        def on_result(entry: BatchEntry) -> None:
            if not progress.live_mode:
                style, line = _result_line(entry.result)
                progress_console.print(Text(f"[{entry.result.task_id}] {line}", style=style))

        async def go(stop: asyncio.Event) -> BatchResult:
            with progress:
                return await run_batch(
                    tasks,
                    template=template,
                    out_dir=out,
                    jobs=jobs,
                    worktrees=worktrees,
                    provider_name=common.provider,
                    options=options,
                    cwd=cwd,
                    on_event=progress.on_event,
                    on_result=on_result,
                    stop=stop,
                    backend=backend,
                    ray_address=ray_address,
                    repo_url=repo_url,
                )

        result = _run_async(go, progress_console)
        progress.summary(result.to_dict())
        console.print(_summary_table(result))
        console.print(f"summary: {result.summary_path}")
        if result.stopped:
            console.print(Text(f"batch stopped: {Redactor().text(result.stopped)}", style="red"))
        if result.fatal:
            _die(EXIT_UNAVAILABLE)
        _die(EXIT_OK if result.ok else EXIT_FAILED)


def _summary_table(result: BatchResult) -> Table:
    table = Table(title="agent-fleet batch")
    for name in ("task", "status", "follow-ups", "duration", "tokens", "branch", "reason"):
        table.add_column(name, overflow="fold")
    styles = {"succeeded": "green", "failed": "red", "error": "red"}
    redactor = Redactor()
    for entry in result.entries:
        r = entry.result
        table.add_row(
            r.task_id,
            Text(r.status, style=styles.get(r.status, "yellow")),
            str(r.followups),
            f"{r.duration:.1f}s",
            f"{r.tokens:,}",
            entry.branch or "",
            _first_line(redactor.text(r.reason), 80)
            + (f" (worktree kept: {entry.worktree})" if entry.worktree else ""),
        )
    return table


@cli.command("demo")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Work here (default: a temp dir).",
)
def demo_command(workdir: Path | None) -> None:
    """A scripted task end to end: offline, no credentials, the real codex binary."""
    from agent_fleet.runner.demo import DEMO_PROMPT, run_demo

    with _handled():
        console = Console(highlight=False, soft_wrap=True)
        console.print(
            Text(
                "SCRIPTED DEMO: the real codex binary, sandbox and approval policy, driven by agent-fleet's "
                "built-in scripted model (no real model, no credentials, no network).",
                style="bold cyan",
            )
        )
        console.print(f"task: {DEMO_PROMPT}")
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
            if any(workdir.iterdir()):
                raise UsageError(f"--dir {str(workdir)!r} is not empty")
        progress = _Progress(console, json_output=False, batch=False)

        async def go(stop: asyncio.Event) -> Any:
            with progress:
                return await run_demo(workdir=workdir, on_event=progress.on_event, stop=stop)

        demo = _run_async(go, console)
        style, line = _result_line(demo.result)
        console.print(Text(line, style=style))
        console.print(f"repository: {demo.repo}")
        console.print("git log:\n" + demo.log.rstrip())
        console.print(f"transcript: {demo.transcript}")
        console.print('next: `agent-fleet doctor`, then `agent-fleet run "your task" --require-commit`')
        _die(_exit_code(demo.result))


@cli.command("models")
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
@click.option("--all", "include_hidden", is_flag=True, help="Include hidden models.")
@click.option("--json", "json_output", is_flag=True, help="Print the raw model list as JSON.")
def models_command(config: tuple[str, ...], include_hidden: bool, json_output: bool) -> None:
    """List the models codex offers (model/list)."""
    with _handled():
        options = CodexOptions(config=parse_config_overrides(config))

        async def go(stop: asyncio.Event) -> list[dict[str, Any]]:
            async with CodexProvider(options) as provider:
                return await provider.list_models(include_hidden=include_hidden)

        models = _run_async(go, Console(stderr=True))
        if json_output:
            click.echo(json.dumps(models, indent=2))
            _die(EXIT_OK)
        table = Table(box=None, pad_edge=False)
        for name in ("model", "name", "default effort", "description"):
            table.add_column(name, overflow="fold")
        for m in models:
            model = str(m.get("model") or m.get("id"))
            table.add_row(
                model + (" (default)" if m.get("isDefault") else ""),
                str(m.get("displayName") or ""),
                str(m.get("defaultReasoningEffort") or ""),
                str(m.get("description") or ""),
            )
        Console(highlight=False).print(table)
        _die(EXIT_OK)


@cli.command("doctor")
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
def doctor_command(config: tuple[str, ...]) -> None:
    """Check the codex binary, credentials, sandbox and app-server."""
    from agent_fleet.runner.doctor import diagnose

    with _handled():
        options = CodexOptions(config=parse_config_overrides(config))

        async def go(stop: asyncio.Event) -> Any:
            return await diagnose(options)

        console = Console(highlight=False, soft_wrap=True)
        checks = _run_async(go, console)
        for check in checks:
            mark, style = ("ok", "green") if check.ok else ("FAIL", "red")
            line = Text(f"{mark:>4}  {check.name}: {check.detail}")
            line.stylize(style, 0, 4)
            console.print(line)
            if not check.ok and check.hint:
                console.print(f"      -> {check.hint}")
        broken = [c.name for c in checks if not c.ok]
        if broken:
            _die(EXIT_FAILED, f"doctor: {', '.join(broken)} need attention (see above)")
        _die(EXIT_OK)


# -- error handling ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _handled() -> Iterator[None]:
    """Turn library errors into one line and an exit code (never a traceback)."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        raise
    except UsageError as exc:
        _die(EXIT_USAGE, str(exc))
    except ProviderUnavailable as exc:
        _die(EXIT_UNAVAILABLE, exc.message)
    except AgentFleetError as exc:
        _die(EXIT_FAILED, _first_line(str(exc), 400))
    except Exception as exc:
        if os.environ.get("AGENT_FLEET_DEBUG"):
            raise
        _die(
            EXIT_FAILED, f"internal error: {type(exc).__name__}: {exc} (set AGENT_FLEET_DEBUG=1 for details)"
        )


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="agent-fleet")
