"""Secret redaction for everything the project writes or prints of agent content.

``Redactor.text`` replaces, in one string:

- values of the runner's environment variables whose name contains ``KEY``, ``TOKEN``, ``SECRET``,
  ``PASSWORD`` or ``PASSWD`` (case-insensitive; values shorter than 6 characters are left alone: they
  are not secrets and would redact ordinary words);
- credential shapes, from a rule set kept as data (``_rules``): gitleaks' published rules (about 220
  provider token formats, private keys, keyword assignments), vendored at a pinned version, and this
  project's rules beside them (``local.toml``: the context forms of a command line such as
  ``--password X``, ``mysql -pX``, passwords in URLs, ``Bearer``/``Authorization`` headers,
  ``NAME_KEY=value``; generous prefix rules for truncated tokens; private keys cut at either end; a few
  shapes from detect-secrets' plugins). The context (header name, flag, variable name) is kept; only
  the secret goes.

``Redactor.value`` walks JSON-like values and also replaces the whole value of a mapping key named like
a secret (``api_key``, ``authorization``, ``*token*``...).

Speed: each rule has keywords, and a text is scanned once for all of them (Aho-Corasick); only the rules
whose keyword is in the text run, so ordinary text (most of a transcript) runs none. Strings too short
to hold a secret are returned at once (the streamed-delta case). ``bench/redaction.py`` measures the cost
per KB beside the previous hand-written redactor and detect-secrets. Updating the rules is one step:
``python -m agent_fleet._redact.update_rules --version vX.Y.Z`` (docs/redaction.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Mapping
from typing import Any, Final, Generic, TypeVar

from agent_fleet._redact._rules import RuleSet, default_rules

__all__ = ["REDACTED", "FragmentRedactor", "Redactor"]

REDACTED: Final = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_SECRET_FIELD = re.compile(
    r"^(authorization|api[_-]?key|.*(secret|token|password|passwd).*|.*_key)$", re.IGNORECASE
)
_MIN_ENV_SECRET = 6
# No rule matches fewer characters than this ("-pSECRET" needs "mysql" before it; "sk-" + 8...).
_MIN_LEN = 6


class Redactor:
    """Replaces secrets in strings and JSON-like values. Built once from an environment snapshot."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        extra: tuple[str, ...] = (),
        rules: RuleSet | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        secrets = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET}
        secrets.update(s for s in extra if s)
        # Longest first, so a secret containing another is replaced whole.
        ordered = sorted(secrets, key=len, reverse=True)
        self._env = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._min = min([_MIN_LEN, *map(len, ordered)])
        self.rules = rules if rules is not None else default_rules()

    def text(self, text: str) -> str:
        if len(text) < self._min:
            return text
        spans = self.spans(text)
        if not spans:
            return text
        pieces, pos = [], 0
        for start, end in spans:
            pieces += [text[pos:start], REDACTED]
            pos = end
        pieces.append(text[pos:])
        return "".join(pieces)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets in ``text`` are: sorted, non-overlapping ``(start, end)`` pairs."""
        if len(text) < self._min:
            return []
        found: list[tuple[int, int]] = []
        if self._env is not None:
            found += [m.span() for m in self._env.finditer(text)]
        found += self.rules.spans(text)
        if not found:
            return found
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def value(self, value: Any) -> Any:
        """``value`` with every string redacted; mapping values under secret-like keys replaced whole."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if isinstance(k, str) and _SECRET_FIELD.match(k) and isinstance(v, str) and v:
                    out[k] = REDACTED
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


_CONTEXT: Final = 256  # released text kept to give the next release its context ("Bearer ", "-p")
_RELEASE_AT: Final = 512  # held text without a newline is released at whitespace past this size
_HOLD_MAX: Final = 64 * 1024  # ... and whole past this one (a very long line without whitespace)
_PEM_BEGIN: Final = "-----BEGIN"
_BASE64_LINE: Final = re.compile(r"[ +-]{0,3}[A-Za-z0-9+/=]{16,}\r?")  # (a diff's line too)
_BASE64_TAIL: Final = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/=]{16,}\r?$")


K = TypeVar("K", bound=Hashable)


class FragmentRedactor(Generic[K]):
    """Redacts text that arrives in fragments (streamed deltas), where a secret or its context may be
    split over several fragments: ``feed`` holds text back and releases it (redacted) a line at a time,
    a private key block whole; ``flush`` releases the rest when the stream ends. Streams are told apart
    by a key. The released text of a stream joined equals ``Redactor.text`` of its whole text, up to a
    secret whose context was released before the secret began (the context kept covers 256 chars)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._held: dict[K, str] = {}
        self._context: dict[K, str] = {}

    def streams(self) -> list[K]:
        """Streams with held text."""
        return list(self._held)

    def feed(self, key: K, text: str) -> str:
        held = self._held.get(key, "") + text
        cut = _cut(held)
        self._held[key] = held[cut:]
        return self._release(key, held[:cut]) if cut else ""

    def flush(self, key: K) -> str:
        """Release what ``key`` holds; its context is kept (``forget`` drops it)."""
        held = self._held.pop(key, "")
        return self._release(key, held) if held else ""

    def forget(self, key: K) -> None:
        self._held.pop(key, None)
        self._context.pop(key, None)

    def _release(self, key: K, raw: str) -> str:
        context = self._context.get(key, "")
        full, base = context + raw, len(context)
        self._context[key] = full[-_CONTEXT:]
        pieces, pos = [], base
        for start, end in self.redactor.spans(full):
            if end <= pos:
                continue
            pieces += [full[pos : max(start, pos)], REDACTED]
            pos = end
        pieces.append(full[pos:])
        return "".join(pieces)


def _cut(held: str) -> int:
    """How much of ``held`` can be released: up to the last newline (not into an open key block)."""
    begin = held.rfind(_PEM_BEGIN)
    if begin >= 0 and "-----END" not in held[begin + len(_PEM_BEGIN) :]:
        if len(held) - begin < _HOLD_MAX:
            return held.rfind("\n", 0, begin) + 1
        return len(held)
    cut = held.rfind("\n") + 1
    if cut == 0 and len(held) >= _RELEASE_AT:
        space = max(held.rfind(" "), held.rfind("\t"))
        cut = space + 1 if space >= 0 else (len(held) if len(held) >= _HOLD_MAX else 0)
    elif cut and len(held) < _HOLD_MAX:
        cut = _base64_run(held, cut)
    return cut


def _base64_run(held: str, cut: int) -> int:
    """``cut`` moved back over the base64 lines just before it: they may be a private key's body whose
    BEGIN line was cut off, known as one only when its END line comes, so they are held until a line of
    another kind arrives."""
    start = cut
    while start > 0:
        prev = held.rfind("\n", 0, start - 1) + 1
        if not _BASE64_LINE.fullmatch(held, prev, start - 1):
            if _BASE64_TAIL.search(held, prev, start - 1):  # the body's first line, cut mid-line
                start = prev
            break
        start = prev
    return start
