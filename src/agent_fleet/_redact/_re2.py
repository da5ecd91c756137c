"""Go (RE2) regular expressions, as gitleaks writes its rules, rewritten for Python's ``re``.

What differs between the two dialects, and what ``translate`` does about it:

- RE2 takes flags anywhere (``\\b(SG\\.(?i)[a-z]...)``): they hold to the end of the enclosing group,
  for every alternative after them. Python takes global flags only at the start, so a flag group in the
  middle becomes a scoped one, ``(?i:...)``, around the rest of each alternative it governs.
- ``\\z`` (end of text) is ``\\Z`` in Python; ``\\s`` is spelled out (RE2's has no vertical tab);
  POSIX classes (``[[:alnum:]]``) are spelled out; a ``[``
  inside a class is escaped (Python reads ``[[`` as a future nested set); ``(?<name>`` is ``(?P<name>``.
- RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII: patterns are compiled with ``re.ASCII``.

``speed_up`` then rewrites two shapes that cost Python's backtracking engine dearly and change nothing
about which secrets are found:

- a leading ``[\\w.-]{0,50}?`` (gitleaks puts it before every keyword-assignment rule so that its match
  shows the whole variable name) is dropped: a secret found with it is found without it. The class and
  the bound are kept (``Prefix``) to widen a match again where an allowlist looks at the whole match.
- a leading ``\\b`` before a literal (``\\b(hvb\\.``) turns off ``re``'s literal-prefix search; it becomes
  a lookbehind after the literal (``hvb\\.(?<!\\whvb\\.)``), which means the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

__all__ = ["Prefix", "Re2Error", "for_search", "speed_up", "translate"]


class Re2Error(ValueError):
    """A pattern this translator cannot carry over to Python."""


_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?\)")


def translate(pattern: str) -> str:
    """``pattern`` (RE2 syntax) in Python's syntax. Raises ``Re2Error`` for what it cannot carry over."""
    out = _Translator(pattern).run()
    try:
        re.compile(out, re.ASCII)
    except re.error as exc:
        raise Re2Error(f"{pattern!r} -> {out!r}: {exc}") from exc
    return out


class _Translator:
    """One pass over the pattern: classes and escapes copied (with the fixes above), groups tracked so a
    flag group in the middle of one can be scoped to the rest of each of its alternatives."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def run(self) -> str:
        body = self._sequence(top=True)
        if self.i != len(self.p):
            raise Re2Error(f"unbalanced ')' at {self.i} in {self.p!r}")
        return body

    def _sequence(self, *, top: bool) -> str:
        """Alternatives up to the closing ``)`` of the current group (not consumed), joined by ``|``."""
        alternatives: list[str] = []
        current: list[str] = []
        scoped: str | None = None  # flags set in the middle of this group: "i" or "-i" ...
        scoped_at: int | None = None  # where, in ``current``, they started
        while self.i < len(self.p):
            c = self.p[self.i]
            if c == ")":
                break
            if c == "|":
                self.i += 1
                alternatives.append(_close(current, scoped, scoped_at))
                current, scoped_at = [], (0 if scoped is not None else None)
                continue
            if c == "\\":
                current.append(self._escape())
            elif c == "[":
                current.append(self._class())
            elif c == "(":
                m = _FLAGS.match(self.p, self.i)
                if m is not None:
                    self.i = m.end()
                    on, off = m.group(1), m.group(2) or ""
                    if "U" in on + off:
                        raise Re2Error(f"ungreedy flag in {self.p!r}")
                    at_start = top and not alternatives and not current and scoped is None
                    if at_start and not off:
                        current.append(f"(?{on})")  # a global flag at the very start: Python's too
                        continue
                    if scoped is not None:  # a second flag group: close the first scope
                        current[:] = [_close(current, scoped, scoped_at)]
                    scoped = on + (f"-{off}" if off else "")
                    scoped_at = len(current)
                    continue
                current.append(self._group())
            else:
                current.append(c)
                self.i += 1
        alternatives.append(_close(current, scoped, scoped_at))
        return "|".join(alternatives)

    def _group(self) -> str:
        start = self.i
        self.i += 1
        head = "("
        if self.p.startswith("?P<", self.i):
            end = self.p.index(">", self.i)
            head, self.i = "(" + self.p[self.i : end + 1], end + 1
        elif self.p.startswith("?<", self.i) and not self.p.startswith(("?<=", "?<!"), self.i):
            end = self.p.index(">", self.i)
            head, self.i = "(?P<" + self.p[self.i + 2 : end + 1], end + 1
        elif self.p.startswith("?", self.i):
            m = re.compile(r"\?[imsU]*(?:-[imsU]*)?:").match(self.p, self.i)
            if m is None:
                raise Re2Error(f"unknown group at {start} in {self.p!r}")
            if "U" in m.group():
                raise Re2Error(f"ungreedy flag in {self.p!r}")
            head, self.i = "(" + m.group(), m.end()
        body = self._sequence(top=False)
        if self.i >= len(self.p) or self.p[self.i] != ")":
            raise Re2Error(f"unclosed group at {start} in {self.p!r}")
        self.i += 1
        return head + body + ")"

    def _escape(self) -> str:
        if self.i + 1 >= len(self.p):
            raise Re2Error(f"trailing backslash in {self.p!r}")
        c = self.p[self.i + 1]
        self.i += 2
        if c == "z":
            return r"\Z"
        if c == "s":  # RE2's \s has no vertical tab
            return r"[\t\n\f\r ]"
        if c == "S":
            return r"[^\t\n\f\r ]"
        if c in "pPCQE":
            raise Re2Error(f"\\{c} in {self.p!r}")
        if c == "x" and self.p.startswith("{", self.i):
            end = self.p.index("}", self.i)
            code, self.i = self.p[self.i + 1 : end], end + 1
            return f"\\U{int(code, 16):08x}"
        return "\\" + c

    def _class(self) -> str:
        """A character class, copied with POSIX names spelled out and set-like pairs escaped."""
        start = self.i
        self.i += 1
        out = ["["]
        if self.p.startswith("^", self.i):
            out.append("^")
            self.i += 1
        first = True
        while self.i < len(self.p):
            c = self.p[self.i]
            if c == "]" and not first:
                self.i += 1
                out.append("]")
                return "".join(out)
            first = False
            if c == "[" and self.p.startswith("[:", self.i):
                end = self.p.find(":]", self.i + 2)
                name = self.p[self.i + 2 : end] if end > 0 else ""
                negated = name.startswith("^")
                if negated or name not in _POSIX:
                    raise Re2Error(f"POSIX class [:{name}:] in {self.p!r}")
                out.append(_POSIX[name])
                self.i = end + 2
            elif c == "\\":
                if self.i + 1 >= len(self.p):
                    raise Re2Error(f"trailing backslash in {self.p!r}")
                esc = self.p[self.i + 1]
                if esc in "pPz":
                    raise Re2Error(f"\\{esc} in a class in {self.p!r}")
                out.append(r"\t\n\f\r " if esc == "s" else "\\" + esc)  # (\S: Python's lacks \v)
                self.i += 2
            elif c in "[&~|" or (c == "-" and self.p.startswith("--", self.i)):
                out.append("\\" + c)  # Python would read these as (future) set operations
                self.i += 1
            else:
                out.append(c)
                self.i += 1
        raise Re2Error(f"unclosed class at {start} in {self.p!r}")


def _close(current: list[str], scoped: str | None, scoped_at: int | None) -> str:
    """One alternative: the pieces from ``scoped_at`` on wrapped in the flags set in the group."""
    if scoped is None or scoped_at is None:
        return "".join(current)
    head, rest = "".join(current[:scoped_at]), "".join(current[scoped_at:])
    return f"{head}(?{scoped}:{rest})" if rest else head


@dataclass(frozen=True, slots=True)
class Prefix:
    """A leading ``[class]{0,n}?`` dropped by ``speed_up``: what it would have added to a match."""

    chars: str  # a character class, e.g. ``[\\w.-]``
    bound: int

    def widen(self, text: str, start: int) -> int:
        """Where a match starting at ``start`` would have started with the prefix (leftmost, as RE2)."""
        cls = _class(self.chars)
        pos = start
        while pos > 0 and start - pos < self.bound and cls.fullmatch(text[pos - 1]):
            pos -= 1
        return pos


@cache
def _class(chars: str) -> re.Pattern[str]:
    return re.compile(chars, re.ASCII)


_LAZY_PREFIX = re.compile(r"(\(\?i\)|\(\?i:)?(\[[^\]]*\])\{0,(\d+)\}\?")
_BOUNDARY_LITERAL = re.compile(r"\\b((?:\((?:\?:)?)*)((?:[A-Za-z0-9_]|\\[.\-])+)")


def speed_up(pattern: str) -> tuple[str, Prefix | None]:
    """``pattern`` (Python syntax, from ``translate``) rewritten as the module docstring says, and the
    prefix it dropped (``None`` when it dropped none)."""
    prefix: Prefix | None = None
    m = _LAZY_PREFIX.match(pattern)
    if m is not None:
        prefix = Prefix(m.group(2), int(m.group(3)))
        pattern = (m.group(1) or "") + pattern[m.end() :]
        inner = _LAZY_PREFIX.match(pattern, len(m.group(1) or ""))
        if inner is not None and inner.group(1) == "(?i:":  # [\w.-]{0,50}?(?i:[\w.-]{0,50}?...
            pattern = pattern[: inner.start()] + "(?i:" + pattern[inner.end() :]
    b = _BOUNDARY_LITERAL.match(pattern)
    if b is not None:
        opens, literal = b.group(1), b.group(2)
        # Only when the literal is what follows the \b whatever the path: no group opened before it
        # has another alternative.
        groups = [i + 2 for i, ch in enumerate(opens) if ch == "("]
        if re.fullmatch(r"\w", literal[0], re.ASCII) and not any(_alternates(pattern, g) for g in groups):
            pattern = opens + literal + f"(?<!\\w{literal})" + pattern[b.end() :]
    return pattern, prefix


def _alternates(pattern: str, open_at: int) -> bool:
    """Whether the group opened at ``pattern[open_at]`` has a ``|`` of its own (not in a nested group)."""
    for _, c, depth in _structure(pattern, open_at):
        if c == ")" and depth == 0:
            return False
        if c == "|" and depth == 1:
            return True
    return False


def _structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """``(index, char, depth)`` of each ``(``, ``)`` and ``|`` of ``pattern`` from ``start`` that is not
    escaped nor in a character class; ``depth`` is counted from ``start`` (after a ``(``, before a ``)``
    is applied: a ``(`` at depth 0 opens depth 1)."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # skip the class: a leading ^ and a leading ] are part of it
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):
                i += 1
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            depth += 1
            yield i, c, depth
        elif c == ")":
            depth -= 1
            yield i, c, depth
        elif c == "|":
            yield i, c, depth
        i += 1


_OPTIONAL_HEAD = re.compile(r"\[(?:\\.|[^\]\\])*\](?:\*|\{0,\d+\})\??")


def for_search(pattern: str) -> str:
    """``pattern`` (Python syntax) for ``search`` alone (does it occur anywhere?): a leading optional
    run (``[a-z0-9-]*?``) of each top-level alternative changes nothing about that, and costs a scan
    per position; it is dropped. ``(?i)(?:a|b)`` counts as top level."""
    head = ""
    m = re.match(r"\(\?[aimsx]+\)", pattern)
    if m is not None:
        head, pattern = m.group(), pattern[m.end() :]
    if pattern.startswith("(?:") and _closing(pattern, 0) == len(pattern) - 1:
        return head + "(?:" + _strip_heads(pattern[3:-1]) + ")"
    return head + _strip_heads(pattern)


def _strip_heads(body: str) -> str:
    cuts = [i for i, c, depth in _structure(body) if c == "|" and depth == 0]
    parts = [body[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(body)], strict=True)]
    out = []
    for part in parts:
        m = _OPTIONAL_HEAD.match(part)
        out.append(part[m.end() :] if m is not None and m.end() < len(part) else part)
    return "|".join(out)


def _closing(pattern: str, open_at: int) -> int:
    """Where the group opened at ``open_at`` closes (-1 when it does not)."""
    return next((i for i, c, depth in _structure(pattern, open_at) if c == ")" and depth == 0), -1)
