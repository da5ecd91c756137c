"""The tree walker: one pass over a tree-sitter-bash parse, emitting every simple command it runs.

See ``_shell`` for the theory of operation. The walker expands words (``_words``), tracks variable
assignments, ``set --`` and ``for`` loops, attaches redirections to the command bash gives them to,
and follows pipelines, substitutions and compound statements; each command's words go to
``_shell._emit``, which peels wrappers and descends into what the command runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tree_sitter import Node

from agent_fleet.policy.bash import _shell
from agent_fleet.policy.bash._code import Inner
from agent_fleet.policy.bash._commands import CommandTooLarge, Redirect, SimpleCommand, UnparsableCommand
from agent_fleet.policy.bash._git import env_runs
from agent_fleet.policy.bash._later import read_text
from agent_fleet.policy.bash._state import MAX_STDIN, Ctx, RawRedirects, Sink, fed, output_text
from agent_fleet.policy.bash._unwrap import is_dynamic, normalise_program
from agent_fleet.policy.bash._words import Expander, known_output, named

__all__ = ["MAX_NESTING", "Walker"]

#: How deep the walk may go in the syntax tree (subshells in subshells, substitutions in substitutions,
#: inline scripts included): deeper is declined as unparsable, so the stack the judge needs is bounded.
MAX_NESTING = 100
_MAX_LOOP_VALUES = 8
_MAX_LOOP_BODY = 512
_MAX_CALLS = 32
_MAX_ASSIGNMENTS = 1000

_SUBSTITUTION_TYPES = frozenset({"command_substitution", "process_substitution"})
_REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_BACKTICK_ESCAPE = re.compile(r"\\([\\$`])")


def _find_substitutions(node: Node) -> list[Node]:
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _SUBSTITUTION_TYPES:
            found.append(current)
            continue
        stack.extend(reversed(named(current)))
    return found


def _contiguous(nodes: Sequence[Node], source: bytes) -> list[list[Node]]:
    """Group nodes into shell words: pieces with nothing (or only a backslash-newline) between them."""
    groups: list[list[Node]] = []
    for node in nodes:
        if groups:
            end = groups[-1][-1].end_byte
            if end == node.start_byte or source[end : node.start_byte] == b"\\\n":
                groups[-1].append(node)
                continue
        groups.append([node])
    return groups


# --------------------------------------------------------------------------------------------------
# The walker.


class Walker:
    def __init__(self, source: bytes, sink: Sink) -> None:
        self._src = source
        self._sink = sink
        self._expander = Expander(source, sink.env, self._substitute)
        # Redirections the grammar hung on a list or pipeline but that belong to its last command.
        self._attached: dict[int, RawRedirects] = {}

    def text(self, node: Node) -> str:
        return self._src[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    # -- words ---------------------------------------------------------------------------------

    def fields(self, group: Sequence[Node]) -> list[str]:
        return self._expander.fields(group)

    def word(self, group: Sequence[Node]) -> str:
        return " ".join(self.fields(group)) if group else ""

    def _substitute(self, node: Node) -> str | None:
        """The output of ``$(...)``/backticks when it is known from the words alone."""
        sink = self._sink
        sink.nesting += 1  # words in substitutions in words ...: the same bound as the walk
        try:
            if sink.nesting > MAX_NESTING:
                raise UnparsableCommand(f"the command nests more than {MAX_NESTING} levels deep")
            return self._substitution_output(node)
        finally:
            sink.nesting -= 1

    def _substitution_output(self, node: Node) -> str | None:
        body = [child for child in named(node) if child.type != "comment"]
        if len(body) == 1 and body[0].type == "file_redirect" and self.text(body[0]).startswith("<"):
            return read_text(("cat", self.text(body[0]).lstrip("<").strip()), self._sink.files)  # `$(< x)`
        documents: list[str] = []
        if len(body) == 1 and body[0].type == "redirected_statement":
            # `$(cat <<'E' ... E)`: what the here-document holds is what the substitution prints.
            statement = body[0]
            inner = statement.child_by_field_name("body")
            for child in named(statement):
                if child.type == "heredoc_redirect":
                    documents.append(self._document(child))
                elif inner is None or child.id != inner.id:
                    return None
            body = [inner] if inner is not None else []
        if len(body) != 1 or body[0].type != "command":
            return None
        command = body[0]
        words: list[str] = []
        for i, child in enumerate(command.children):
            name = command.field_name_for_child(i)
            if name == "name":
                words.extend(self.fields(child.children))
            elif name == "argument":
                words.extend(self.fields([child]))
            elif child.type == "herestring_redirect":  # `$(cat <<< 'TEXT')`
                pieces = [piece for piece in child.children if piece.is_named]
                documents.append(" ".join(self.fields(pieces)) + "\n")
            elif child.is_named:
                return None
        if not words:
            return None
        program = normalise_program(words[0])
        if documents:
            operands = [word for word in words[1:] if word != "-"]
            return "".join(documents) if program in ("cat", "tee") and not operands else None
        return known_output(program, words[1:]) or read_text((program, *words[1:]), self._sink.files)

    def _document(self, node: Node) -> str:
        """The text a here-document gives: its body, tabs stripped for ``<<-``. Expansions in an unquoted
        document are left as written (``$X``), so what depends on them stays unknown."""
        body = next((child for child in named(node) if child.type == "heredoc_body"), None)
        text = self.text(body) if body is not None else ""
        if any(child.type == "<<-" for child in node.children):
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return text

    def _assign(self, node: Node) -> None:
        self._sink.assignments += 1
        if self._sink.assignments > _MAX_ASSIGNMENTS:
            raise CommandTooLarge(f"the command makes more than {_MAX_ASSIGNMENTS} assignments")
        name_node = node.child_by_field_name("name") or (named(node)[0] if named(node) else None)
        if name_node is None:
            return
        name = self.text(name_node)
        parent = node.parent
        if (
            parent is not None
            and parent.type == "declaration_command"
            and any(
                self.text(child).startswith("-") and "n" in self.text(child)
                for child in named(parent)
                if child.type == "word"
            )
        ):
            self._sink.env.variables[name] = None  # `declare -n ref=X`: a name reference
            return
        if name_node.type == "subscript":
            parts = named(name_node)
            name = self.text(parts[0]) if parts else name
            self._sink.env.variables[name] = None
            return
        value_nodes = [child for child in named(node) if child.id != name_node.id]
        appending = any(child.type == "+=" for child in node.children)
        value: tuple[str, ...] | None
        if appending:
            value = None
        elif not value_nodes:
            value = ("",)
        elif value_nodes[0].type == "array":
            items: list[str] = []
            for element in named(value_nodes[0]):
                items.extend(self.fields([element]))
            # `([5]=rm)`, `([k]=v)`: elements by index or key; not tracked, so the array is unknown
            sparse = any(self.text(e).startswith("[") and "]=" in self.text(e) for e in named(value_nodes[0]))
            value = None if sparse else tuple(items)
        else:
            value = (" ".join(self._expander.fields(value_nodes, quoted=True)),)
        self._sink.env.variables[name] = value
        if value is not None:
            for inner in env_runs(name, value[0] if value else ""):
                self._inner(inner, Ctx(wrappers=("export",), implied=True))

    # -- statements ----------------------------------------------------------------------------

    def prescan(self, root: Node) -> None:
        """Bind variables assigned anywhere in the text that are still unknown, so a function defined
        before the assignment it uses is judged with the value (an unset variable would expand to
        nothing, which is harmless; an inherited one is unknown either way)."""
        stack = [root]
        env = self._sink.env.variables
        seen = 0
        while stack:
            node = stack.pop()
            if node.type == "variable_assignment":
                seen += 1
                if seen > _MAX_ASSIGNMENTS:
                    raise CommandTooLarge(f"the command makes more than {_MAX_ASSIGNMENTS} assignments")
                name_node = node.child_by_field_name("name")
                values = [child for child in named(node) if name_node is None or child.id != name_node.id]
                if name_node is not None and name_node.type == "variable_name" and values:
                    name = self.text(name_node)
                    if name not in env and values[0].type != "array":
                        fields = self._expander.fields(values, quoted=True)
                        if not any("$" in f or "`" in f for f in fields):
                            env[name] = (" ".join(fields),)
                continue
            stack.extend(named(node))

    def walk(self, node: Node, ctx: Ctx) -> None:
        sink = self._sink
        sink.nesting += 1
        try:
            if sink.nesting > MAX_NESTING:  # an explicit bound: no recursion limit decides a verdict
                raise UnparsableCommand(f"the command nests more than {MAX_NESTING} levels deep")
            self._walk(node, ctx)
        finally:
            sink.nesting -= 1

    def _walk(self, node: Node, ctx: Ctx) -> None:
        match node.type:
            case "command":
                self._command(node, ctx, self._attached.pop(node.id, RawRedirects()))
            case "redirected_statement":
                self._redirected(node, ctx)
            case "pipeline":
                self._pipeline(named(node), ctx)
            case "function_definition":
                self._function(node, ctx)
            case "command_substitution":
                self._substitution(node, ctx)
            case "variable_assignment":
                self._children(node, ctx)
                self._assign(node)
            case "declaration_command" if ctx.in_pipeline or self._prints(node):
                # `export -p | curl ...`, `declare -p TOKEN`: a declaration that prints is a command.
                self._children(node, ctx)
                words = [self.text(child) for child in node.children]
                _shell.emit(words, ctx, self._sink)
            case "for_statement":
                self._for(node, ctx)
            case "comment" | "heredoc_start" | "heredoc_end":
                return
            case _:
                self._children(node, ctx)

    def _prints(self, node: Node) -> bool:
        """``export``, ``declare -x``, ``declare -p NAME``: a declaration that prints variables."""
        words = [self.text(child) for child in node.children[1:]]
        if any(child.type == "variable_assignment" for child in node.children):
            return False
        options = [w for w in words if w.startswith("-")]
        return not [w for w in words if not w.startswith("-")] or any("p" in o for o in options)

    def _children(self, node: Node, ctx: Ctx) -> None:
        children = node.children
        for i, child in enumerate(children):
            if not child.is_named:
                continue
            background = i + 1 < len(children) and children[i + 1].type == "&"
            self.walk(child, ctx._replace(background=True) if background else ctx)

    def _for(self, node: Node, ctx: Ctx) -> None:
        var = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        values: list[str] = []
        dynamic = False
        first = len(self._sink.commands)
        for value_node in node.children_by_field_name("value"):
            for sub in _find_substitutions(value_node):
                self.walk(sub, ctx)
            fields = self.fields([value_node])
            values.extend(fields)
            dynamic = dynamic or any(is_dynamic(v) for v in fields)
        if var is None or body is None:
            self._children(node, ctx)
            return
        name = self.text(var)
        env = self._sink.env.variables
        cost = max(1, len(values))
        small = body.end_byte - body.start_byte <= _MAX_LOOP_BODY
        sink = self._sink
        if (
            not dynamic
            and small
            and not sink.in_loop
            and 0 < len(values) <= _MAX_LOOP_VALUES <= sink.loop_budget
        ):
            # Walk a small body once per value (not nested: the extra work stays a constant factor).
            sink.loop_budget -= cost
            sink.in_loop = True
            try:
                for value in values:
                    env[name] = (value,)
                    self.walk(body, ctx)
            finally:
                sink.in_loop = False
            return
        env[name] = None
        listed = tuple(cmd.argv for cmd in self._sink.commands[first:])  # `for f in $(git ls-files)`
        self.walk(body, ctx._replace(sources=(ctx.sources + listed)[-MAX_STDIN:]) if listed else ctx)

    def _pipeline(self, stages: Sequence[Node], ctx: Ctx, feed: Sequence[SimpleCommand] = ()) -> None:
        files = self._sink.files
        stage_ctx = fed(ctx._replace(in_pipeline=True), feed, files)
        for stage in stages:
            start = len(self._sink.commands)
            self.walk(stage, stage_ctx)
            stage_ctx = fed(stage_ctx, self._sink.commands[start:], files)

    def _function(self, node: Node, ctx: Ctx) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = self.text(name_node) if name_node is not None else ""
        if body is not None and name:
            self._sink.functions[name] = (self, body)
        inner = ctx._replace(
            functions=(*ctx.functions, name), in_pipeline=False, background=False, stdin=(), feeders=()
        )
        for child in named(node):
            if body is not None and child.id == body.id:
                self.walk(child, inner)
            elif child.type in _REDIRECT_TYPES:
                raw = RawRedirects()
                self._redirect(child, raw)
                self._sink.redirects.extend(raw.redirects)
                for sub in raw.substitutions:
                    self.walk(sub, ctx)
            elif name_node is None or child.id != name_node.id:
                self.walk(child, ctx)

    def _substitution(self, node: Node, ctx: Ctx) -> None:
        text = self.text(node)
        if text.startswith("`") and "\\" in text:
            # Inside backticks `\`` starts a nested substitution; the grammar does not know this, so
            # parse the unescaped body as a script of its own.
            _shell.parse_into(
                _BACKTICK_ESCAPE.sub(r"\1", text[1:-1]), self._sink, ctx._replace(depth=ctx.depth + 1)
            )
            return
        self._children(node, ctx)

    def _redirected(self, node: Node, ctx: Ctx) -> None:
        body = node.child_by_field_name("body")
        raw = RawRedirects()
        for child in named(node):
            if child.type in _REDIRECT_TYPES:
                self._redirect(child, raw)
        if body is not None and body.type == "command":
            self._command(body, ctx, raw)
            return
        if body is not None and body.type == "declaration_command" and self._prints(body):
            # `export -p > vars.sh`: the declaration prints into the file.
            self._sink.redirects.extend(raw.redirects)
            self._children(body, ctx)
            words = [self.text(child) for child in body.children]
            _shell.emit(words, ctx, self._sink, redirects=tuple(raw.redirects))
            return
        tail = body
        while tail is not None and tail.type in ("list", "pipeline") and named(tail):
            tail = named(tail)[-1]
        if body is not None and tail is not None and tail.type == "command":
            # `a && b 2>/dev/null -rf /`: the grammar hangs the redirection (and the words after it,
            # which are b's arguments) on the whole list; bash gives them to b.
            self._attached[tail.id] = raw
            self.walk(body, ctx)
            return
        # Redirections of a compound statement or pipeline: record them, walk what they contain.
        self._sink.redirects.extend(raw.redirects)
        body_ctx = self._feed(raw, ctx)
        for sub in raw.substitutions:
            self.walk(sub, ctx)
        for group in raw.extra_words:
            for piece in group:
                self.walk(piece, ctx)
        for other in (*raw.pipelines, *raw.others):
            self.walk(other, ctx)
        if body is not None:
            self.walk(body, body_ctx._replace(stdin_texts=body_ctx.stdin_texts + tuple(raw.stdin_texts)))

    def _feed(self, raw: RawRedirects, ctx: Ctx) -> Ctx:
        """Walk ``< <(...)`` substitutions; the context of a command reading what they print."""
        reading = ctx
        for sub in raw.feeds:
            start = len(self._sink.commands)
            self.walk(sub, ctx)
            reading = fed(reading, self._sink.commands[start:])
        return reading

    def _redirect(self, node: Node, raw: RawRedirects) -> None:
        op = "".join(
            self.text(child) for child in node.children if not child.is_named or child.type == "ERROR"
        )
        match node.type:
            case "file_redirect":
                targets = [
                    child
                    for child in named(node)
                    if child.type not in ("file_descriptor", "comment", "ERROR")
                ]
                groups = _contiguous(targets, self._src)
                target = self.word(groups[0]) if groups else ""
                raw.redirects.append(Redirect(op=op, target=target))
                raw.extra_words.extend(groups[1:])
                for group in groups[:1]:
                    for piece in group:
                        for sub in _find_substitutions(piece):
                            if op == "<" and sub.type == "process_substitution":
                                raw.feeds.append(sub)
                            else:
                                raw.substitutions.append(sub)
            case "herestring_redirect":
                pieces = [child for child in node.children if child.is_named]
                target = self.word(pieces) if pieces else ""
                raw.redirects.append(Redirect(op=op or "<<<", target=target))
                raw.stdin_texts.append(target)
                for piece in pieces:
                    raw.substitutions.extend(_find_substitutions(piece))
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
                            raw.substitutions.extend(_find_substitutions(child))
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
                raw.substitutions.extend(_find_substitutions(node))

    def _command(self, node: Node, ctx: Ctx, raw: RawRedirects) -> None:
        word_nodes: list[Node] = []
        assignments: list[Node] = []
        for i, child in enumerate(node.children):
            field_name = node.field_name_for_child(i)
            if field_name == "name":
                word_nodes.extend(child.children)
            elif field_name == "argument":
                word_nodes.append(child)
            elif child.type in _REDIRECT_TYPES:
                self._redirect(child, raw)
            elif child.type == "variable_assignment":
                assignments.append(child)
                self._children(child, ctx)  # walk for substitutions
            elif child.is_named:
                self.walk(child, ctx)
        groups = _contiguous(word_nodes, self._src) + raw.extra_words
        prefix_env: list[tuple[str, str]] = []
        for assignment in assignments:
            self._assign(assignment)
            name_node = assignment.child_by_field_name("name")
            if name_node is not None:
                value = self._sink.env.variables.get(self.text(name_node))
                prefix_env.append((self.text(name_node), value[0] if value else ""))
        words: list[str] = []
        for group in groups:
            words.extend(self.fields(group))
        alias = self._sink.aliases.get(words[0]) if words else None
        if alias:
            words = [*alias, *words[1:]]

        start = len(self._sink.commands)
        outputs: list[Node] = []
        script_texts: list[str] = []
        for group in groups:
            for piece in group:
                for sub in _find_substitutions(piece):
                    if self.text(sub).startswith(">("):
                        outputs.append(sub)
                        continue
                    first = len(self._sink.commands)
                    self.walk(sub, ctx)
                    if self.text(sub).startswith("<("):  # `sh <(echo CMD)`: a file holding that text
                        made = self._sink.commands[first:]
                        script_texts.extend(t for t in map(output_text, made) if t is not None)
        for sub in raw.substitutions:
            if self.text(sub).startswith(">("):  # `curl URL > >(bash)`: it reads what the command writes
                outputs.append(sub)
            else:
                self.walk(sub, ctx)
        reading = self._feed(raw, ctx)
        substituted: dict[str, None] = {}
        for cmd in self._sink.commands[start:]:
            substituted.update(dict.fromkeys((*cmd.wrappers[len(ctx.wrappers) :], cmd.program, *cmd.feeders)))
        sources = tuple(cmd.argv for cmd in self._sink.commands[start:])[-MAX_STDIN:]

        self._sink.redirects.extend(raw.redirects)
        if words:
            self._builtin(words)
            feeds_pipe = bool(raw.pipelines)
            own = reading._replace(in_pipeline=True) if feeds_pipe else reading
            first = len(self._sink.commands)
            _shell.emit(
                words,
                own,
                self._sink,
                redirects=tuple(raw.redirects),
                substituted=tuple(substituted),
                stdin_texts=tuple(raw.stdin_texts),
                env=tuple(prefix_env),
                script_texts=tuple(script_texts),
                sources=sources,
            )
            feed = self._sink.commands[first:]
            self._call(words, own)
            for sub in outputs:  # `tee >(sh)`: the substitution reads what this command writes
                self.walk(sub, fed(ctx, feed[:1]))
            for pipeline in raw.pipelines:
                self._pipeline(named(pipeline), ctx, feed)
        for other in raw.others:
            self.walk(other, ctx)

    def _call(self, words: Sequence[str], ctx: Ctx) -> None:
        """A call of a function defined earlier: walk its body again with the arguments as ``$@``."""
        found = self._sink.functions.get(words[0])
        if found is None or words[0] in ctx.functions or self._sink.calls >= _MAX_CALLS:
            return
        self._sink.calls += 1
        walker, body = found
        env = self._sink.env
        saved = env.positional
        env.positional = tuple(words)
        try:
            walker.walk(body, ctx._replace(functions=(*ctx.functions, words[0]), depth=ctx.depth + 1))
        finally:
            env.positional = saved

    def _builtin(self, words: Sequence[str]) -> None:
        """Builtins that change what later words expand to: ``set --``, ``shift``, ``read``, ``unset``."""
        env = self._sink.env
        match words[0]:
            case "set" if len(words) > 1 and (words[1] == "--" or not words[1].startswith(("-", "+"))):
                params = words[2:] if words[1] == "--" else words[1:]
                zero = env.positional[0] if env.positional else "sh"
                env.positional = (zero, *params)
            case "shift" if env.positional is not None:
                count = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
                env.positional = (env.positional[0], *env.positional[1 + count :])
            case "read" | "mapfile" | "readarray" | "getopts" | "printf" | "declare" | "typeset" | "local":
                for word in words[1:]:
                    name = word.partition("=")[0]
                    known = name in env.variables or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
                    if not known and (
                        words[0] in ("read", "mapfile", "readarray", "getopts") or "=" not in word
                    ):
                        env.variables.setdefault(name, None)
            case "unset":
                for word in words[1:]:
                    env.variables.pop(word, None)
            case "alias":
                for word in words[1:]:
                    name, eq, value = word.partition("=")
                    if eq:
                        self._sink.aliases[name] = value.split()
            case _:
                pass

    def _inner(self, inner: Inner, ctx: Ctx) -> None:
        _shell.run_inner(inner, self._sink, ctx)
