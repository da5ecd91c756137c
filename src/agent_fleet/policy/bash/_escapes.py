"""Programs whose own language runs shell commands, given that language on standard input or in an
option: ``ed``'s and ``ex``'s ``!CMD`` (and ``r !CMD``, ``w !CMD``), ``dc``'s ``!CMD``, ``m4``'s
``syscmd(CMD)``/``esyscmd(CMD)``, ``gdb``'s ``shell CMD``, ``ftp``/``sftp``'s ``!CMD``, ``mail``'s
``~!CMD``, ``psql``'s and ``mysql``'s ``\\! CMD``, ``sqlite3``'s ``.shell``/``.system``.

``escape_runs(program, argv, texts)`` lists the shell texts such a program would run when it reads
``texts`` (what the walker knows reaches its standard input: a pipe from ``echo``/``printf``, a
here-document, a here-string) or the program text in its options (``dc -e``, ``gdb -ex``); an escape to
an interactive shell (``ex``'s ``:sh``) is opaque. Input the walker cannot see is not judged here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_fleet.policy.bash._code import Inner

__all__ = ["ESCAPING", "escape_runs"]

_ED = frozenset({"ed", "red"})
_EX = frozenset({"ex", "vi", "vim", "nvim", "view", "nex", "gvim", "rvim", "evim"})
# `!CMD`, `ADDR!CMD`, `r !CMD`, `w !CMD`, `e !CMD` (read, write, edit through a command); `w!` and
# `e!` alone force a write or an edit.
_BANG = re.compile(
    r"^\s*:*\s*(?:[0-9.,$;%+\-]*|'[a-z])\s*(?:(?:r|read)\s*|(?:w|W|write|e|E|edit)\s+)?!(?!=)(.*)$",
    re.MULTILINE,
)
_SHELL_COMMAND = re.compile(r"^\s*:*\s*(?:sh|shell|terminal|term)\s*$", re.MULTILINE)
_VIM_CALL = re.compile(r"\b(?:system|systemlist|job_start|jobstart|termopen)\s*\(")
_DC_BANG = re.compile(r"!(?![<>=])(.*)$", re.MULTILINE)
_M4_CALL = re.compile(r"\be?syscmd\s*\(")
_GDB = re.compile(r"^\s*(?:shell|!|pipe\s+.*?\|)\s*(.+)$", re.MULTILINE)
_FTP_BANG = re.compile(r"^\s*!(.*)$", re.MULTILINE)
_MAIL_BANG = re.compile(r"^~!(.*)$", re.MULTILINE)
_SQL_BANG = re.compile(r"^\s*\\!\s*(.*)$|^\s*system\s+(.+)$", re.MULTILINE)
_SQLITE_SHELL = re.compile(r"^\s*\.(?:shell|system)\s+(.+)$", re.MULTILINE)

#: Programs this module reads.
ESCAPING = frozenset(
    _ED
    | _EX
    | {"dc", "m4", "gdb", "ftp", "sftp", "lftp", "mail", "mailx", "s-nail", "psql", "mysql"}
    | {"mariadb", "sqlite3"}
)


def _balanced(text: str, start: int) -> str:
    """The text from ``start`` up to the ``)`` that closes the ``(`` just before it."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return text[start:]


def _m4_text(argument: str) -> str:
    """An m4 argument as the shell sees it: the quotes (`` `...' ``, ``[...]``) removed."""
    text = argument.strip()
    for left, right in (("`", "'"), ("[", "]")):
        if text.startswith(left) and text.endswith(right):
            return text[1:-1]
    return text


def _scripts(found: Sequence[str]) -> list[Inner]:
    return [Inner("script", text=text) for text in found if text.strip()]


def _option_texts(argv: Sequence[str], names: tuple[str, ...]) -> list[str]:
    texts: list[str] = []
    for i, arg in enumerate(argv[1:], start=1):
        name, eq, value = arg.partition("=")
        if arg in names and i + 1 < len(argv):
            texts.append(argv[i + 1])
        elif eq and name in names:
            texts.append(value)
    return texts


def escape_runs(program: str, argv: Sequence[str], texts: Sequence[str]) -> list[Inner]:
    """The shell texts ``program`` runs from ``texts`` or its options (see the module docstring)."""
    if program not in ESCAPING:
        return []
    found: list[Inner] = []
    if program in _ED or program in _EX:
        for text in texts:
            found += _scripts([m.group(1) for m in _BANG.finditer(text)])
            if program in _EX and (_SHELL_COMMAND.search(text) or _VIM_CALL.search(text)):
                found.append(Inner("opaque", text=f"{program} commands start a shell"))
    elif program == "dc":
        sources = [*texts, *_option_texts(argv, ("-e", "--expression"))]
        for text in sources:
            found += _scripts([m.group(1) for m in _DC_BANG.finditer(text)])
    elif program == "m4":
        for text in texts:
            for call in _M4_CALL.finditer(text):
                found += _scripts([_m4_text(_balanced(text, call.end()))])
    elif program == "gdb":
        for text in [*texts, *_option_texts(argv, ("-ex", "--eval-command", "-iex", "--init-eval-command"))]:
            found += _scripts([m.group(1) for m in _GDB.finditer(text)])
    elif program in ("ftp", "sftp", "lftp"):
        for text in texts:
            found += _scripts([m.group(1) for m in _FTP_BANG.finditer(text)])
    elif program in ("mail", "mailx", "s-nail"):
        for text in texts:
            found += _scripts([m.group(1) for m in _MAIL_BANG.finditer(text)])
    elif program in ("psql", "mysql", "mariadb"):
        commands = _option_texts(argv, ("-c", "--command", "-e", "--execute"))
        for text in [*texts, *commands]:
            found += _scripts([m.group(1) or m.group(2) or "" for m in _SQL_BANG.finditer(text)])
    elif program == "sqlite3":
        for text in [*texts, *argv[2:]]:
            found += _scripts([m.group(1) for m in _SQLITE_SHELL.finditer(text)])
    return found
