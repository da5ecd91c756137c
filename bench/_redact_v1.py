"""A copy of the hand-written redactor as it was before issue 29 (25 compiled patterns), kept for
``bench/redaction.py`` alone: the baseline the rule set from data is measured against. Not used by
agent-fleet; do not change it (it is what the numbers compare with).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

__all__ = ["REDACTED", "FragmentRedactor", "Redactor"]

REDACTED: Final = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_SECRET_FIELD = re.compile(
    r"^(authorization|api[_-]?key|.*(secret|token|password|passwd).*|.*_key)$", re.IGNORECASE
)
_MIN_ENV_SECRET = 6
# No rule matches fewer characters than this ("-pSECRET" needs "mysql" before it; "sk-" + 8...).
_MIN_LEN = 6

# Values after ``password:``/``password =`` that are code, not a password (``password: str``).
_CODE_WORDS = frozenset(
    {"str", "bytes", "int", "none", "null", "nil", "true", "false", "optional", "string", "any", "self"}
)


def _not_code(value: str, after: str) -> bool:
    """False when an unquoted ``password``/assignment value looks like code (a type, a call, a variable)."""
    if value.lower().rstrip(")]") in _CODE_WORDS or value.startswith(("$", "%", "{", "<", "*")):
        return False
    return not after.startswith(("(", ".", "["))


# Speed: a pattern that starts with a literal is searched by ``re`` at C speed (a leading ``\b`` or
# ``(?i)`` turns that off and costs ~30x), so every rule starts with its literal and checks the word
# boundary with a lookbehind after it. A case-insensitive rule runs only when one of its ``needles`` is
# in the lowered text. A short text (a streamed delta) is first checked against ``_SHORT_GATE``, one
# pattern holding every rule's literal, and returned at once when none is in it.


@dataclass(frozen=True, slots=True)
class _Rule:
    """A credential shape. ``keep``/``tail`` groups are kept; the rest of the match is replaced."""

    regex: re.Pattern[str]
    needles: tuple[str, ...] = ()  # lowercase; when given, the rule runs only if one is in the text
    check: Callable[[str, str], bool] | None = None  # (secret, the character after it) -> redact?

    def replace(self, m: re.Match[str]) -> str:
        groups = m.groupdict()
        keep, tail = groups.get("keep") or "", groups.get("tail") or ""
        if self.check is not None:
            end = m.end() - len(tail)
            if not self.check(m.string[m.start() + len(keep) : end], m.string[end : end + 1]):
                return m.group()
        return keep + REDACTED + tail

    def span(self, m: re.Match[str]) -> tuple[int, int] | None:
        """Where the secret of match ``m`` is (``None`` when the check says it is not one)."""
        groups = m.groupdict()
        start = m.start() + len(groups.get("keep") or "")
        end = m.end() - len(groups.get("tail") or "")
        if self.check is not None and not self.check(m.string[start:end], m.string[end : end + 1]):
            return None
        return start, end


def _r(pattern: str, *needles: str, check: Callable[[str, str], bool] | None = None) -> _Rule:
    return _Rule(re.compile(pattern), needles, check)


# A name's separator: quotes around it may come escaped (JSON inside a shell string, a command shown
# with \" ...).
_SEP: Final = r"[\\\"']{0,8}\s*[:=]\s*[\\\"']{0,8}"

_RULES: Final[tuple[_Rule, ...]] = (
    # PEM private key blocks, whole (to the end of the text when the END line was cut off).
    _r(
        r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----|\Z)"
    ),
    # Tokens recognised by their prefix.
    _r(r"sk-(?<!\wsk-)(?!learn\b)[A-Za-z0-9][\w\-]{7,}"),  # OpenAI, Anthropic (sk-ant-...)
    _r(r"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{20,255}\b"),  # GitHub
    _r(r"github_pat_(?<!\wgithub_pat_)\w{20,255}"),
    _r(r"glpat-(?<!\wglpat-)[\w\-]{20,}"),  # GitLab
    _r(r"A(?<!\wA)(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|IPA|NPA|NVA|PKA)[A-Z0-9]{16}\b"),  # AWS access key id
    _r(r"xox(?<!\wxox)[abposre]-[A-Za-z0-9\-]{10,}"),  # Slack
    _r(r"xapp-(?<!\wxapp-)\d-[A-Za-z0-9\-]{10,}"),
    _r(r"AIza(?<!\wAIza)[\w\-]{35}"),  # Google API key
    _r(r"sk_(?<!\wsk_)(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe
    _r(r"rk_(?<!\wrk_)(?:live|test)_[A-Za-z0-9]{16,}"),
    _r(r"hf_(?<!\whf_)[A-Za-z0-9]{30,}"),  # Hugging Face
    _r(r"npm_(?<!\wnpm_)[A-Za-z0-9]{36}\b"),  # npm
    _r(r"pypi-AgEIcHlwaS5vcmc[\w\-]{50,}"),  # PyPI
    _r(r"eyJ(?<!\weyJ)[\w\-]{8,}\.[\w\-]{8,}\.[\w\-]{8,}"),  # JWT
    # A password in a URL: scheme://user:PASSWORD@host.
    _r(r"(?P<keep>://[^\s/:@\"'<>]+:)[^\s/@\"'<>]+(?P<tail>@)"),
    # mysql -pSECRET (also mysqldump, mysqladmin); "-p" alone prompts and has nothing to hide.
    _r(r"(?P<keep>mysql(?<!\wmysql)(?:dump|admin|import|sh)?\b[^\n|;&]{0,200}?\s-p)[^\s\"']+"),
    # --password X, --password=X (and the token/secret flags); not --password-stdin, not a $VARIABLE.
    _r(
        r"(?P<keep>--(?i:password|passwd|db-password|api-key|token|secret|client-secret)(?:=|\s+))"
        r"(?![\-$])[^\s\"']+"
    ),
    # Headers: the scheme word (Basic, Bearer, token...) is kept, the credential goes.
    _r(r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=\-]{6,}", "bearer"),
    _r(
        r"(?i)(?P<keep>\b(?:proxy-)?authorization" + _SEP + r"(?:[A-Za-z]+ +)?)[^\s\\\"',;}]+",
        "authorization",
    ),
    _r(
        r"(?i)(?P<keep>\b(?:x-api-key|api-key|x-auth-token|x-goog-api-key)" + _SEP + r")"
        r"[^\s\\\"',;}]{4,}",
        "key",
        "token",
    ),
    # password: X / password = "X" (YAML, properties, code) unless the value is code.
    _r(
        r"(?i)(?P<keep>(?:passw(?:or)?d|\bpwd|passphrase)" + _SEP + r")[^\s\\\"',;(){}\[\]]{3,}",
        "pass",
        "pwd",
        check=_not_code,
    ),
    # AWS secret access keys, by name (any case, JSON or ini or env).
    _r(
        r"(?i)(?P<keep>(?:aws_?secret_?access_?key|secretaccesskey)" + _SEP + r")[A-Za-z0-9/+=]{40}",
        "secret",
    ),
    # NAME_KEY=value, NAME_TOKEN=value (environment-style names), with ``export`` or in a .env file.
    _r(
        r"(?<![a-z])(?P<keep>(?:_KEY|_TOKEN|_SECRET|_PASSWORD|_PASSWD|_PASS|_PWD|_CREDENTIALS?|_APIKEY|"
        r"TOKEN|SECRET|PASSWORD|APIKEY)\s*=\s*[\"']?)[^\s\"'`;&|]{4,}",
        "key",
        "token",
        "secret",
        "pass",
        "pwd",
        "credential",
        check=_not_code,
    ),
    # api_key = "literal", client_secret: 'literal' (quoted literals in code and config).
    _r(
        r"(?i)(?P<keep>(?:api_?key|secret_?key|access_?token|auth_?token|client_?secret|private_?key)"
        r"[\\\"']{0,8}\s*[:=]\s*\\{0,7}(?P<q>[\"']))[^\\\"'\s]{8,}(?=\\{0,7}(?P=q))",
        "key",
        "token",
        "secret",
    ),
)
# Every rule's literal, lowercased: a text without any of these has nothing to redact.
_SHORT_GATE: Final = re.compile(
    r"-----begin|sk[-_]|gh[pousr]_|github_pat_|glpat-|a(?:kia|sia|bia|cca|gpa|ida|roa|ipa|npa|nva|pka)"
    r"|xox|xapp-|aiza|rk_|hf_|npm_|pypi-|eyj|://|mysql|--|bearer|authorization|api-key|auth-token|pass|pwd"
    r"|secret|key|token|credential"
)
_SHORT = 256


class Redactor:
    """Replaces secrets in strings and JSON-like values. Built once from an environment snapshot."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, extra: tuple[str, ...] = ()) -> None:
        env = os.environ if environ is None else environ
        secrets = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET}
        secrets.update(s for s in extra if s)
        # Longest first, so a secret containing another is replaced whole.
        ordered = sorted(secrets, key=len, reverse=True)
        self._env = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._min = min([_MIN_LEN, *map(len, ordered)])

    def text(self, text: str) -> str:
        if len(text) < self._min:
            return text
        if self._env is not None:
            text = self._env.sub(REDACTED, text)
        low = text.lower()
        if len(text) < _SHORT and _SHORT_GATE.search(low) is None:
            return text
        seen: dict[str, bool] = {}  # rules share needles: look for each once
        for rule in _RULES:
            if rule.needles and not any(
                seen[n] if n in seen else seen.setdefault(n, n in low) for n in rule.needles
            ):
                continue
            text = rule.regex.sub(rule.replace, text)
        return text

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets in ``text`` are: sorted, non-overlapping ``(start, end)`` pairs."""
        found: list[tuple[int, int]] = []
        if self._env is not None:
            found += [m.span() for m in self._env.finditer(text)]
        low = text.lower()
        for rule in _RULES:
            if rule.needles and not any(n in low for n in rule.needles):
                continue
            found += [span for m in rule.regex.finditer(text) if (span := rule.span(m)) is not None]
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
    return cut
