"""Shell text -> the simple commands it would run, on a real bash parse (tree-sitter-bash).

Theory of operation: the text is parsed once; a walker visits every node. Each ``command`` node becomes
one or more ``SimpleCommand`` records: its words are resolved to their literal values (quotes removed,
escapes applied; words holding an expansion we cannot resolve keep their raw text, e.g. ``$HOME/x``), the
program name is normalised (``/bin/rm``, ``\\rm``, ``"rm"`` -> ``rm``), transparent wrappers are peeled
off (``env``, ``sudo``, ``nohup``, ``timeout 5`` ...; see ``_unwrap``), and inline scripts
(``bash -lc '...'``, ``eval``, ``watch``, a here-document fed to a shell) are parsed recursively, up to
``MAX_DEPTH`` levels. Pipelines, lists, subshells, compound statements, function bodies, ``$(...)``,
backticks and process substitutions are all walked, so *every* simple command is seen, with the context
the rules need (what feeds its standard input, whether it is backgrounded, which function it is in).

Anything the grammar reports as ``ERROR``/``MISSING`` raises ``UnparsableCommand``: callers fail closed.
The tree-sitter ``Parser`` is created lazily, once per thread (parsers are not safe to share).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from agent_fleet.errors import UsageError
from agent_fleet.policy._shell_words import (
    BACKTICK_ESCAPE,
    IFS,
    REDIRECT_TYPES,
    contiguous,
    find_substitutions,
    unescape_ansi_c,
    unescape_double,
    unescape_unquoted,
    unquoted_ifs,
)
from agent_fleet.policy._unwrap import (
    exec_commands,
    executes_stdin,
    inline_script,
    normalise_program,
    split_wrapper,
)

__all__ = [
    "MAX_DEPTH",
    "ParsedScript",
    "Redirect",
    "SimpleCommand",
    "UnparsableCommand",
    "parse_command",
    "parse_script",
]

#: How deep inline scripts (``bash -c "sh -c '...'"``) may nest before we give up (and fail closed).
MAX_DEPTH = 12
_MAX_WRAPPERS = 64
_MAX_STDIN_TEXTS = 4


class UnparsableCommand(UsageError):
    """The command is not valid shell (or nests too deeply) so nothing can be said about it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    """One redirection: ``op`` as written (``>``, ``>>``, ``&>``, ``<``, ``<<``, ``<<<`` ...).

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
    redirections. ``stdin``: the argvs of the commands in earlier stages of the enclosing pipeline(s).
    ``carrier``: this command only carries an inline script (``sh -c S``, ``eval``, ``watch``) whose
    commands are reported separately.
    """

    argv: tuple[str, ...]
    written: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    substituted: tuple[str, ...] = ()
    stdin: tuple[tuple[str, ...], ...] = ()
    in_pipeline: bool = False
    background: bool = False
    functions: tuple[str, ...] = ()
    carrier: bool = False

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedScript:
    """Every simple command (in execution order, nested ones included) and every redirection.

    ``empty``: the text holds nothing but whitespace and comments.
    """

    commands: tuple[SimpleCommand, ...]
    redirects: tuple[Redirect, ...]
    empty: bool = False


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


# --------------------------------------------------------------------------------------------------
# The walker.


@dataclass(frozen=True, slots=True)
class _Ctx:
    depth: int = 0
    wrappers: tuple[str, ...] = ()
    stdin: tuple[tuple[str, ...], ...] = ()
    in_pipeline: bool = False
    background: bool = False
    functions: tuple[str, ...] = ()
    # Text known to flow into standard input through the pipe (`echo 'rm -rf /' | sh`).
    stdin_texts: tuple[str, ...] = ()


@dataclass(slots=True)
class _Sink:
    commands: list[SimpleCommand] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass(slots=True)
class _RawRedirects:
    """Redirections of one command, resolved, plus what they imply for the command."""

    redirects: list[Redirect] = field(default_factory=list)
    extra_words: list[list[Node]] = field(default_factory=list)  # bash: `cmd >f a b` -> a, b are args
    substitutions: list[Node] = field(default_factory=list)
    stdin_texts: list[str] = field(default_factory=list)  # here-documents and here-strings
    pipelines: list[Node] = field(default_factory=list)  # `cat <<EOF | sh`: the grammar nests the pipe here
    others: list[Node] = field(default_factory=list)  # `cat <<EOF && rm x`: statements nested here


class _Walker:
    def __init__(self, source: bytes, sink: _Sink) -> None:
        self._src = source
        self._sink = sink
        # Redirections the grammar hung on a list or pipeline but that belong to its last command.
        self._attached: dict[int, _RawRedirects] = {}

    def text(self, node: Node) -> str:
        return self._src[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    # -- words ---------------------------------------------------------------------------------

    def resolve(self, node: Node) -> str:
        """The word's value: quotes removed, escapes applied, unresolvable expansions kept as written."""
        text = self.text(node)
        match node.type:
            case "word":
                return unescape_unquoted(text)
            case "raw_string":
                return text[1:-1]
            case "ansi_c_string":
                return unescape_ansi_c(text[2:-1])
            case "string":
                return unescape_double(text[1:-1])
            case "translated_string":
                return unescape_double(text[2:-1])
            case "concatenation" | "command_name":
                return self.resolve_group(node.children, node.start_byte, node.end_byte)
            case _:  # numbers, expansions, substitutions, anything new: the raw text
                return text

    def resolve_group(self, pieces: Sequence[Node], start: int, end: int) -> str:
        out: list[str] = []
        pos = start
        for i, piece in enumerate(pieces):
            if piece.start_byte > pos:
                out.append(self._src[pos : piece.start_byte].decode("utf-8", "surrogateescape"))
            pos = piece.end_byte
            # `$"text"` is a locale-translated string: the grammar leaves the `$` as a separate token.
            if piece.type == "$" and i + 1 < len(pieces) and pieces[i + 1].type == "string":
                continue
            out.append(self.resolve(piece))
        if end > pos:
            out.append(self._src[pos:end].decode("utf-8", "surrogateescape"))
        return "".join(out)

    def word(self, group: Sequence[Node]) -> str:
        return self.resolve_group(group, group[0].start_byte, group[-1].end_byte)

    # -- statements ----------------------------------------------------------------------------

    def walk(self, node: Node, ctx: _Ctx) -> None:
        match node.type:
            case "command":
                self._command(node, ctx, self._attached.pop(node.id, _RawRedirects()))
            case "redirected_statement":
                self._redirected(node, ctx)
            case "pipeline":
                self._pipeline(node.named_children, ctx)
            case "function_definition":
                self._function(node, ctx)
            case "command_substitution":
                self._substitution(node, ctx)
            case "comment" | "heredoc_start" | "heredoc_end":
                return
            case _:
                self._children(node, ctx)

    def _children(self, node: Node, ctx: _Ctx) -> None:
        children = node.children
        for i, child in enumerate(children):
            if not child.is_named:
                continue
            background = i + 1 < len(children) and children[i + 1].type == "&"
            self.walk(child, replace(ctx, background=True) if background else ctx)

    def _pipeline(self, stages: Sequence[Node], ctx: _Ctx, feed: Sequence[SimpleCommand] = ()) -> None:
        stage_ctx = _fed(replace(ctx, in_pipeline=True), feed)
        for stage in stages:
            start = len(self._sink.commands)
            self.walk(stage, stage_ctx)
            stage_ctx = _fed(stage_ctx, self._sink.commands[start:])

    def _function(self, node: Node, ctx: _Ctx) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = self.resolve(name_node) if name_node is not None else ""
        inner = replace(ctx, functions=(*ctx.functions, name), in_pipeline=False, background=False, stdin=())
        for child in node.named_children:
            if body is not None and child.id == body.id:
                self.walk(child, inner)
            elif child.type in REDIRECT_TYPES:
                raw = _RawRedirects()
                self._redirect(child, raw)
                self._sink.redirects.extend(raw.redirects)
                for sub in raw.substitutions:
                    self.walk(sub, ctx)
            elif name_node is None or child.id != name_node.id:
                self.walk(child, ctx)

    def _substitution(self, node: Node, ctx: _Ctx) -> None:
        text = self.text(node)
        if text.startswith("`") and "\\" in text:
            # Inside backticks `\`` starts a nested substitution; the grammar does not know this, so
            # parse the unescaped body as a script of its own.
            _parse_into(BACKTICK_ESCAPE.sub(r"\1", text[1:-1]), self._sink, replace(ctx, depth=ctx.depth + 1))
            return
        self._children(node, ctx)

    def _redirected(self, node: Node, ctx: _Ctx) -> None:
        body = node.child_by_field_name("body")
        raw = _RawRedirects()
        for child in node.named_children:
            if child.type in REDIRECT_TYPES:
                self._redirect(child, raw)
        if body is not None and body.type == "command":
            self._command(body, ctx, raw)
            return
        tail = body
        while tail is not None and tail.type in ("list", "pipeline") and tail.named_children:
            tail = tail.named_children[-1]
        if body is not None and tail is not None and tail.type == "command":
            # `a && b 2>/dev/null -rf /`: the grammar hangs the redirection (and the words after it,
            # which are b's arguments) on the whole list; bash gives them to b.
            self._attached[tail.id] = raw
            self.walk(body, ctx)
            return
        # Redirections of a compound statement or pipeline: record them, walk what they contain.
        self._sink.redirects.extend(raw.redirects)
        for sub in raw.substitutions:
            self.walk(sub, ctx)
        for group in raw.extra_words:
            for piece in group:
                self.walk(piece, ctx)
        for other in (*raw.pipelines, *raw.others):
            self.walk(other, ctx)
        if body is not None:
            self.walk(body, ctx)

    def _redirect(self, node: Node, raw: _RawRedirects) -> None:
        op = "".join(self.text(child) for child in node.children if not child.is_named)
        match node.type:
            case "file_redirect":
                targets = [
                    child for child in node.named_children if child.type not in ("file_descriptor", "comment")
                ]
                groups = contiguous(targets)
                target = self.word(groups[0]) if groups else ""
                raw.redirects.append(Redirect(op=op, target=target))
                raw.extra_words.extend(groups[1:])
                for group in groups[:1]:
                    for piece in group:
                        raw.substitutions.extend(find_substitutions(piece))
            case "herestring_redirect":
                pieces = [child for child in node.children if child.is_named]
                target = self.word(pieces) if pieces else ""
                raw.redirects.append(Redirect(op=op or "<<<", target=target))
                raw.stdin_texts.append(target)
                for piece in pieces:
                    raw.substitutions.extend(find_substitutions(piece))
            case "heredoc_redirect":
                body = ""
                heredoc_op = "<<"
                for child in node.children:
                    if not child.is_named:
                        if child.type in ("<<", "<<-"):
                            heredoc_op = child.type
                        continue
                    match child.type:
                        case "heredoc_body":
                            body = self.text(child)
                            raw.substitutions.extend(find_substitutions(child))
                        case "heredoc_start" | "heredoc_end" | "comment":
                            pass
                        case "file_redirect" | "herestring_redirect" | "heredoc_redirect":
                            self._redirect(child, raw)
                        case "pipeline":
                            raw.pipelines.append(child)
                        case _:
                            raw.others.append(child)
                raw.redirects.append(Redirect(op=heredoc_op, target=body))
                raw.stdin_texts.append(body)
            case _:
                raw.substitutions.extend(find_substitutions(node))

    def _command(self, node: Node, ctx: _Ctx, raw: _RawRedirects) -> None:
        word_nodes: list[Node] = []
        for i, child in enumerate(node.children):
            field_name = node.field_name_for_child(i)
            if field_name == "name":
                word_nodes.extend(child.children)
            elif field_name == "argument":
                word_nodes.append(child)
            elif child.type in REDIRECT_TYPES:
                self._redirect(child, raw)
            elif child.is_named:
                self.walk(child, ctx)  # variable assignments: walk for substitutions
        groups = contiguous(word_nodes) + raw.extra_words
        words: list[str] = []
        for group in groups:
            word = self.word(group)
            if unquoted_ifs(group, self._src):  # `rm${IFS}-rf${IFS}/` is `rm -rf /`
                words.extend(part for part in IFS.sub(" ", word).split(" ") if part)
            else:
                words.append(word)

        start = len(self._sink.commands)
        for group in groups:
            for piece in group:
                for sub in find_substitutions(piece):
                    self.walk(sub, ctx)
        for sub in raw.substitutions:
            self.walk(sub, ctx)
        substituted: dict[str, None] = {}
        for cmd in self._sink.commands[start:]:
            substituted.update(dict.fromkeys((*cmd.wrappers[len(ctx.wrappers) :], cmd.program)))

        self._sink.redirects.extend(raw.redirects)
        if not words:
            return
        feeds_pipe = bool(raw.pipelines)
        own = replace(ctx, in_pipeline=True) if feeds_pipe else ctx
        first = len(self._sink.commands)
        _emit(
            words,
            own,
            self._sink,
            redirects=tuple(raw.redirects),
            substituted=tuple(substituted),
            stdin_texts=tuple(raw.stdin_texts),
        )
        feed = self._sink.commands[first:]
        for pipeline in raw.pipelines:
            self._pipeline(pipeline.named_children, ctx, feed)
        for other in raw.others:
            self.walk(other, ctx)


def _output_text(cmd: SimpleCommand) -> str | None:
    """What a command writes to standard output, when that is known from its words alone."""
    match cmd.program:
        case "echo":
            args = list(cmd.argv[1:])
            while args and re.fullmatch(r"-[neE]+", args[0]):
                args.pop(0)
            return " ".join(args)
        case "printf":
            return " ".join(cmd.argv[1:])  # approximate: the format and its arguments
        case "cat":
            texts = [r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<")]
            return "\n".join(texts) if texts else None
        case _:
            return None


def _fed(ctx: _Ctx, commands: Sequence[SimpleCommand]) -> _Ctx:
    """The context of a pipeline stage that reads what ``commands`` write."""
    texts = tuple(text for text in map(_output_text, commands) if text is not None)
    return replace(
        ctx,
        stdin=ctx.stdin + tuple(cmd.argv for cmd in commands),
        # Bounded: only recent output can reach a later stage, and `a | sh | b | sh ...` stays linear.
        stdin_texts=(ctx.stdin_texts + texts)[-_MAX_STDIN_TEXTS:],
    )


_POSITIONAL = re.compile(r"\$(?:\{([0-9]+|[@*])\}|([0-9@*]))")


def _bind_positional(script: str, params: Sequence[str]) -> str:
    """Put ``sh -c SCRIPT $0 $1 ...`` parameters into the script text (escaped for double quotes)."""
    if not params:
        return script

    def value(match: re.Match[str]) -> str:
        key = match.group(1) or match.group(2)
        if key in ("@", "*"):
            text = " ".join(params[1:])
        else:
            index = int(key)
            text = params[index] if index < len(params) else ""
        return re.sub(r'([\\"$`])', r"\\\1", text)

    return _POSITIONAL.sub(value, script)


def _emit(
    words: Sequence[str],
    ctx: _Ctx,
    sink: _Sink,
    *,
    redirects: tuple[Redirect, ...] = (),
    substituted: tuple[str, ...] = (),
    stdin_texts: tuple[str, ...] = (),
) -> None:
    """Peel wrappers off one command's words, record it, and descend into what it runs."""
    argv = list(words)
    wrappers: list[str] = []
    while argv and len(wrappers) < _MAX_WRAPPERS:
        argv[0] = normalise_program(argv[0])
        inner = split_wrapper(argv)
        if not inner:  # not a wrapper, or a wrapper with nothing to run (`sudo -l`, `env`)
            break
        wrappers.append(argv[0])
        argv = inner
    all_wrappers = ctx.wrappers + tuple(wrappers)
    script = inline_script(argv)
    cmd = SimpleCommand(
        argv=tuple(argv),
        written=tuple(words),
        wrappers=all_wrappers,
        redirects=redirects,
        substituted=substituted,
        stdin=ctx.stdin,
        in_pipeline=ctx.in_pipeline,
        background=ctx.background,
        functions=ctx.functions,
        carrier=script is not None,
    )
    sink.commands.append(cmd)
    inner_ctx = replace(ctx, wrappers=(*all_wrappers, cmd.program), depth=ctx.depth + 1)
    if script is not None:
        _parse_into(_bind_positional(*script), sink, inner_ctx)
    for exec_argv in exec_commands(argv):
        _emit(exec_argv, replace(ctx, wrappers=(*all_wrappers, "find")), sink)
    if executes_stdin(argv):
        # The shell consumes that input: what it runs does not see it again.
        consumed = replace(inner_ctx, stdin=(), stdin_texts=())
        for text in (*stdin_texts, *ctx.stdin_texts):
            _parse_into(text, sink, consumed)


def _parse_into(text: str, sink: _Sink, ctx: _Ctx) -> bool:
    """Parse ``text`` and walk it into ``sink``; ``False`` when it holds only comments and blanks."""
    if ctx.depth > MAX_DEPTH:
        raise UnparsableCommand(f"inline scripts nest more than {MAX_DEPTH} levels deep")
    try:
        source = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise UnparsableCommand(f"command text is not encodable: {exc}") from exc
    tree = _parser().parse(source)
    root = tree.root_node
    if root.has_error:
        raise UnparsableCommand(f"not valid shell syntax: {_error_excerpt(root, source)}")
    _Walker(source, sink).walk(root, ctx)
    return any(child.type != "comment" for child in root.named_children)


def _error_excerpt(root: Node, source: bytes) -> str:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            where = node.start_byte
            snippet = source[max(0, where - 20) : where + 20].decode("utf-8", "replace")
            what = f"missing {node.type!r}" if node.is_missing else "unexpected input"
            return f"{what} near {snippet!r}"
        stack.extend(reversed(node.children))
    return "syntax error"


def parse_script(command: str | Sequence[str]) -> ParsedScript:
    """Parse shell text, or an argv list (taken word for word, as ``execve`` would), into a script.

    Raises ``UnparsableCommand`` (a ``ValueError``) when the text is not valid shell syntax or inline
    scripts nest deeper than ``MAX_DEPTH``. Empty input gives a script with ``empty=True``.
    """
    sink = _Sink()
    try:
        if isinstance(command, str):
            content = _parse_into(command, sink, _Ctx())
        else:
            content = bool(command)
            if content:
                _emit([str(word) for word in command], _Ctx(), sink)
    except RecursionError as exc:  # thousands of nested subshells or substitutions
        raise UnparsableCommand("the command nests too deeply to judge") from exc
    return ParsedScript(commands=tuple(sink.commands), redirects=tuple(sink.redirects), empty=not content)


def parse_command(command: str | Sequence[str]) -> tuple[SimpleCommand, ...]:
    """The normalised simple commands ``command`` would run, nested ones included (see ``parse_script``)."""
    return parse_script(command).commands
