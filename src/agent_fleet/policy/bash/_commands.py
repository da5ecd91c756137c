"""The shell layer's values: the simple commands a script runs, its redirections, and the parse error."""

from __future__ import annotations

from dataclasses import dataclass

from agent_fleet.errors import UsageError

__all__ = ["CommandTooLarge", "ParsedScript", "Redirect", "SimpleCommand", "UnparsableCommand"]


class UnparsableCommand(UsageError):
    """The command is not valid shell (or nests too deeply) so nothing can be said about it."""


class CommandTooLarge(UnparsableCommand):
    """The command runs more simple commands or inline scripts than the policy judges (fails closed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    """One redirection: ``op`` as written (``>``, ``>>``, ``&>``, ``<``, ``<<``, ``<<<``, ``<>`` ...).

    ``target`` is the resolved destination word; for here-documents it is the document body.
    """

    op: str
    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleCommand:
    """One simple command the shell would run, after unwrapping.

    ``argv``: the effective command; ``argv[0]`` is the normalised program name (``rm``, not ``/bin/rm``).
    ``written``: the words as written (resolved), wrappers included: ``("env", "X=1", "rm", "-rf", "/")``.
    ``wrappers``: normalised names of the wrappers peeled off on the way here, outermost first; for a
    command inside an inline script this includes the outer ones and the shell (``("sudo", "bash")``).
    ``substituted``: programs run by ``$(...)``, backticks or ``<(...)`` inside this command's words and
    redirections. ``stdin``: the argvs of the most recent commands in earlier stages of the enclosing
    pipeline(s); ``feeders``: the program names of all of them. ``env``: variables set for this command
    (``X=1 cmd``, ``env X=1 cmd``). ``carrier``: this command only carries an inline script (``sh -c S``,
    ``eval``, ``watch``) whose commands are reported separately. ``implied``: run because of another
    command's configuration or code (``GIT_PAGER=cat``, ``python -c "open(p)"`` -> ``cat p``), not
    written as a command; user allow patterns do not need to match it (built-in rules still judge it).
    ``sources``: the argvs whose output becomes part of this command's words (its own ``$(...)``, and the
    values of a ``for`` loop around it over substitutions): ``rm $(git ls-files)`` has ``git ls-files``.
    """

    argv: tuple[str, ...]
    written: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    substituted: tuple[str, ...] = ()
    stdin: tuple[tuple[str, ...], ...] = ()
    feeders: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    in_pipeline: bool = False
    background: bool = False
    functions: tuple[str, ...] = ()
    carrier: bool = False
    implied: bool = False
    sources: tuple[tuple[str, ...], ...] = ()

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedScript:
    """Every simple command (in execution order, nested ones included) and every redirection.

    ``empty``: the text holds nothing but whitespace and comments. ``opaque``: why some code that would
    run cannot be seen (a computed command in another language, a decoded payload ...).
    """

    commands: tuple[SimpleCommand, ...]
    redirects: tuple[Redirect, ...]
    empty: bool = False
    opaque: tuple[str, ...] = ()
