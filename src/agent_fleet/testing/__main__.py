"""``python -m agent_fleet.testing``: try ``agent-fleet run`` and ``batch`` offline, against a scripted model.

    python -m agent_fleet.testing example tryout      # tryout/repo (a git repository) + tryout/tasks.jsonl
    python -m agent_fleet.testing serve -- agent-fleet batch tryout/tasks.jsonl --cwd tryout/repo --out runs
    python -m agent_fleet.testing serve               # serve until Ctrl-C; prints the env and -c flags
    python -m agent_fleet.testing fleet-report runs   # a synthetic 50,000-task batch record and its report

``serve`` starts a ``ScriptedModelServer`` on loopback answered by the try-out's scripted agent
(``_tryout.tryout_agent``) and a temporary ``CODEX_HOME`` (never ``~/.codex``). Given a command, it runs
it with that environment and the codex ``-c`` overrides appended to its arguments, and exits with its
exit code; without one it prints what to export and which ``-c`` flags to add, and serves until Ctrl-C.
Everything but the model is real: the codex binary, its sandbox, the approval policy, git and the gate.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import click

from agent_fleet.testing._env import scripted_codex_env
from agent_fleet.testing._server import ScriptedModelServer
from agent_fleet.testing._tryout import make_example, tryout_agent


@click.group()
def main() -> None:
    """Try agent-fleet offline: a scripted model (no real model, no credentials, no network)."""


@main.command("example")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def example_command(directory: Path) -> None:
    """Create DIRECTORY/repo (a git repository) and DIRECTORY/tasks.jsonl (three tasks) to try a batch on."""
    try:
        repo, tasks = make_example(directory)
    except FileExistsError as exc:
        raise click.UsageError(f"{exc}: choose another directory") from None
    click.echo(f"repository: {repo}\ntasks:      {tasks}")


@main.command("serve", context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve_command(command: tuple[str, ...]) -> None:
    """Serve the scripted model; run COMMAND (after --) against it with the codex -c overrides appended.

    Without COMMAND: print the environment and the -c flags to use, and serve until Ctrl-C.
    """
    with (
        tempfile.TemporaryDirectory(prefix="agent-fleet-tryout-") as home,
        ScriptedModelServer(responder=tryout_agent) as server,
    ):
        env = scripted_codex_env(server, codex_home=Path(home) / "codex-home")
        overrides = env.codex_args()
        note = f"scripted model at {server.url} (no real model, no credentials, no network)"
        if not command:
            # Handlers first: a Ctrl-C right after the wiring is printed must still stop cleanly.
            stopped = threading.Event()
            signal.signal(signal.SIGINT, lambda *_: stopped.set())
            signal.signal(signal.SIGTERM, lambda *_: stopped.set())
            click.echo(f"# {note}", err=True)
            for key, value in env.env.items():
                click.echo(f"export {key}={shlex.quote(value)}")
            click.echo(f"# add to agent-fleet run / batch:\n{shlex.join(overrides)}")
            click.echo("# serving until Ctrl-C", err=True)
            while not stopped.wait(0.5):
                pass
            return
        argv = [*command, *overrides]
        click.echo(f"# {note}; running: {shlex.join(command)} -c ...", err=True)
        try:
            child = subprocess.Popen(argv, env=env.full_env())
        except OSError as exc:
            raise click.UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # Ctrl-C reaches the child too: let it stop cleanly, keep serving
                continue
    sys.exit(code)


@main.command("fleet-report")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--tasks", type=click.IntRange(min=1), default=50_000, show_default=True, help="How many.")
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed, the same fleet.")
def fleet_report_command(directory: Path, tasks: int, seed: int) -> None:
    """Write a synthetic batch record of TASKS made-up tasks to DIRECTORY (ledger, summary.json,
    report.html): the report page at fleet scale, without running a fleet. Labelled scripted."""
    from agent_fleet.errors import UsageError
    from agent_fleet.testing._fleet import synthetic_batch

    try:
        out = synthetic_batch(directory, tasks, seed=seed)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"report: {(out / 'report.html').resolve()}")


if __name__ == "__main__":
    main(prog_name="python -m agent_fleet.testing")
