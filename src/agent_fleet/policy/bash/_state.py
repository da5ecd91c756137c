"""The walk's state: where a command sits (``Ctx``), what the walk has found so far (``Sink``), and the
redirections of one command as the walker reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tree_sitter import Node

from agent_fleet.policy.bash._commands import Redirect, SimpleCommand
from agent_fleet.policy.bash._words import Env

if TYPE_CHECKING:
    from agent_fleet.policy.bash._walker import Walker

__all__ = ["Ctx", "RawRedirects", "Sink"]

_LOOP_BUDGET = 64


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
