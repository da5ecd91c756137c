"""The ``agent-fleet`` command line: a thin shell over the library."""

from __future__ import annotations

import click

from agent_fleet import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-fleet")
def cli() -> None:
    """Run coding agents (OpenAI Codex, Claude Code) at fleet scale."""


def main() -> None:
    """Console-script entry point."""
    cli()
