"""Inline code of other languages (``python -c``, ``python - <<EOF``, ``perl -e``, ``node -e`` ...) turned
into the shell-equivalent actions it performs, so the built-in rules judge them like any command.

Each finding is an ``Inner``: a shell text to parse (``os.system("rm -rf /")``), an argv
(``subprocess.run(["rm", "-rf", "/"])``), a synthetic argv standing for a file operation
(``shutil.rmtree(p)`` -> ``rm -rf p``, ``open(p, "w")`` -> ``tee p``, reading a credential path ->
``cat p``, ``os.kill(-1, 9)`` -> ``kill -9 -1``), or an opaque finding (code that runs code we cannot
see: ``exec(base64.b64decode(...))``, ``os.fork()``). A target that is not a literal becomes ``$?``, a
dynamic word the rules decline for destructive programs. Python is read with ``ast`` (constant strings,
``+``/f-strings of constants, ``os.path.join``, ``Path(...) / ...`` and names bound to constants are
resolved); other languages, and Python that does not parse, by patterns over the text.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass
from typing import Literal

__all__ = ["OPAQUE_TEXT", "SQL_START", "UNKNOWN", "Inner", "analyse_code", "code_language"]

UNKNOWN = "$?"
#: Inline code longer than this is not analysed (and so is declined as opaque).
MAX_CODE_CHARS = 128 * 1024


#: The text recorded for a file inline code writes with content that cannot be known: running that file
#: later runs code nobody can see (``_later`` makes it opaque); reading it gives nothing known.
OPAQUE_TEXT = "\x00written by inline code with content that cannot be known"


@dataclass(frozen=True, slots=True)
class Inner:
    """Something a command runs or does: ``script`` (shell text), ``argv``, ``opaque`` (``text`` says
    why), or ``write`` (the file ``argv[0]`` now holds ``text``, ``OPAQUE_TEXT`` when unknown: recorded
    so that running it later runs that text)."""

    kind: Literal["script", "argv", "opaque", "write"]
    text: str = ""
    argv: tuple[str, ...] = ()
    positional: tuple[str, ...] | None = None


_LANGUAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(python|pypy)[0-9.]*"), "python"),
    (re.compile(r"perl[0-9.]*"), "perl"),
    (re.compile(r"ruby[0-9.]*|irb"), "ruby"),
    (re.compile(r"node|nodejs|deno|bun"), "node"),
    (re.compile(r"php[0-9.]*"), "php"),
    (re.compile(r"lua(jit)?[0-9.]*"), "lua"),
    (re.compile(r"tclsh[0-9.]*|wish|expect"), "tcl"),
    (
        re.compile(r"pwsh|powershell|osascript|Rscript|julia|groovy|jshell|scala|kotlin|emacs|guile|racket"),
        "other",
    ),
)
# (language, option letters whose value is code, long options whose value is code)
_CODE_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "python": ("c", ()),
    "perl": ("eE", ()),
    "ruby": ("e", ()),
    "node": ("ep", ("--eval", "--print")),
    "php": ("rB", ()),
    "lua": ("e", ()),
    "tcl": ("c", ()),
    "other": ("ceE", ("--command", "--eval", "-Command", "-command", "-e")),
}
_VALUE_LETTERS = {"python": "WXQ", "perl": "IMmxd", "ruby": "rICFE", "node": "r", "php": "dcz", "lua": "l"}


def code_language(program: str) -> str | None:
    for pattern, language in _LANGUAGES:
        if pattern.fullmatch(program):
            return language
    return None


def inline_codes(argv: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(language, code)`` for code given on the command line (``python -c CODE``, ``perl -e CODE``)."""
    if not argv:
        return []
    language = code_language(argv[0])
    if language is None:
        return []
    letters, longs = _CODE_OPTIONS[language]
    values = _VALUE_LETTERS.get(language, "")
    found: list[tuple[str, str]] = []
    args = argv[1:]
    if argv[0] in ("deno", "bun") and args[:1] == ("eval",):
        return [(language, " ".join(args[1:]))]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        name, eq, value = arg.partition("=")
        if name in longs:
            code = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            found.append((language, code))
            i += 1 if eq else 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        for j, letter in enumerate(arg[1:], start=1):
            if letter in letters:
                rest = arg[j + 1 :]
                code = rest if rest else (args[i + 1] if i + 1 < len(args) else "")
                found.append((language, code))
                if not rest:
                    i += 1
                break
            if letter in values:
                if j == len(arg) - 1:
                    i += 1
                break
        if language == "python" and found:
            break  # python -c CODE: the rest are sys.argv
        i += 1
    return found


#: The start of an SQL statement (both readers turn SQL a driver runs into ``psql -c SQL``).
SQL_START = re.compile(
    r"\s*(?:DROP|TRUNCATE|DELETE|UPDATE|ALTER|INSERT|REPLACE|MERGE|GRANT|REVOKE|CREATE|COPY|SELECT|WITH"
    r"|VACUUM|ATTACH|DETACH|PRAGMA|RENAME|COMMENT|CALL|DO|SET|LOAD|FLUSH)\b",
    re.IGNORECASE,
)


#: Python is parsed at most this many characters at a time: ``ast.parse`` holds the GIL (about 4 ms
#: per KiB on a loaded core), and a long hold would stall an event loop waiting for it.
_AST_CHUNK = 4 * 1024


class _TooLarge(Exception):
    """One top-level Python statement is longer than two chunks."""


def _parse_python(code: str) -> ast.Module:
    """``ast.parse(code)``, in pieces of whole top-level statements of at most ``_AST_CHUNK`` characters
    (found with ``tokenize``, which runs in Python and so lets other threads run)."""
    if len(code) <= _AST_CHUNK:
        return ast.parse(code)
    lines = code.splitlines(keepends=True)
    starts: list[int] = []  # the lines (0-based) where a top-level statement starts
    level = 0
    fresh = True  # the next token begins a logical line
    decorated = False  # the statement being read began with a decorator: the `def` is not a new one
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        kind = token.type
        if kind == tokenize.INDENT:
            level += 1
        elif kind == tokenize.DEDENT:
            level -= 1
        elif kind == tokenize.NEWLINE:
            fresh = True
        elif kind not in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER) and fresh:
            fresh = False
            if level == 0:
                if not decorated:
                    starts.append(token.start[0] - 1)
                decorated = token.string == "@"
    ends = [*starts[1:], len(lines)]
    body: list[ast.stmt] = []
    chunk: list[str] = []
    size = 0
    start = starts[0] if starts else 0
    for end in ends:
        piece = lines[start:end]
        start = end
        length = sum(map(len, piece))
        if length > 2 * _AST_CHUNK:
            raise _TooLarge
        if chunk and size + length > _AST_CHUNK:
            body.extend(ast.parse("".join(chunk)).body)
            chunk, size = [], 0
        chunk.extend(piece)
        size += length
    if chunk:
        body.extend(ast.parse("".join(chunk)).body)
    return ast.Module(body=body, type_ignores=[])


def analyse_code(language: str, code: str, *, _depth: int = 0) -> list[Inner]:
    """What ``code`` in ``language`` would run or touch (see the module docstring)."""
    if _depth > 3:
        return [Inner("opaque", text="inline code nests too deeply")]
    if OPAQUE_TEXT in code:
        return [Inner("opaque", text="code inline code wrote, with content that cannot be known, is run")]
    if len(code) > MAX_CODE_CHARS:
        return [Inner("opaque", text=f"inline code longer than {MAX_CODE_CHARS} characters is not judged")]
    found: list[Inner] = []
    if language == "python":
        try:
            with warnings.catch_warnings():  # invalid escapes and the like: not ours to report
                warnings.simplefilter("ignore")
                tree = _parse_python(code)
        except _TooLarge:
            return [Inner("opaque", text=f"a Python statement longer than {_AST_CHUNK * 2} characters")]
        except (SyntaxError, ValueError, tokenize.TokenError):
            tree = None
        except (RecursionError, MemoryError):  # fail closed: never fall back to reading it by patterns
            return [Inner("opaque", text="inline code nests too deeply")]
        if tree is not None:
            from agent_fleet.policy.bash._python import Python  # it builds on Inner

            visitor = Python()
            try:
                visitor.visit(tree)
            except RecursionError:
                return [Inner("opaque", text="inline code nests too deeply")]
            found.extend(visitor.found)
            from agent_fleet.policy.bash._code_patterns import literal_paths

            found.extend(literal_paths(code))
            return found
    from agent_fleet.policy.bash._code_patterns import literal_paths, patterns  # it builds on Inner

    found.extend(patterns(code))
    found.extend(literal_paths(code))
    return found
