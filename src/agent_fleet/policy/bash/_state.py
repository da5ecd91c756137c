"""The walk's state: where a command sits (``Ctx``), what the walk has found so far (``Sink``), and the
redirections of one command as the walker reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tree_sitter import Node

from agent_fleet.policy.bash._commands import Redirect, SimpleCommand
from agent_fleet.policy.bash._later import read_text
from agent_fleet.policy.bash._words import Env, known_output

if TYPE_CHECKING:
    from agent_fleet.policy.bash._walker import Walker

__all__ = ["Ctx", "RawRedirects", "Sink", "fed", "output_text"]

_LOOP_BUDGET = 64
#: How much of what feeds a pipeline stage is kept (bounded: the walk stays linear).
MAX_STDIN = 8
_MAX_FEEDERS = 32
_MAX_STDIN_TEXTS = 4


class Ctx(NamedTuple):
    """Where a command sits (a named tuple: copied with ``_replace`` on every command, so it is cheap)."""

    depth: int = 0
    wrappers: tuple[str, ...] = ()
    stdin: tuple[tuple[str, ...], ...] = ()
    feeders: tuple[str, ...] = ()
    in_pipeline: bool = False
    background: bool = False
    functions: tuple[str, ...] = ()
    # Text known to flow into standard input through the pipe (`echo 'rm -rf /' | sh`).
    stdin_texts: tuple[str, ...] = ()
    implied: bool = False
    # What the words of commands here may come from: the substitutions a `for` loop iterates over.
    sources: tuple[tuple[str, ...], ...] = ()


@dataclass(slots=True)
class Sink:
    commands: list[SimpleCommand] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    env: Env = field(default_factory=Env)
    loop_budget: int = _LOOP_BUDGET
    in_loop: bool = False
    # Functions defined so far (name -> the walker that holds their source, and the body node) and
    # aliases (name -> words); calls are walked again with their arguments as `$@`.
    functions: dict[str, tuple[Walker, Node]] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # written with known text (`_later`)
    calls: int = 0
    assignments: int = 0
    parses: int = 0
    pipes: int = 0  # pipe operators in every text parsed so far (`_shell.MAX_PIPES`)
    nesting: int = 0  # how deep the walk is in the syntax tree now (`_walker.MAX_NESTING`)


@dataclass(slots=True)
class RawRedirects:
    """Redirections of one command, resolved, plus what they imply for the command."""

    redirects: list[Redirect] = field(default_factory=list)
    extra_words: list[list[Node]] = field(default_factory=list)  # bash: `cmd >f a b` -> a, b are args
    substitutions: list[Node] = field(default_factory=list)
    feeds: list[Node] = field(default_factory=list)  # `sh < <(...)`: what the substitution prints is stdin
    stdin_texts: list[str] = field(default_factory=list)  # here-documents and here-strings
    pipelines: list[Node] = field(default_factory=list)  # `cat <<EOF | sh`: the grammar nests the pipe here
    others: list[Node] = field(default_factory=list)  # `cat <<EOF && rm x`: statements nested here


def output_text(cmd: SimpleCommand, files: dict[str, str] | None = None) -> str | None:
    """What a command writes to standard output, when that is known from its words alone (or from the
    files the script wrote earlier: ``cat x | sh``)."""
    if files and (text := read_text(cmd.argv, files)) is not None:
        return text
    if cmd.program in ("cat", "tee"):
        texts = [r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<")]
        return "\n".join(texts) if texts else None
    return known_output(cmd.program, cmd.argv[1:])


def fed(ctx: Ctx, commands: Sequence[SimpleCommand], files: dict[str, str] | None = None) -> Ctx:
    """The context of a pipeline stage that reads what ``commands`` write (bounded: linear overall)."""
    if not commands:
        return ctx
    texts = tuple(text for text in (output_text(c, files) for c in commands) if text is not None)
    names = dict.fromkeys(ctx.feeders)
    for cmd in commands:
        names.update(dict.fromkeys((*cmd.wrappers[len(ctx.wrappers) :], cmd.program, *cmd.feeders)))
    return ctx._replace(
        stdin=(ctx.stdin + tuple(cmd.argv for cmd in commands))[-MAX_STDIN:],
        feeders=tuple(names)[-_MAX_FEEDERS:],
        stdin_texts=(ctx.stdin_texts + texts)[-_MAX_STDIN_TEXTS:],
    )
