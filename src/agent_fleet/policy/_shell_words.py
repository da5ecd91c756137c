"""Shell words: resolving quotes and escapes the way bash does, and grouping tree-sitter nodes into
words (the helpers of ``_shell``'s walker)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tree_sitter import Node

__all__ = [
    "BACKTICK_ESCAPE",
    "IFS",
    "REDIRECT_TYPES",
    "contiguous",
    "find_substitutions",
    "unescape_ansi_c",
    "unescape_double",
    "unescape_unquoted",
    "unquoted_ifs",
]


_SUBSTITUTION_TYPES = frozenset({"command_substitution", "process_substitution"})
REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DOUBLE_QUOTED_ESCAPE = re.compile(r"\\([\"\\$`\n])")
BACKTICK_ESCAPE = re.compile(r"\\([\\$`])")
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


def find_substitutions(node: Node) -> list[Node]:
    if node.type in _SUBSTITUTION_TYPES:
        return [node]
    found: list[Node] = []
    for child in node.named_children:
        found.extend(find_substitutions(child))
    return found


IFS = re.compile(r"\$(?:IFS|\{IFS\})")


def unquoted_ifs(nodes: Sequence[Node], source: bytes) -> bool:
    """True when an unquoted ``$IFS``/``${IFS}`` is among ``nodes`` (bash splits the word there)."""
    for node in nodes:
        if node.type in ("simple_expansion", "expansion"):
            if IFS.fullmatch(source[node.start_byte : node.end_byte].decode("utf-8", "replace")):
                return True
        elif node.type == "concatenation" and unquoted_ifs(node.named_children, source):
            return True
    return False


def contiguous(nodes: Sequence[Node]) -> list[list[Node]]:
    """Group nodes into shell words: pieces with no whitespace between them form one word."""
    groups: list[list[Node]] = []
    for node in nodes:
        if groups and groups[-1][-1].end_byte == node.start_byte:
            groups[-1].append(node)
        else:
            groups.append([node])
    return groups
