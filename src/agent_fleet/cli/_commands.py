"""The commands: each builds library objects from its flags, calls one library function, prints."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_fleet import __version__
from agent_fleet.cli._ask import TerminalAsker, ask_problem, with_asker
from agent_fleet.cli._batch import BatchSettings, force_stop, settings_for, shown_on
from agent_fleet.cli._exits import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_UNAVAILABLE,
    Interrupts,
    die,
    exit_code,
    handled,
    leave,
    preflight,
    run_async,
)
from agent_fleet.cli._final import link
from agent_fleet.cli._options import (
    common_options,
    parse_config_overrides,
    pop_common,
    provider_options,
    read_prompt,
)
from agent_fleet.cli._view import Progress, consoles, result_line, summary_table
from agent_fleet.codex import CodexOptions
from agent_fleet.contract import SANDBOXES, ModelInfo
from agent_fleet.errors import UsageError
from agent_fleet.runner import (
    PROVIDER_NAMES,
    BatchEntry,
    BatchResult,
    Redactor,
    TaskResult,
    make_provider,
    run_batch,
    run_task,
)
from agent_fleet.runner._batch_providers import options_for
from agent_fleet.runner._otel import export_from_environment
from agent_fleet.runner._outage import DEFAULT_OUTAGE_TIMEOUT
from agent_fleet.runner._pricing import load_prices
from agent_fleet.runner.report import write_batch_report

__all__ = ["cli", "main"]


# -- commands ------------------------------------------------------------------------------------------


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: agent-fleet's version and the codex binary's (with the supported range)."""
    if not value or ctx.resilient_parsing:
        return
    from agent_fleet._codex_binary import (
        MINIMUM_CODEX_VERSION,
        PINNED_CODEX_VERSION,
        check_codex_version,
        codex_version,
        find_codex,
    )
    from agent_fleet.errors import ProviderUnavailable

    click.echo(f"agent-fleet {__version__}")
    supported = f"supported {MINIMUM_CODEX_VERSION} to {PINNED_CODEX_VERSION}"
    try:
        binary = find_codex()
        version = codex_version(binary)
    except ProviderUnavailable as exc:
        click.echo(f"codex: {exc.message} ({supported})")
        ctx.exit(0)
    try:
        state = "not the tested version" if check_codex_version(version) else "the tested version"
    except ProviderUnavailable:
        state = "TOO OLD: agent-fleet will not run it"
    click.echo(f"codex {version} ({binary}; {state}; {supported})")
    ctx.exit(0)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show agent-fleet's version and the codex binary's, then exit.",
)
def cli() -> None:
    """Run coding agents (OpenAI Codex, Claude Code) at fleet scale.

    New here? `agent-fleet demo` runs a scripted task end to end, offline, with no credentials.
    """


@cli.command("run")
@click.argument("prompt")
@click.option(
    "-C",
    "--cd",
    "--cwd",
    "cwd",
    type=click.Path(path_type=Path),
    help="Directory the agent works in (default: here).",
)
@click.option(
    "--transcript", type=click.Path(dir_okay=False, path_type=Path), help="Write every event here (JSONL)."
)
@common_options
def run_command(prompt: str, cwd: Path | None, transcript: Path | None, **kwargs: Any) -> None:
    """Run one task: PROMPT (or - for stdin) -> gate -> follow-ups -> result."""
    common = pop_common(kwargs)
    with handled():
        text = read_prompt(prompt)
        if cwd is not None and not cwd.is_dir():
            raise UsageError(f"--cwd {str(cwd)!r} does not exist or is not a directory")
        if transcript is not None:
            _check_writable(transcript)
        options = common.options()
        task = common.template(text, cwd, f"run-{time.strftime('%Y%m%d-%H%M%S')}")
        remote = common.remote()
        progress_console, console = consoles(common.json_output)
        progress = Progress(
            progress_console, json_output=common.json_output, batch=False, verbosity=common.verbosity
        )
        if common.default_approval == "ask" and remote is None:  # the person at this terminal decides
            problem = ask_problem(batch=False, stdin=sys.stdin, terminal=progress_console.is_terminal)
            if problem is not None:
                raise UsageError(problem)
            options = with_asker(options, TerminalAsker(progress), common.provider)
        if remote is None:
            preflight(common.provider, options)

        async def go(stop: asyncio.Event) -> TaskResult:
            with progress:
                if remote is not None:
                    async with remote:
                        return await run_task(
                            task,
                            provider=remote,
                            on_event=progress.on_event,
                            transcript=transcript,
                            stop=stop,
                        )
                return await run_task(
                    task,
                    provider_name=common.provider,
                    options=options,
                    on_event=progress.on_event,
                    transcript=transcript,
                    stop=stop,
                )

        result = run_async(go, progress_console)
        progress.summary(result.to_dict())
        if common.quiet and result.final_text and not common.json_output:
            console.print(Redactor().text(result.final_text.strip()), highlight=False, soft_wrap=True)
        style, line = result_line(result)
        console.print(Text(line, style=style))
        if result.transcript is not None:
            console.print(f"transcript: {result.transcript}")
        die(exit_code(result))


@cli.command("batch")
@click.argument(
    "tasks_file", metavar="[TASKS.jsonl]", required=False, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=4, show_default=True, help="Tasks at a time."
)
@click.option(
    "--worktrees", is_flag=True, help="Each task in its own git worktree on branch agent-fleet/<id>."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The batch's record: ledger (batch.db), transcripts, summary.json, report.html. Must not hold a "
    "batch already, nor lie in a git working tree the agents work in unless git ignores it "
    "(default: a new directory under $XDG_STATE_HOME/agent-fleet/batches).",
)
@click.option(
    "--resume",
    "resume_dir",
    metavar="OUT",
    type=click.Path(file_okay=False, path_type=Path),
    help="Continue the batch recorded in OUT: succeeded tasks are kept, interrupted ones resume their "
    "session, queued ones start. Its settings are reused; flags given here override them (-c overrides "
    "are never recorded: give them again).",
)
@click.option(
    "--rerun",
    type=click.Choice(["failed"]),
    help="With --resume: also run the failed tasks again, afresh, on their branches.",
)
@click.option(
    "-C",
    "--cd",
    "--cwd",
    "cwd",
    type=click.Path(path_type=Path),
    help="Directory for tasks without a cwd (default: here).",
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
@click.option(
    "--push",
    is_flag=True,
    help="With --repo-url: push each task's branch agent-fleet/<id> to that repository (never forced).",
)
@click.option(
    "--exclude-node",
    "exclude_nodes",
    multiple=True,
    metavar="NODE",
    help="Ray: leave this node out (node id or a prefix of it, host name or address; repeatable).",
)
@click.option(
    "--fence-timeout",
    type=click.FloatRange(min=0, min_open=True, max=3600),
    metavar="SECONDS",
    help="Ray: a node cut off from its raylet or the GCS stops by itself within this bound, and no "
    "work goes to a node not heard from within it [default: 10].",
)
@click.option(
    "--prices",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Price table (TOML or JSON, per model): adds a cost to the summary and the report.",
)
@click.option("--raw-deltas", is_flag=True, help="Transcripts keep every streamed text fragment.")
@click.option(
    "--outage-timeout",
    type=click.FloatRange(min=0, max=1e9),
    default=DEFAULT_OUTAGE_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="When every running task lost the model, the batch pauses; it stops (exit 75, resumable) "
    "once the model stayed unreachable this long (0: wait forever).",
)
@common_options
def batch_command(
    tasks_file: Path | None,
    resume_dir: Path | None,
    rerun: str | None,
    prices: Path | None,
    raw_deltas: bool,
    outage_timeout: float,
    **kwargs: Any,
) -> None:
    """Run every task of TASKS.jsonl on one shared provider (or one per Ray node), JOBS at a time.

    The batch's record is a ledger in --out (default: a new directory under
    $XDG_STATE_HOME/agent-fleet/batches, printed at the start and as the last line), written as each
    task's state changes; a stopped batch continues with `--resume OUT`. Ctrl-C (or SIGTERM, SIGHUP)
    stops starting tasks and interrupts running turns (exit 130; 143 for SIGTERM, 129 for SIGHUP); a
    second one leaves within two seconds. A batch that stopped for a reason that may pass (the model
    unreachable, the provider process died, a full disk) exits 75. The record stays true either way.
    """
    with handled():
        settings: BatchSettings = settings_for(
            click.get_current_context(), tasks_file, resume_dir, rerun, kwargs
        )
        common = settings.common
        options = common.options()
        template = common.template("(per task)", settings.cwd, "batch")
        remote = common.remote()
        if remote is not None and settings.backend != "local":
            raise UsageError("--server runs the batch's sessions on the daemon: it needs --backend local")
        if common.default_approval == "ask" and remote is None:
            raise UsageError(ask_problem(batch=True, stdin=sys.stdin, terminal=False) or "")
        # With ray each node checks its own binary and credential; with --server the daemon does.
        if settings.backend == "local" and remote is None:
            for name in sorted({common.provider, *settings.providers}):
                preflight(name, options_for(name, options))
        price_table = load_prices(prices) if prices is not None else None
        progress_console, console = consoles(common.json_output)
        progress = Progress(
            progress_console, json_output=common.json_output, batch=True, verbosity=common.verbosity
        )
        progress.expect(settings.total, settings.done, settings.queued)
        interrupts = Interrupts(on_force=lambda: force_stop(settings.out))
        record = settings.out.expanduser().absolute()
        progress_console.print(f"record: {record}", highlight=False, soft_wrap=True)

        def on_result(entry: BatchEntry) -> None:
            if not progress.live_mode:
                style, line = result_line(entry.result)
                progress_console.print(Text(f"[{entry.result.task_id}] {line}", style=style))

        warnings: list[Text] = []

        def warn(text: str) -> None:
            warnings.append(Text(f"warning: {text}", style="yellow"))
            progress_console.print(warnings[-1], highlight=False, soft_wrap=True)

        async def go(stop: asyncio.Event) -> BatchResult:
            with progress:
                # With --server the batch is shown on the daemon's dashboard (a stop there stops it here).
                async with shown_on(remote, settings.out, settings.total, stop) as shown:
                    result = await run_batch(
                        settings.tasks,
                        template=template,
                        out_dir=settings.out,
                        jobs=settings.jobs,
                        worktrees=settings.worktrees,
                        provider=remote,
                        provider_name=common.provider,
                        options=options,
                        cwd=settings.cwd,
                        on_event=shown.wrap(progress.on_event),
                        on_result=on_result,
                        stop=stop,
                        backend=settings.backend,
                        ray_address=settings.ray_address,
                        repo_url=settings.repo_url,
                        push=settings.push,
                        exclude_nodes=settings.exclude_nodes,
                        fence_timeout=settings.fence_timeout,
                        resume=settings.resume,
                        rerun_failed=settings.rerun_failed,
                        meta=settings.meta,
                        prices=price_table,
                        raw_deltas=raw_deltas,
                        on_warning=warn,
                        outage_timeout=outage_timeout or None,
                    )
                    shown.ended(result)
                    return result

        export = export_from_environment()  # OpenTelemetry export when OTEL_* asks for it
        if export is not None:
            export.install()
        try:
            result = run_async(go, progress_console, interrupts)
        finally:
            if export is not None:
                export.shutdown()
        progress.summary(result.to_dict())
        console.print(summary_table(result, console.width))
        if progress.live_mode:  # the live view scrolled them away
            for line in warnings:
                console.print(line, highlight=False, soft_wrap=True)
        console.print(f"summary: {result.summary_path or 'not written (the ledger is the record)'}")
        if result.report_path is not None:
            console.print(link("report: ", result.report_path), highlight=False, soft_wrap=True)
        stopped = Redactor().text(result.stopped) if result.stopped else None
        if stopped:
            console.print(Text(f"batch stopped: {stopped}", style="red"))
            states = (result.summary or {}).get("states") or {}
            unfinished = any(states.get(k) for k in ("queued", "running", "interrupted"))
            if not result.fatal or unfinished:  # (fatal: once the cause is fixed, e.g. a Ray node back)
                console.print(f"continue it with: agent-fleet batch --resume {record}")
        console.print(f"record: {record}", highlight=False, soft_wrap=True)
        if interrupts.presses:
            die(interrupts.exit_code)
        if result.fatal:
            die(EXIT_UNAVAILABLE)
        if stopped:  # stopped for a reason that may pass: the last line says why and what to do
            die(EXIT_STOPPED, f"{stopped}; stopped, resumable: agent-fleet batch --resume {record}")
        die(EXIT_OK if result.ok else EXIT_FAILED)


@cli.command("report")
@click.argument("source", metavar="OUT", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Where to write the page (default: OUT/report.html).",
)
@click.option(
    "--prices",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Price table (TOML or JSON, per model): (re)computes the cost column.",
)
def report_command(source: Path, output: Path | None, prices: Path | None) -> None:
    """Write the batch report page from OUT/summary.json (OUT: a batch's --out directory)."""
    with handled():
        path = write_batch_report(source, output=output, prices=load_prices(prices) if prices else None)
        click.echo(f"report: {path}  (open it in a browser: file://{path.resolve()})")


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

    with handled():
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
        progress = Progress(console, json_output=False, batch=False)

        async def go(stop: asyncio.Event) -> Any:
            with progress:
                return await run_demo(workdir=workdir, on_event=progress.on_event, stop=stop)

        demo = run_async(go, console)
        style, line = result_line(demo.result)
        console.print(Text(line, style=style))
        console.print(f"repository: {demo.repo}")
        console.print("git log:\n" + demo.log.rstrip())
        console.print(f"transcript: {demo.transcript}")
        console.print('next: `agent-fleet doctor`, then `agent-fleet run "your task" --require-commit`')
        die(exit_code(demo.result))


@cli.command("models")
@click.option(
    "--provider", type=click.Choice(PROVIDER_NAMES), default="codex", show_default=True, help="Whose models."
)
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
@click.option("--all", "include_hidden", is_flag=True, help="Include hidden models.")
@click.option("--json", "json_output", is_flag=True, help="Print the provider's raw model list as JSON.")
def models_command(provider: str, config: tuple[str, ...], include_hidden: bool, json_output: bool) -> None:
    """List the models a provider offers."""
    with handled():
        options = provider_options(provider, config)

        async def go(stop: asyncio.Event) -> list[ModelInfo]:
            async with make_provider(provider, options) as live:
                return await live.list_models(include_hidden=include_hidden)

        models = run_async(go, Console(stderr=True))
        if json_output:
            click.echo(json.dumps([dict(m.raw) for m in models], indent=2))
            die(EXIT_OK)
        table = Table(box=None, pad_edge=False)
        for name in ("model", "name", "default effort", "description"):
            table.add_column(name, overflow="fold")
        for m in models:
            table.add_row(
                m.id + (" (default)" if m.is_default else ""),
                m.name,
                m.default_effort or "",
                m.description,
            )
        Console(highlight=False).print(table)
        die(EXIT_OK)


@cli.command("doctor")
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
@click.option(
    "--sandbox",
    type=click.Choice(SANDBOXES),
    help="The sandbox your runs use (danger-full-access: reports that the policy is the only guard).",
)
@click.option(
    "--provider",
    type=click.Choice(("codex", "claude")),
    default="codex",
    show_default=True,
    help="codex: the codex binary (both codex providers); claude: the Claude Code CLI and its sandbox.",
)
@click.option(
    "--json", "json_output", is_flag=True, help="Print the checks as a JSON object (name, ok, detail, hint)."
)
def doctor_command(config: tuple[str, ...], sandbox: str | None, provider: str, json_output: bool) -> None:
    """Check the codex binary, credentials, sandbox and app-server (--provider claude: the Claude Code
    CLI and its sandbox)."""
    from agent_fleet.runner.doctor import diagnose, diagnose_claude

    with handled():
        if provider == "claude":
            if config:
                raise UsageError("-c overrides are codex's: doctor --provider claude takes none")

            async def go(stop: asyncio.Event) -> Any:
                return await diagnose_claude(sandbox=sandbox)

        else:
            options = CodexOptions(config=parse_config_overrides(config))

            async def go(stop: asyncio.Event) -> Any:
                return await diagnose(options, sandbox=sandbox)

        console = Console(highlight=False, soft_wrap=True, stderr=json_output)
        checks = run_async(go, console)
        broken = [c.name for c in checks if not c.ok]
        if json_output:
            report = {"ok": not broken, "checks": [dataclasses.asdict(c) for c in checks]}
            click.echo(json.dumps(report, indent=2))
            die(EXIT_FAILED if broken else EXIT_OK)
        for check in checks:
            mark, style = ("ok", "green") if check.ok else ("FAIL", "red")
            line = Text(f"{mark:>4}  {check.name}: {check.detail}")
            line.stylize(style, 0, 4)
            console.print(line)
            if not check.ok and check.hint:
                console.print(f"      -> {check.hint}")
        if broken:
            die(EXIT_FAILED, f"doctor: {', '.join(broken)} need attention (see above)")
        die(EXIT_OK)


def _check_writable(path: Path) -> None:
    """A file we will append to can be created (its directory made): else a usage error, before work."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except FileExistsError as exc:  # mkdir met a file where a directory must be: say which
        blocker = next(
            (p for p in (path.parent, *path.parent.parents) if p.exists() and not p.is_dir()), None
        )
        what = f"{str(blocker)!r} is a file, not a directory" if blocker else (exc.strerror or str(exc))
        raise UsageError(f"cannot create {str(path)!r}: {what}") from exc
    except OSError as exc:
        raise UsageError(f"cannot create {str(path)!r}: {exc.strerror or exc}") from exc


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="agent-fleet")
    except SystemExit as exc:
        leave(exc.code)
    leave(0)
