"""The redactor's rule set: credential shapes as data (``rules.json``), found with a keyword prefilter.

Theory of operation
-------------------
``rules.json`` is generated (``python -m agent_fleet._redact.update_rules``) from two rule files in
gitleaks' format: ``gitleaks.toml``, gitleaks' published default rules vendored verbatim at a pinned
version, and ``local.toml``, this project's rules for what gitleaks does not look for (the context forms
of a command line: ``--password X``, ``mysql -pX``, a password in a URL, ``Bearer``/``Authorization``,
``NAME_KEY=value``; generous prefix rules for truncated tokens; shapes taken from detect-secrets' plugins
and vendors' documentation). The generator translates gitleaks' RE2 patterns to Python (``_re2``), so
loading the rules at run time is one ``json.loads``; nothing is fetched at run time.

Every rule has keywords (lowercase strings, one of which is in any text the rule can match). A text is
scanned ONCE for all keywords (Aho-Corasick over its lowercase form, ``ahocorasick_rs``), and only the
rules whose keyword appeared run; a rule's pattern is compiled the first time it is needed. Most text
runs no rule at all. A rule without keywords runs on every text (there are very few).

A match's secret is the rule's ``secret_group`` (or its first non-empty group, or the whole match),
as gitleaks has it. It is dropped when its Shannon entropy is not above the rule's ``entropy`` bound,
or when an allowlist says so: regular expressions over the secret, the whole match or its line
(``target``), and stopwords (substrings of the lowercase secret); ``and`` allowlists need all of their
checks. gitleaks' global allowlist applies to gitleaks' rules. What is found is reported as spans;
``Redactor`` merges them with its own and replaces them.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Final, Literal

import ahocorasick_rs

from agent_fleet._redact._re2 import Prefix

__all__ = ["RULES_FILE", "Allowlist", "Rule", "RuleSet", "default_rules", "entropy"]

RULES_FILE: Final = "rules.json"

Target = Literal["secret", "match", "line"]


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character (gitleaks' measure)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


@dataclass(slots=True, eq=False)
class Allowlist:
    """Findings this allowlist lets through (not secrets). See the module docstring."""

    target: Target = "secret"
    all_of: bool = False  # gitleaks' condition = "AND"
    regexes: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()  # lowercase
    #: it also names paths or commits, which a text does not have: an ``and`` allowlist then never holds
    unmatchable: bool = False
    _regex: re.Pattern[str] | None = field(default=None, repr=False)
    _stop: ahocorasick_rs.AhoCorasick | None = field(default=None, repr=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Allowlist:
        return cls(
            target=obj.get("target", "secret"),
            all_of=bool(obj.get("and", False)),
            regexes=tuple(obj.get("regexes", ())),
            stopwords=tuple(obj.get("stopwords", ())),
            unmatchable=bool(obj.get("unmatchable", False)),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target}
        if self.all_of:
            out["and"] = True
        if self.regexes:
            out["regexes"] = list(self.regexes)
        if self.stopwords:
            out["stopwords"] = list(self.stopwords)
        if self.unmatchable:
            out["unmatchable"] = True
        return out

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = secret if self.target == "secret" else match if self.target == "match" else line
        checks: list[bool] = []
        if self.regexes:
            if self._regex is None:  # one pattern for all (compiled when first needed)
                self._regex = re.compile("|".join(f"(?:{_scoped(r)})" for r in self.regexes), re.ASCII)
            checks.append(self._regex.search(target) is not None)
        if self.stopwords:
            if self._stop is None:  # gitleaks' generic rule has 1,446
                self._stop = ahocorasick_rs.AhoCorasick(list(self.stopwords))
            checks.append(bool(self._stop.find_matches_as_indexes(secret.lower())))
        if self.all_of:
            return not self.unmatchable and bool(checks) and all(checks)
        return any(checks)


def _scoped(pattern: str) -> str:
    """``pattern`` with a leading global flag group made local, so patterns can be joined."""
    m = re.match(r"\(\?([aimsx]+)\)", pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else pattern


@dataclass(slots=True, eq=False)
class Rule:
    """One credential shape (see the module docstring)."""

    id: str
    source: str  # "gitleaks" or "agent-fleet"
    regex: str  # Python syntax
    keywords: tuple[str, ...] = ()
    secret_group: int = 0
    entropy: float = 0.0
    allowlists: tuple[Allowlist, ...] = ()
    prefix: Prefix | None = None  # a leading [class]{0,n}? the generator dropped (``_re2.speed_up``)
    min_length: int = 0  # the shortest text the pattern can match
    _compiled: re.Pattern[str] | None = field(default=None, repr=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Rule:
        prefix = obj.get("prefix")
        return cls(
            id=obj["id"],
            source=obj["source"],
            regex=obj["regex"],
            keywords=tuple(obj.get("keywords", ())),
            secret_group=int(obj.get("secret_group", 0)),
            entropy=float(obj.get("entropy", 0.0)),
            allowlists=tuple(Allowlist.from_json(a) for a in obj.get("allowlists", ())),
            prefix=Prefix(prefix[0], int(prefix[1])) if prefix else None,
            min_length=int(obj.get("min_length", 0)),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "source": self.source, "regex": self.regex}
        if self.keywords:
            out["keywords"] = list(self.keywords)
        if self.secret_group:
            out["secret_group"] = self.secret_group
        if self.entropy:
            out["entropy"] = self.entropy
        if self.allowlists:
            out["allowlists"] = [a.to_json() for a in self.allowlists]
        if self.prefix is not None:
            out["prefix"] = [self.prefix.chars, self.prefix.bound]
        if self.min_length:
            out["min_length"] = self.min_length
        return out

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.regex, re.ASCII)
        return self._compiled

    def secrets(self, text: str, allow: Sequence[Allowlist] = ()) -> Iterator[tuple[int, int]]:
        """The spans of this rule's secrets in ``text``; ``allow``: allowlists beside the rule's own."""
        for m in self.compiled.finditer(text):
            start, end = self._secret(m)
            if start >= end:
                continue
            secret = text[start:end]
            if self.entropy and entropy(secret) <= self.entropy:
                continue
            checks = (*allow, *self.allowlists)
            if checks:
                mstart = m.start() if self.prefix is None else self.prefix.widen(text, m.start())
                match = text[mstart : m.end()].strip("\n")
                line = text[text.rfind("\n", 0, m.start()) + 1 : _line_end(text, m.end())]
                if any(a.allows(secret, match, line) for a in checks):
                    continue
            yield start, end

    def _secret(self, m: re.Match[str]) -> tuple[int, int]:
        if self.secret_group:
            return m.span(self.secret_group)
        for g in range(1, (m.re.groups or 0) + 1):
            start, end = m.span(g)
            if end > start:
                return start, end
        start, end = m.span()
        text = m.string
        while start < end and text[start] == "\n":
            start += 1
        while end > start and text[end - 1] == "\n":
            end -= 1
        return start, end


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


class RuleSet:
    """Rules with their keyword index (see the module docstring)."""

    def __init__(self, rules: Sequence[Rule], *, allowlists: Mapping[str, Allowlist] | None = None) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        #: each source's global allowlist (gitleaks' for gitleaks' rules, ours for ours), by source
        self.allowlists: dict[str, Allowlist] = dict(allowlists or {})
        keywords = sorted({k for r in self.rules for k in r.keywords})
        index = {k: n for n, k in enumerate(keywords)}
        self._by_keyword: list[list[int]] = [[] for _ in keywords]
        for n, rule in enumerate(self.rules):
            for k in rule.keywords:
                self._by_keyword[index[k]].append(n)
        self._always = [n for n, r in enumerate(self.rules) if not r.keywords]
        self._keywords = keywords
        self._scanner: ahocorasick_rs.AhoCorasick | None = None  # built on first use (a few ms)
        #: no rule matches a text shorter than this
        self.min_length = min((r.min_length for r in self.rules), default=0)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RuleSet:
        return cls(
            [Rule.from_json(r) for r in data["rules"]],
            allowlists={k: Allowlist.from_json(v) for k, v in data.get("allowlists", {}).items()},
        )

    def to_run(self, text: str) -> list[Rule]:
        """The rules whose keyword is in ``text`` (and those without keywords), in rule order."""
        if len(text) < self.min_length:
            return []
        chosen = set(self._always)
        if self._keywords:
            if self._scanner is None:
                # A DFA: the fastest scan (a 4 KiB text in a few microseconds), built once per process.
                self._scanner = ahocorasick_rs.AhoCorasick(
                    self._keywords, implementation=ahocorasick_rs.Implementation.DFA
                )
            hits = {k for k, _, _ in self._scanner.find_matches_as_indexes(text.lower(), overlapping=True)}
            for k in hits:
                chosen.update(self._by_keyword[k])
        return [r for n in sorted(chosen) if len(text) >= (r := self.rules[n]).min_length]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Spans of the secrets in ``text`` (unsorted, may overlap)."""
        found: list[tuple[int, int]] = []
        for rule in self.to_run(text):
            glob = self.allowlists.get(rule.source)
            found += rule.secrets(text, (glob,) if glob is not None else ())
        return found


@cache
def default_rules() -> RuleSet:
    """The packaged rule set (``rules.json``), loaded once per process."""
    data = json.loads(resources.files("agent_fleet._redact").joinpath(RULES_FILE).read_text("utf-8"))
    return RuleSet.from_json(data)
