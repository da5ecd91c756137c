"""The ``agent-fleet`` command line: a thin shell over ``agent_fleet.runner``.

Every command builds library objects from its flags, calls one library function (``run_task``,
``run_batch``, ``run_demo``, ``diagnose``, ``Provider.list_models``, ``CodexProvider.login_api_key`` /
``login_chatgpt_device_code`` / ``logout`` for ``login`` and ``logout``) and prints the result.
``agent-fleet --version`` names agent-fleet's version and the codex binary's, with the supported range.

Exit codes: 0 success; 1 the task failed (gate never passed, turn failed, stopped); 2 usage error (bad
flag, missing directory, bad regular expression, bad tasks file, a batch's ``--out`` inside a git working
tree the agents work in that git does not ignore); 3 the provider is unavailable or the credential is
missing or refused. ``batch`` also: 75 the batch stopped before its end for a reason that may pass (the
model stayed unreachable, the provider process died, a disk is full; the last line says which): its
record is true and ``agent-fleet batch --resume OUT`` continues it; 130 stopped by Ctrl-C, 143 by
SIGTERM, 129 by SIGHUP (128 + the signal: the first stops cleanly, a second leaves by force within two
seconds).

``batch`` keeps its record outside the repositories the agents work in: without ``--out``, in a new
directory under ``$XDG_STATE_HOME/agent-fleet/batches`` (else ``~/.local/state/agent-fleet/batches``),
printed at the start (``record: PATH``) and as the last line; its tasks' worktrees and temporary
directories are in the fleet's private state directory too (``docs/concepts/box.md``).

What ``run`` shows on a terminal: the agent's messages and reasoning in full, each command, decline,
gate and follow-up as lines, and below them a live part with the message being streamed, the step
and the counts; ``batch`` shows a live view of the fleet (running and failed tasks pinned, the next
queued ones, the latest declines and failed gates' last output lines), then one final table with
totals, the failed gates' last lines and the report's path (a link, OSC 8, on a terminal). ``-q``
shows only the result (``run``: with the final message); ``-v`` adds each command's exit code and its
output's last lines. ``--default-approval ask``: ``run`` on a terminal asks you about each request
no rule decides (``y`` allow once, ``s`` allow for the session, ``n`` decline); with ``--server`` the
daemon asks; anywhere else (``batch`` without ``--server``, no terminal) ``ask`` is a usage error.

Flags codex users know: ``-m``/``--model``, ``-s``/``--sandbox``, ``-C``/``--cd`` (also ``--cwd``),
``-V``/``--version``, ``doctor --json``, ``-q``/``-v``. Shell completion (bash, zsh or fish), e.g. in
``~/.bashrc``::

    eval "$(_AGENT_FLEET_COMPLETE=bash_source agent-fleet)"

(``_AGENT_FLEET_COMPLETE=zsh_source agent-fleet`` in ``~/.zshrc``;
``_AGENT_FLEET_COMPLETE=fish_source agent-fleet | source`` in fish's config).

Every failure prints one line saying what to do, never a traceback (set ``AGENT_FLEET_DEBUG=1`` to get
one for an internal error).
"""

from agent_fleet.cli import _account, _serve  # noqa: F401 - register `login`, `logout`, `serve`
from agent_fleet.cli._commands import cli, main
from agent_fleet.cli._describe import describe
from agent_fleet.cli._options import parse_config_overrides

__all__ = ["cli", "describe", "main", "parse_config_overrides"]
