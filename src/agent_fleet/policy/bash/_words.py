"""Shell words -> the fields bash would pass: quotes removed, escapes applied, known expansions done.

``Expander`` turns the pieces of one word (tree-sitter nodes) into a list of fields, the way bash does for
the parts we can know statically: variables assigned earlier in the same script (``X=rm; $X -rf /``),
arrays (``a=(rm -rf /); "${a[@]}"``), positional parameters (``set -- rm -rf /; "$@"``, ``sh -c S _ a b``),
``${X:-default}`` (the default, when ``X`` is not known), literal command substitutions
(``$(echo ~)``, ``$(printf '\\x72m')``, ``$(which rm)``) and field splitting of unquoted expansions on the
current ``IFS``. Anything else keeps its text as written (``$HOME``, ``$(date)``), so later stages see a
dynamic word (``is_dynamic``) and judge it as unknown.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

__all__ = [
    "MKTEMP_NAME",
    "Env",
    "Expander",
    "children",
    "known_output",
    "named",
    "printf_output",
    "unescape_ansi_c",
    "unescape_backslashes",
    "unescape_double",
    "unescape_unquoted",
]

#: The name ``$(mktemp)`` stands for: a fresh entry of the temporary directory (the session's own,
#: where a provider sets ``TMPDIR``), so writes there stay in the box.
MKTEMP_NAME = "/tmp/tmp.XXXXXXXXXX"
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DOUBLE_QUOTED_ESCAPE = re.compile(r"\\([\"\\$`\n])")
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)
_ANSI_C_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_DEFAULT_IFS = " \t\n"
#: Values longer than this are not substituted (keeps expansion linear: a value is copied at most once
#: per use, and uses are bounded by the input size).
_MAX_VALUE = 4096
_SUBSTITUTION_BUDGET = 1 << 18


def unescape_unquoted(text: str) -> str:
    return _UNQUOTED_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def unescape_double(text: str) -> str:
    return _DOUBLE_QUOTED_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _ansi_c_char(match: re.Match[str]) -> str:
    esc = match.group(1)
    head = esc[0]
    try:
        if head == "x" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        if head in "uU" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        if head in "01234567":
            return chr(int(esc, 8) & 0xFF)
    except (ValueError, OverflowError):
        return ""
    if head == "c" and len(esc) == 2:
        return chr(ord(esc[1]) & 0x1F)
    return _ANSI_C_SIMPLE.get(esc, "\\" + esc)


def unescape_ansi_c(text: str) -> str:
    return _ANSI_C_ESCAPE.sub(_ansi_c_char, text)


# `printf %b` and `echo -e`: `\0NNN` is octal with up to three digits after the 0 (`\0162` is `r`, not
# `\016` then `2`), `\c` ends all output; `printf %b` also reads `\NNN`, `echo -e` does not.
_BACKSLASH_ESCAPE = re.compile(
    r"\\(0[0-7]{0,3}|[1-7][0-7]{0,2}|x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|.)", re.DOTALL
)


def unescape_backslashes(text: str, *, echo: bool = False) -> str:
    """The text ``printf %b`` (or, with ``echo``, ``echo -e``) prints for ``text``."""
    out: list[str] = []
    pos = 0
    for match in _BACKSLASH_ESCAPE.finditer(text):
        out.append(text[pos : match.start()])
        pos = match.end()
        esc = match.group(1)
        if esc == "c":
            return "".join(out)
        if esc[0] == "0":
            out.append(chr(int(esc, 8) & 0xFF))
        elif esc[0] in "1234567":
            out.append("\\" + esc if echo else chr(int(esc, 8) & 0xFF))
        else:
            out.append(_ansi_c_char(match))
    out.append(text[pos:])
    return "".join(out)


_PRINTF_SPEC = re.compile(r"%(?:%|[-+ #0]*[0-9]*(?:\.[0-9]*)?([sbdiouxXcq]))")


def printf_output(args: Sequence[str]) -> str | None:
    """What ``printf FORMAT ARGS...`` prints, for ``%s``/``%b``/``%d``-style formats; ``None`` if unsure."""
    if not args:
        return None
    if args[0] == "-v":
        return None
    if args[0] == "--":
        args = args[1:]
    if not args:
        return None
    fmt, values = args[0], list(args[1:])
    out: list[str] = []
    for _ in range(64):  # printf reuses the format while arguments remain
        pos = 0
        used = 0
        for match in _PRINTF_SPEC.finditer(fmt):
            out.append(unescape_ansi_c(fmt[pos : match.start()]))
            pos = match.end()
            if match.group(0) == "%%":
                out.append("%")
                continue
            value = values.pop(0) if values else ""
            used += 1
            out.append(unescape_backslashes(value) if match.group(1) == "b" else value)
        out.append(unescape_ansi_c(fmt[pos:]))
        if not values or not used:
            break
    return "".join(out)


@dataclass(slots=True)
class Env:
    """What the script has told us so far: variables (``None``: assigned, value unknown) and ``$@``."""

    variables: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    positional: tuple[str, ...] | None = None  # $0, $1, ...; None: unknown
    # Characters substitution may still copy: past it, expansions stay unknown (keeps the work linear
    # even for `X=$X$X; X=$X$X; ...`).
    budget: int = _SUBSTITUTION_BUDGET

    def spend(self, size: int) -> bool:
        if size > _MAX_VALUE or size > self.budget:
            return False
        self.budget -= size
        return True

    def ifs(self) -> str | None:
        """The field separators; ``None`` when the script set ``IFS`` to a value we cannot know."""
        if "IFS" not in self.variables:
            return _DEFAULT_IFS
        value = self.variables["IFS"]
        return None if value is None else "".join(value[:1])


_SPECIAL_POSITIONAL = re.compile(r"[0-9]+|[@*#]")
_OPERATORS_DEFAULT = (":-", "-", ":=", "=")


class Expander:
    """Expands the pieces of one word into fields (see the module docstring).

    ``substitute`` gives the output of a command substitution whose value is known, else ``None``.
    """

    def __init__(
        self,
        source: bytes,
        env: Env,
        substitute: Callable[[Node], str | None],
    ) -> None:
        self._src = source
        self._env = env
        self._substitute = substitute

    def text(self, node: Node) -> str:
        return self._src[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")

    def _gap(self, start: int, end: int) -> str:
        return self._src[start:end].decode("utf-8", "surrogateescape") if end > start else ""

    # -- values ---------------------------------------------------------------------------------

    def _variable(self, node: Node) -> tuple[str, ...] | None:
        """The fields a ``$X``/``${X}``/``${a[@]}``/``$@`` names, or ``None`` when unknown."""
        children = named(node)
        if not children:
            return None
        name_node = children[0]
        index: str | None = None
        if name_node.type == "subscript":
            parts = named(name_node)
            if len(parts) < 2:
                return None
            name_node, index = parts[0], self.text(parts[1])
        name = self.text(name_node)
        rest = children[1:]
        if node.type == "expansion" and rest:
            operator = self._operator(node)
            value = self._lookup(name, index)
            if operator in _OPERATORS_DEFAULT and value is None:
                return tuple(self.fields(rest, quoted=True))
            if operator in _OPERATORS_DEFAULT and not value and ":" in operator:
                return tuple(self.fields(rest, quoted=True))
            if operator in _OPERATORS_DEFAULT:
                return value
            return None
        if node.type == "expansion" and self._operator(node):
            return None  # ${#X}, ${!X}: not a plain value
        return self._lookup(name, index)

    def _operator(self, node: Node) -> str:
        return "".join(
            self.text(child)
            for child in node.children
            if not child.is_named and child.type not in ("${", "}")
        )

    def _lookup(self, name: str, index: str | None) -> tuple[str, ...] | None:
        if _SPECIAL_POSITIONAL.fullmatch(name):
            params = self._env.positional
            if params is None:
                return None
            if name in ("@", "*"):
                return params[1:]
            if name == "#":
                return (str(max(0, len(params) - 1)),)
            number = int(name)
            return (params[number],) if number < len(params) else ("",)
        if name == "IFS" and name not in self._env.variables:
            return (_DEFAULT_IFS,)
        value = self._env.variables.get(name)
        if value is None:
            return None
        if index in ("@", "*"):
            return value
        if index is not None:
            if not index.isdigit():
                return None
            number = int(index)
            return (value[number],) if number < len(value) else ("",)
        return value[:1]

    # -- fields -----------------------------------------------------------------------------------

    def fields(self, pieces: Sequence[Node], *, quoted: bool = False) -> list[str]:
        """The fields one word (its adjacent pieces) expands to."""
        state = _Fields()
        self._pieces(_flatten(pieces), state, quoted=quoted)
        return state.done()

    def _pieces(self, pieces: Sequence[Node], state: _Fields, *, quoted: bool) -> None:
        pos = pieces[0].start_byte if pieces else 0
        skip_name = 0
        for i, piece in enumerate(pieces):
            gap = self._gap(pos, piece.start_byte)
            if gap and gap != "\\\n":
                state.add(unescape_double(gap) if quoted else unescape_unquoted(gap), literal=True)
            pos = piece.end_byte
            if piece.type == "$" and i + 1 < len(pieces) and pieces[i + 1].type == "string":
                continue  # $"text" (locale translation): the string follows
            if piece.type == "$" and i + 1 < len(pieces) and pieces[i + 1].type == "word":
                # The grammar splits `$IFS/` into `$` and `IFS/`: a variable and the rest of the word.
                name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", self.text(pieces[i + 1]))
                if name is not None:
                    value = self._lookup(name.group(0), None)
                    ifs = self._env.ifs()
                    if value is None or (ifs is None and not quoted):
                        state.add("$" + name.group(0), literal=False)
                    elif quoted:
                        state.add(" ".join(value), literal=True)
                    else:
                        state.unquoted(value, ifs or "")
                    skip_name = len(name.group(0))
                    continue
            if skip_name:
                rest = self.text(piece)[skip_name:]
                skip_name = 0
                state.add(unescape_double(rest) if quoted else unescape_unquoted(rest), literal=True)
                continue
            self._piece(piece, state, quoted=quoted)

    def _piece(self, node: Node, state: _Fields, *, quoted: bool) -> None:
        text = self.text(node)
        match node.type:
            case "word":
                state.add(unescape_double(text) if quoted else unescape_unquoted(text), literal=True)
            case "raw_string":
                state.add(text[1:-1], literal=True)
            case "ansi_c_string":
                state.add(unescape_ansi_c(text[2:-1]), literal=True)
            case "string" | "translated_string":
                state.add("", literal=True)  # "" is a field even when empty
                inner = [child for child in node.children if child.type not in ('"', '$"')]
                named = [child for child in inner if child.is_named]
                start = node.start_byte + (2 if node.type == "translated_string" else 1)
                end = node.end_byte - 1
                pos = start
                for child in named:
                    state.add(unescape_double(self._gap(pos, child.start_byte)), literal=True)
                    pos = child.end_byte
                    self._piece(child, state, quoted=True)
                state.add(unescape_double(self._gap(pos, end)), literal=True)
            case "string_content":
                state.add(unescape_double(text) if quoted else text, literal=True)
            case "concatenation" | "command_name":
                self._pieces(node.children, state, quoted=quoted)
            case "simple_expansion" | "expansion":
                value = self._variable(node)
                ifs = self._env.ifs()
                if value is None or not self._env.spend(sum(map(len, value))):
                    state.add(text, literal=False)
                elif ifs is None and not quoted:
                    state.add(text, literal=False)  # split on separators we cannot know
                elif any("$" in item or "`" in item for item in value):
                    if quoted:
                        state.add(" ".join(value), literal=False)  # an unknown value: not split
                    else:  # `IFS=,; c=rm,-rf,$HOME; $c`: the known separators still split
                        state.unquoted(value, ifs or "")
                elif quoted:
                    if self._is_at(node):
                        state.split_fields(value)
                    else:
                        state.add((" " if ifs is None else ifs[:1]).join(value), literal=True)
                else:
                    state.unquoted(value, ifs or "")
            case "command_substitution":
                output = self._substitute(node)
                ifs = self._env.ifs()
                if output is None or not self._env.spend(len(output)) or (ifs is None and not quoted):
                    state.add(text, literal=False)
                elif quoted:
                    state.add(output.rstrip("\n"), literal=True)
                else:
                    state.unquoted((output.rstrip("\n"),), ifs or "")
            case _:
                state.add(text, literal=False)

    def _is_at(self, node: Node) -> bool:
        text = self.text(node)
        return text in ("$@", "${@}") or bool(re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*\[@\]\}", text))


def children(node: Node) -> list[Node]:
    """``node.children``; for a node with many (a word of 60,000 pieces), read with a cursor one step
    at a time, because the one call that builds the list takes 0.1-0.4 s holding the GIL."""
    if node.child_count <= _MANY_CHILDREN:
        return node.children
    found: list[Node] = []
    cursor = node.walk()
    if cursor.goto_first_child():
        found.append(cursor.node)  # type: ignore[arg-type]
        while cursor.goto_next_sibling():
            found.append(cursor.node)  # type: ignore[arg-type]
    return found


def named(node: Node) -> list[Node]:
    """``node.named_children`` (see ``children``)."""
    return [child for child in children(node) if child.is_named]


_MANY_CHILDREN = 256


def _flatten(pieces: Sequence[Node]) -> list[Node]:
    """Concatenations and command names opened up into their pieces (the order is the text's order)."""
    flat: list[Node] = []
    for piece in pieces:
        if piece.type in ("concatenation", "command_name"):
            flat.extend(_flatten(piece.children))
        else:
            flat.append(piece)
    return flat


@dataclass(slots=True)
class _Fields:
    fields: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    started: bool = False

    def add(self, text: str, *, literal: bool) -> None:
        self.current.append(text)
        self.started = self.started or literal or bool(text)

    def split_fields(self, values: Sequence[str]) -> None:
        """``"$@"``: each value its own field (the first and last join their neighbours)."""
        if not values:
            return
        self.add(values[0], literal=True)
        for value in values[1:]:
            self._break()
            self.add(value, literal=True)

    def unquoted(self, values: Sequence[str], ifs: str) -> None:
        text = " ".join(values) if ifs else "".join(values)
        if not ifs:
            self.add(text, literal=False)
            return
        parts = _split(text, ifs) if text else []
        if not parts:
            return
        if parts[0]:
            self.add(parts[0], literal=False)
        for part in parts[1:]:
            self._break()
            if part:
                self.add(part, literal=False)

    def _break(self) -> None:
        if self.started:
            self.fields.append("".join(self.current))
        self.current = []
        self.started = False

    def done(self) -> list[str]:
        self._break()
        return self.fields


_OPENERS = {"$(": ")", "${": "}", "`": "`"}


def _split(text: str, ifs: str) -> list[str]:
    """``text`` split on runs of ``ifs`` characters, except inside an unknown expansion left as written
    (``$(a b)``, ``${x:-a b}``, backticks), which stays one piece."""
    if "$" not in text and "`" not in text:
        return re.split("[" + re.escape(ifs) + "]+", text)
    parts: list[str] = []
    current: list[str] = []
    closing: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        pair = text[i : i + 2]
        if closing and char == closing[-1] and not (char == "`" and pair in _OPENERS):
            closing.pop()
        elif pair in ("$(", "${"):
            closing.append(_OPENERS[pair])
            current.append(pair)
            i += 2
            continue
        elif char == "`":
            closing.append("`")
        elif not closing and char in ifs:
            if current or not parts or parts[-1]:
                parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def known_output(program: str, args: Sequence[str]) -> str | None:
    """What a command prints, when its words alone tell (``echo``, ``printf``, ``pwd``, ``which``)."""
    match program:
        case "echo":
            words = list(args)
            escapes = False
            while words and re.fullmatch(r"-[neE]+", words[0]):
                escapes = escapes or "e" in words[0]
                words.pop(0)
            text = " ".join(words)
            return unescape_backslashes(text, echo=True) if escapes else text
        case "printf":
            return printf_output(args)
        case "pwd":
            return "$PWD"
        case "git" if list(args) == ["rev-parse", "--show-toplevel"]:
            return "$PWD"  # the session's workspace is its repository's top (a worktree)
        case "which" | "command" | "type" | "realpath" | "readlink":
            operands = [arg for arg in args if not arg.startswith("-")]
            return operands[0] if len(operands) == 1 else None
        case "basename" | "dirname":
            operands = [arg for arg in args if not arg.startswith("-")]
            if not operands or ("$" in operands[0] or "`" in operands[0]):
                return None
            path = operands[0].rstrip("/") or "/"
            return posixpath.basename(path) if program == "basename" else posixpath.dirname(path) or "."
        case "mktemp":  # a fresh name in the temporary directory
            operands = [arg for arg in args if not arg.startswith("-")]
            return MKTEMP_NAME if not operands else None
        case "printenv":
            return f"${args[0]}" if len(args) == 1 else None
        case _:
            return None
