"""Shell text -> the simple commands it would run, on a real bash parse (tree-sitter-bash).

Theory of operation: the text is parsed once; a walker visits every node. Each ``command`` node becomes
one or more ``SimpleCommand`` records: its words are expanded the way bash would where that is known
statically (``_words``: quotes, escapes, variables assigned earlier in the script, arrays, ``set --``
and ``sh -c`` positional parameters, ``IFS`` splitting, literal command substitutions; unknown
expansions keep their raw text, e.g. ``$HOME/x``), the program name is normalised (``/bin/rm``,
``\\rm``, ``"rm"`` -> ``rm``), transparent wrappers are peeled off (``env``, ``sudo``, ``nohup``,
``timeout 5`` ...; ``_unwrap``), and whatever the command runs in turn is walked too: inline scripts
(``bash -lc``, ``eval``, a here-document or a pipe fed to a shell), programs' own command options
(``_runs``, ``_git``: ``ssh host CMD``, ``git -c core.pager=CMD``), environment variables that name a
command (``GIT_SSH_COMMAND``), and code of other languages (``_code``: ``python -c``, ``perl -e``,
``node - <<EOF``). What runs code we cannot see (``exec(b64decode(...))``, ``sed s/x/y/e``) is recorded
in ``ParsedScript.opaque``. Every part of the script is walked (pipelines, lists, subshells, compound
statements, function bodies, ``$(...)``, backticks, process substitutions), with the context the rules
need (what feeds a command's standard input, whether it is backgrounded, which function it is in).

Anything the grammar reports as ``ERROR``/``MISSING`` raises ``UnparsableCommand`` (callers fail
closed), except the read-write redirection ``<>`` that the grammar does not know. Work is linear in the
input: a pipeline's feed is summarised, loops are expanded a bounded number of times, and values are
substituted only when short. The ``Parser`` is created lazily, once per thread.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from agent_fleet.policy.bash._code import OPAQUE_TEXT, Inner, analyse_code, code_language, inline_codes
from agent_fleet.policy.bash._commands import (
    CommandTooLarge,
    ParsedScript,
    Redirect,
    SimpleCommand,
    UnparsableCommand,
)
from agent_fleet.policy.bash._escapes import escape_runs
from agent_fleet.policy.bash._git import env_runs, git_runs
from agent_fleet.policy.bash._later import recipes, record_writes, remember, written_runs
from agent_fleet.policy.bash._runs import inner_runs
from agent_fleet.policy.bash._state import Ctx, Sink
from agent_fleet.policy.bash._unwrap import (
    SHELLS,
    exec_commands,
    executes_stdin,
    expand_braces,
    inline_script,
    is_dynamic,
    normalise_program,
    split_wrapper,
)
from agent_fleet.policy.bash._walker import Walker
from agent_fleet.policy.bash._words import named

__all__ = [
    "MAX_COMMANDS",
    "MAX_DEPTH",
    "MAX_PIPES",
    "MAX_PIPES_IN_ALL",
    "ParsedScript",
    "Redirect",
    "SimpleCommand",
    "UnparsableCommand",
    "emit",
    "parse_bash",
    "parse_command",
    "parse_into",
    "parse_script",
    "run_inner",
]

#: How deep inline scripts (``bash -c "sh -c '...'"``) may nest before we give up (and fail closed).
MAX_DEPTH = 12
_MAX_WRAPPERS = 64
_MAX_STDIN_TEXTS = 4
_STDIN_RUNNERS = frozenset({"at", "batch"})
#: Work bounds: a script running more simple commands, or parsing more inline scripts, is too large.
MAX_COMMANDS = 1000
MAX_PARSES = 200
#: Pipe operators (``|``, ``|&``) in one text, and in every text one command parses. tree-sitter-bash's
#: time and memory grow with the square of a pipeline's stages (30,000 stages: 15-25 s and 7.6 GB, and
#: one step of ~20 ms holding the GIL at 300 stages); counted before each parse, so such a text is
#: declined (``too-large``) without being parsed. Pipes in quotes, here-documents and comments are not
#: operators and do not count (``_pipe_operators``).
MAX_PIPES = 256
MAX_PIPES_IN_ALL = 4 * MAX_PIPES
_LITERAL_NODES = frozenset(
    {"string_content", "raw_string", "heredoc_body", "heredoc_content", "comment", "ansi_c_string"}
)


# --------------------------------------------------------------------------------------------------
# The parser: one per thread, the language once per process.

_language_lock = threading.Lock()
_language: Language | None = None
_local = threading.local()


def _parser() -> Parser:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        global _language
        with _language_lock:
            if _language is None:
                _language = Language(tree_sitter_bash.language())
            language = _language
        parser = Parser(language)
        _local.parser = parser
    return parser


# tree-sitter-bash's external scanner passes the lookahead code point to <ctype.h> functions (isdigit,
# isalpha ...), which are defined for -1..255 only: a character such as U+E0000 after `{` reads far
# outside glibc's table and kills the process (a command from a model could crash the host). Bash
# treats every non-ASCII byte as an ordinary word character, so the parser is given the command with
# each of them replaced by `x` (same byte offsets, so every word is still read from the real bytes).
# `x` can change a parse only towards more judging: it may make a variable or function name, or end a
# here-document early, where bash sees plain text; it is in no shell keyword.
_ASCII_ONLY = bytes(range(128)) + b"x" * 128


_CHUNK = 64 * 1024
_SHORT = 1024


def _pause(_offset: int, _has_error: bool) -> bool:
    """tree-sitter calls this every few hundred steps of a parse. The parse holds the GIL; entering
    Python here lets a thread waiting for it (the event loop) run, so a long parse in a worker thread
    does not stall the loop. Never cancels the parse."""
    return False


def parse_bash(source: bytes) -> Tree:
    """The bash syntax tree of ``source`` (UTF-8, or surrogate-escaped bytes), read from ASCII only
    (see ``_ASCII_ONLY``); node byte offsets are offsets into ``source``."""
    data = source.translate(_ASCII_ONLY)
    if len(data) <= _SHORT:
        return _parser().parse(data)  # short: done long before anyone waits on the GIL
    return _parser().parse(lambda offset, _point: data[offset : offset + _CHUNK], progress_callback=_pause)


def emit(
    words: Sequence[str],
    ctx: Ctx,
    sink: Sink,
    *,
    redirects: tuple[Redirect, ...] = (),
    substituted: tuple[str, ...] = (),
    stdin_texts: tuple[str, ...] = (),
    env: tuple[tuple[str, str], ...] = (),
    script_texts: tuple[str, ...] = (),
    sources: tuple[tuple[str, ...], ...] = (),
) -> None:
    """Peel wrappers off one command's words, record it, and descend into what it runs."""
    argv = list(words)
    if argv and "{" in argv[0]:  # `r{m,} -rf ~`: bash brace-expands the program word into `rm r -rf ~`
        argv = [*expand_braces(argv[0]), *argv[1:]]
    wrappers: list[str] = []
    env_pairs = list(env)
    replace_str: str | None = None
    raw_program = argv[0] if argv else ""
    while argv and len(wrappers) < _MAX_WRAPPERS:
        raw_program = argv[0]
        service = _INIT_SCRIPT.match(argv[0])
        if service is not None:  # /etc/init.d/apparmor stop -> service apparmor stop
            argv = ["service", service.group(1), *argv[1:]]
        argv[0] = normalise_program(argv[0])
        inner = split_wrapper(argv)
        if not inner:  # not a wrapper, or a wrapper with nothing to run (`sudo -l`, `env`)
            break
        if argv[0] in ("env", "sudo", "doas", "run0"):
            env_pairs.extend(_assignments(argv[1 : len(argv) - len(inner)]))
        if argv[0] == "xargs":
            replace_str = _xargs_replace(argv[1 : len(argv) - len(inner)])
        wrappers.append(argv[0])
        argv = inner
    if replace_str is not None:
        # `echo CMD | xargs -I{} sh -c '{}'`: each known input line takes the place of the marker.
        for text in (*stdin_texts, *ctx.stdin_texts)[:_MAX_STDIN_TEXTS]:
            for line in text.splitlines()[:_MAX_STDIN_TEXTS]:
                swapped = [word.replace(replace_str, line) for word in argv]
                emit(swapped, ctx._replace(wrappers=(*ctx.wrappers, *wrappers), depth=ctx.depth + 1), sink)
    all_wrappers = ctx.wrappers + tuple(wrappers)
    script = inline_script(argv)
    cmd = SimpleCommand(
        argv=tuple(argv),
        written=tuple(words),
        wrappers=all_wrappers,
        redirects=redirects,
        substituted=substituted,
        stdin=ctx.stdin,
        feeders=ctx.feeders,
        env=tuple(env_pairs),
        in_pipeline=ctx.in_pipeline,
        background=ctx.background,
        functions=ctx.functions,
        carrier=script is not None,
        implied=ctx.implied,
        sources=ctx.sources + sources,
    )
    sink.commands.append(cmd)
    if len(sink.commands) > MAX_COMMANDS:
        raise CommandTooLarge(f"the command runs more than {MAX_COMMANDS} simple commands")
    inner_ctx = ctx._replace(wrappers=(*all_wrappers, cmd.program), depth=ctx.depth + 1)
    implied = inner_ctx._replace(implied=True)
    path = dict(env_pairs).get("PATH") or _known(sink.env.variables.get("PATH"))
    runs = written_runs(argv, raw_program, sink.files, redirects=redirects, path=path)
    for found in runs:  # `echo CMD > x.sh && sh x.sh`
        run_inner(found, sink, implied)
    record_writes(sink.files, cmd, (*stdin_texts, *ctx.stdin_texts))
    for name, value in env_pairs:
        for found in env_runs(name, value):
            run_inner(found, sink, implied)
    if script is None and is_dynamic(cmd.program):
        script = inline_script(["sh", *argv[1:]])  # `$SHELL -c CMD`: the unknown program may be a shell
    if script_texts and (cmd.program in SHELLS or cmd.program in ("source", ".")):
        for text in script_texts:  # `bash <(echo CMD)`: the script file is that text
            run_inner(Inner("script", text=text), sink, inner_ctx)
    if script is not None:
        text, params = script
        positional = None if "xargs" in all_wrappers else (params or None)
        run_inner(Inner("script", text=text, positional=positional), sink, inner_ctx)
    starts = _find_starts(argv) if argv and argv[0] == "find" else []
    for exec_argv in exec_commands(argv):
        # `{}` stands for each path found: anything under the starting points.
        for start in starts[:_MAX_STDIN_TEXTS] or ["{}"]:
            swapped = [word.replace("{}", start.rstrip("/") + "/*") for word in exec_argv]
            emit(swapped, ctx._replace(wrappers=(*all_wrappers, "find"), depth=ctx.depth + 1), sink)
    for found in inner_runs(argv):
        run_inner(found, sink, inner_ctx)
    implied_runs = git_runs(argv) if cmd.program == "git" else []
    for language, code in inline_codes(cmd.argv):
        implied_runs += analyse_code(language, code)
    for found in implied_runs:
        run_inner(found, sink, implied)
    texts = (*stdin_texts, *ctx.stdin_texts)
    for found in escape_runs(cmd.program, argv, texts):  # `printf '!rm -rf ~' | ed`, `dc -e '!cmd'`
        run_inner(found, sink, implied)
    if executes_stdin(argv) or cmd.program in _STDIN_RUNNERS or _make_stdin(argv):
        # The program consumes that input: what it runs does not see it again.
        consumed = inner_ctx._replace(stdin=(), stdin_texts=(), feeders=())
        stdin_language = code_language(cmd.program)
        for text in texts:
            if stdin_language is not None and cmd.program not in SHELLS:
                for found in analyse_code(stdin_language, text):
                    run_inner(found, sink, consumed._replace(implied=True))
            elif _make_stdin(argv):
                parse_into(recipes(text), sink, consumed)
            else:
                parse_into(text, sink, consumed)


_INIT_SCRIPT = re.compile(r"^(?:/etc)?/(?:init\.d|rc\.d|rc\.d/init\.d)/([^/]+)$")


def _known(value: tuple[str, ...] | None) -> str | None:
    return value[0] if value else None


def _xargs_replace(options: Sequence[str]) -> str | None:
    for i, option in enumerate(options):
        if option == "-I" and i + 1 < len(options):
            return options[i + 1]
        if option.startswith("-I") and len(option) > 2:
            return option[2:]
        if option in ("-i", "--replace"):
            return "{}"
        if option.startswith(("--replace=", "-i")):
            return option.partition("=")[2] or option[2:] or "{}"
    return None


def _find_starts(argv: Sequence[str]) -> list[str]:
    args = argv[1:]
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P") or args[i].startswith("-O")):
        i += 1
    starts: list[str] = []
    for arg in args[i:]:
        if arg.startswith(("-", "(", "!")) or arg == ")":
            break
        starts.append(arg)
    return starts or ["."]


def _assignments(words: Sequence[str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for word in words:
        name, eq, value = word.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|BASH_FUNC_[^=/]+%%", name):
            pairs.append((name, value))
    return pairs


def _make_stdin(argv: Sequence[str]) -> bool:
    if not argv or argv[0] not in ("make", "gmake", "bmake"):
        return False
    return any(
        argv[i] in ("-f", "--file", "--makefile") and argv[i + 1] in ("-", "/dev/stdin", "/proc/self/fd/0")
        for i in range(1, len(argv) - 1)
    ) or any(arg in ("-f-", "-f/dev/stdin", "--file=-", "--file=/dev/stdin") for arg in argv)


def run_inner(inner: Inner, sink: Sink, ctx: Ctx) -> None:
    match inner.kind:
        case "script":
            saved = sink.env.positional
            if inner.positional is not None:
                sink.env.positional = inner.positional
            try:
                parse_into(inner.text, sink, ctx)
            finally:
                sink.env.positional = saved
        case "argv":
            if inner.argv:
                if ctx.depth > MAX_DEPTH:
                    raise UnparsableCommand(f"commands nest more than {MAX_DEPTH} levels deep")
                emit(inner.argv, ctx, sink)
        case "opaque":
            sink.opaque.append(inner.text)
        case "write":
            remember(sink.files, inner.argv[0], inner.text)


def parse_into(text: str, sink: Sink, ctx: Ctx) -> bool:
    """Parse ``text`` and walk it into ``sink``; ``False`` when it holds only comments and blanks."""
    if ctx.depth > MAX_DEPTH:
        raise UnparsableCommand(f"inline scripts nest more than {MAX_DEPTH} levels deep")
    if OPAQUE_TEXT in text:  # a file inline code wrote with content nobody can know, now run
        sink.opaque.append("a file written by inline code, with content that cannot be known, is run")
        return True
    sink.parses += 1
    if sink.parses > MAX_PARSES:
        raise CommandTooLarge(f"the command carries more than {MAX_PARSES} inline scripts")
    pipes = _pipe_operators(text, MAX_PIPES)
    sink.pipes += pipes
    if pipes > MAX_PIPES or sink.pipes > MAX_PIPES_IN_ALL:
        raise CommandTooLarge(f"the command holds more than {MAX_PIPES} pipes")
    try:
        source = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise UnparsableCommand(f"command text is not encodable: {exc}") from exc
    tree = parse_bash(source)
    root = tree.root_node
    if root.has_error:
        _check_errors(root, source)
    walker = Walker(source, sink)
    walker.prescan(root)
    walker.walk(root, ctx)
    return any(child.type != "comment" for child in named(root))


def _pipe_operators(text: str, limit: int) -> int:
    """How many pipe operators ``text`` holds, counted without parsing it as it is (see ``MAX_PIPES``).

    At most ``limit``: a plain count of ``|`` (``||`` excepted) decides. Over it, the text is parsed with
    every ``|`` blanked (a space: linear, and the quotes, here-documents and comments around them are
    the same), and a ``|`` inside a literal there is text, not an operator. Anything else counts."""
    count = text.count("|") - 2 * text.count("||")
    if count <= limit:
        return count
    source = text.encode("utf-8", "surrogateescape")
    literal: list[tuple[int, int]] = []
    stack = [parse_bash(source.replace(b"|", b" ")).root_node]
    while stack:
        node = stack.pop()
        if node.type in _LITERAL_NODES:
            literal.append((node.start_byte, node.end_byte))
        else:
            stack.extend(node.children)
    literal.sort()
    starts = [start for start, _ in literal]
    count = 0
    position = source.find(b"|")
    while position >= 0 and count <= limit:
        if source[position : position + 2] == b"||":
            position = source.find(b"|", position + 2)
            continue
        i = bisect.bisect_right(starts, position) - 1
        if i < 0 or position >= literal[i][1]:
            count += 1
        position = source.find(b"|", position + 1)
    return count


def _check_errors(root: Node, source: bytes) -> None:
    """Raise ``UnparsableCommand`` unless every error is the ``>`` of a ``<>`` redirection."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing or (node.is_error and not _read_write(node, source)):
            where = node.start_byte
            snippet = source[max(0, where - 20) : where + 20].decode("utf-8", "replace")
            what = f"missing {node.type!r}" if node.is_missing else "unexpected input"
            raise UnparsableCommand(f"not valid shell syntax: {what} near {snippet!r}")
        if node.has_error:
            stack.extend(reversed(node.children))


def _read_write(node: Node, source: bytes) -> bool:
    parent = node.parent
    return (
        parent is not None
        and parent.type == "file_redirect"
        and source[node.start_byte : node.end_byte] == b">"
        and source[node.start_byte - 1 : node.start_byte] == b"<"
    )


def parse_script(command: str | Sequence[str]) -> ParsedScript:
    """Parse shell text, or an argv list (taken word for word, as ``execve`` would), into a script.

    Raises ``UnparsableCommand`` (a ``ValueError``) when the text is not valid shell syntax or inline
    scripts nest deeper than ``MAX_DEPTH``. Empty input gives a script with ``empty=True``.
    """
    sink = Sink()
    try:
        if isinstance(command, str):
            content = parse_into(command, sink, Ctx())
        else:
            content = bool(command)
            if content:
                emit([str(word) for word in command], Ctx(), sink)
    except RecursionError as exc:  # thousands of nested subshells or substitutions
        raise UnparsableCommand("the command nests too deeply to judge") from exc
    return ParsedScript(
        commands=tuple(sink.commands),
        redirects=tuple(sink.redirects),
        empty=not content,
        opaque=tuple(sink.opaque),
    )


def parse_command(command: str | Sequence[str]) -> tuple[SimpleCommand, ...]:
    """The normalised simple commands ``command`` would run, nested ones included (see ``parse_script``)."""
    return parse_script(command).commands
