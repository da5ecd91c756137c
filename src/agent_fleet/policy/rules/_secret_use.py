"""Secrets shown or swept up: a secret variable printed or written to a file, the environment filtered
for secrets, and content searches over the whole machine or home directory. One rule id,
``credential-access``.

* ``echo $OPENAI_API_KEY``, ``printf '%s' "$GITHUB_TOKEN" > t``, ``printenv AWS_SECRET_ACCESS_KEY``,
  ``env | grep -i token``: the value lands in the transcript (or a file that may be committed), where
  the model can carry it anywhere. Testing a secret (``[ -n "$TOKEN" ]``, ``${TOKEN:+set}``,
  ``${#TOKEN}``) or handing it to a program (``docker run -e TOKEN=$TOKEN``) shows nothing.
* ``grep -r 'PRIVATE KEY' /``, ``rg password ~``: a content search of ``/``, the home directory or an
  ancestor reads (and prints) every credential file under it. Searching the workspace is fine.
"""

from __future__ import annotations

import re

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.rules._targets import resolve_target
from agent_fleet.policy.rules._verdict import RuleContext, Violation

__all__ = ["secret_exposure"]

_SECRET_NAME = (
    r"[A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|SESSION_KEY)"
    r"[A-Za-z0-9_]*"
)
#: ``$NAME``, ``${NAME}``, ``${NAME:-x}``, ``${NAME:0:8}``: the value (or part of it) is printed.
#: ``${NAME:+x}``, ``${#NAME}``, ``${!NAME}`` print no part of it.
_PRINTED = re.compile(
    r"\$(?:" + _SECRET_NAME + r"(?![A-Za-z0-9_])|\{" + _SECRET_NAME + r"(?:\}|:[-=?0-9]|[%#/^,]))", re.I
)
_PRINTERS = frozenset({"echo", "printf", "print", "cat", "tee", "jq", "yq"})
#: Programs that print what they read, transformed or not.
_TRANSFORMS = frozenset(
    {
        "base64",
        "base32",
        "basenc",
        "xxd",
        "od",
        "hexdump",
        "rev",
        "tr",
        "sed",
        "awk",
        "cut",
        "gzip",
        "openssl",
    }
)
_SECRET_PATTERN = re.compile(
    r"secret|token|pass|pwd|key|private|cred|auth|session|cookie|bearer|jwt|dsn|database", re.I
)
_ENV_SOURCES = frozenset({"env", "printenv", "set", "export", "declare", "typeset", "compgen"})
_FILTERS = frozenset({"grep", "egrep", "fgrep", "rg", "awk", "sed", "cut"})
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "ugrep", "git-grep"})


def _printed(argv: tuple[str, ...], herestrings: list[str]) -> str | None:
    if not argv:
        return None
    if argv[0] == "printenv":
        names = [a for a in argv[1:] if not a.startswith("-")]
        return next((n for n in names if re.fullmatch(_SECRET_NAME, n, re.I)), None)
    if argv[0] not in _PRINTERS:
        return None
    return next((w for w in [*argv[1:], *herestrings] if _PRINTED.search(w)), None)


def _shows_variable(cmd: SimpleCommand) -> str | None:
    """A secret printed by this command, or printed into it and shown again (``echo $T | base64``).
    Fed to any other program (``echo "$CR_PAT" | docker login --password-stdin``) it is used, not shown."""
    if not cmd.in_pipeline:  # in a pipeline its output feeds the next stage, which is judged in turn
        shown = _printed(cmd.argv, [r.target for r in cmd.redirects if r.op == "<<<"])
        if shown is not None:
            return shown
    if cmd.program in _PRINTERS | _TRANSFORMS:
        return next((found for argv in cmd.stdin if (found := _printed(argv, [])) is not None), None)
    return None


def _named_secret_shown(cmd: SimpleCommand) -> str | None:
    """``declare -p TOKEN``, ``typeset -p AWS_SECRET_ACCESS_KEY``: a secret-named variable printed."""
    if cmd.program not in ("declare", "typeset", "local", "readonly", "export"):
        return None
    options = [a for a in cmd.argv[1:] if a.startswith("-")]
    if not any("p" in option for option in options):
        return None
    names = [a for a in cmd.argv[1:] if not a.startswith(("-", "+"))]
    return next((n for n in names if re.fullmatch(_SECRET_NAME, n, re.I)), None)


def _filtered_environment(cmd: SimpleCommand) -> bool:
    if cmd.program not in _FILTERS or not (set(cmd.feeders) & _ENV_SOURCES):
        return False
    return any(_SECRET_PATTERN.search(arg) for arg in cmd.argv[1:])


def _whole_tree_search(cmd: SimpleCommand, ctx: RuleContext) -> str | None:
    program = cmd.program
    if program not in _SEARCHERS:
        return None
    args = cmd.argv[1:]
    recursive = program in ("rg", "ag", "ack", "ugrep") or any(
        a in ("--recursive", "--dereference-recursive") or re.fullmatch(r"-[A-Za-z]*[rR][A-Za-z]*", a)
        for a in args
    )
    if not recursive:
        return None
    operands = [a for a in args if not a.startswith("-")][1:]  # the first operand is the pattern
    for word in operands:
        path = resolve_target(word, cwd=ctx.cwd, home=ctx.home)
        if path is not None and (path == ctx.home or ctx.home.startswith(path.rstrip("/") + "/")):
            return word  # `/`, `/home`, `~`: every credential is under it
    return None


def secret_exposure(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``credential-access`` for a secret shown or swept up (see the module docstring)."""
    shown = _shows_variable(cmd)
    if shown is not None:
        return Violation(rule="credential-access", reason=f"{cmd.program} shows a secret variable: {shown!r}")
    if _filtered_environment(cmd):
        return Violation(rule="credential-access", reason="the environment filtered for secrets is shown")
    named = _named_secret_shown(cmd)
    if named is not None:
        return Violation(
            rule="credential-access", reason=f"{cmd.program} -p shows the secret variable {named}"
        )
    tree = _whole_tree_search(cmd, ctx)
    if tree is not None:
        return Violation(
            rule="credential-access",
            reason=f"{cmd.program} searches every file under {tree!r}, credentials included",
        )
    return None
