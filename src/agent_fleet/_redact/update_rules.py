"""Regenerate the redactor's rules (``rules.json``), optionally from a newer gitleaks release.

    python -m agent_fleet._redact.update_rules                    # after editing local.toml
    python -m agent_fleet._redact.update_rules --version v8.31.0  # fetch that gitleaks release's rules
    python -m agent_fleet._redact.update_rules --version v8.31.0 --from path/to/gitleaks.toml
    python -m agent_fleet._redact.update_rules --check            # exit 1 when rules.json is stale

With ``--version``, gitleaks' ``config/gitleaks.toml`` and ``LICENSE`` at that tag are downloaded from
GitHub (or the rules read from ``--from``, a checkout's file) and vendored beside this module verbatim;
then ``rules.json`` is generated from them and ``local.toml``: each gitleaks pattern translated from RE2
to Python (``_re2``), checked to compile, and pinned by version and SHA-256. A rule that cannot be
translated stops the update with its id (add it to ``[disabled]`` in local.toml with the reason, or
teach ``_re2``). The summary printed says which rules came and went. Then run ``tests/test_redact.py``:
its corpus must still pass. Nothing here runs when agent-fleet runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from agent_fleet._redact._re2 import Re2Error, for_search, speed_up, translate
from agent_fleet._redact._rules import RULES_FILE, Allowlist, Rule

__all__ = ["escaped_quotes_end", "generate", "main"]

HERE: Final = Path(__file__).resolve().parent
GITLEAKS_FILE: Final = "gitleaks.toml"
LICENCE_FILE: Final = "gitleaks.LICENSE"
LOCAL_FILE: Final = "local.toml"
_RAW: Final = "https://raw.githubusercontent.com/gitleaks/gitleaks/{version}/{path}"


def generate(gitleaks_text: str, local_text: str, *, version: str) -> str:
    """``rules.json``'s text from gitleaks' rules file and ours (see the module docstring).

    Raises ``Re2Error`` naming a gitleaks rule whose pattern cannot be carried over, and ``ValueError``
    for a local rule that does not compile or lacks what a rule needs."""
    upstream = tomllib.loads(gitleaks_text)
    local = tomllib.loads(local_text)
    disabled: Mapping[str, str] = local.get("disabled", {})
    rules: list[dict[str, Any]] = []
    path_only: list[str] = []
    for obj in upstream["rules"]:
        if obj["id"] in disabled:
            continue
        if "regex" not in obj:  # a rule on file names only: a text has none
            path_only.append(obj["id"])
            continue
        # A rule for files of one kind (``path``) runs on every text: a transcript does not say which
        # file a line came from, and a secret of that shape is a secret wherever it is printed.
        try:
            regex, prefix = speed_up(translate(escaped_quotes_end(obj["regex"])))
            allowlists = [_allowlist(a, translated=True) for a in obj.get("allowlists", ())]
        except Re2Error as exc:
            raise Re2Error(f"gitleaks rule {obj['id']!r}: {exc}") from exc
        rule = Rule(
            id=obj["id"],
            source="gitleaks",
            regex=regex,
            keywords=tuple(k.lower() for k in obj.get("keywords", ())),
            secret_group=int(obj.get("secretGroup", 0)),
            entropy=float(obj.get("entropy", 0.0)),
            allowlists=tuple(allowlists),
            prefix=prefix,
        )
        rules.append(_measured(rule).to_json())
    for obj in local["rules"]:
        rule = Rule(
            id=obj["id"],
            source="agent-fleet",
            regex=obj["regex"],
            keywords=tuple(obj.get("keywords", ())),
            secret_group=int(obj.get("secretGroup", 0)),
            entropy=float(obj.get("entropy", 0.0)),
            allowlists=tuple(_allowlist(a, translated=False) for a in obj.get("allowlists", ())),
        )
        if any(k != k.lower() for k in rule.keywords):
            raise ValueError(f"local rule {rule.id!r}: keywords are lowercase")
        rules.append(_measured(rule).to_json())
    ids = [r["id"] for r in rules]
    if len(ids) != len(set(ids)):
        raise ValueError(f"a rule id is used twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    data = {
        "generated_by": "python -m agent_fleet._redact.update_rules",
        "sources": {
            "gitleaks": {
                "version": version,
                "file": GITLEAKS_FILE,
                "sha256": hashlib.sha256(gitleaks_text.encode()).hexdigest(),
                "licence": LICENCE_FILE,
                "disabled": dict(disabled),
                "path_only_not_used": path_only,
            },
            "agent-fleet": {"file": LOCAL_FILE},
        },
        "allowlists": {
            "gitleaks": _allowlist(upstream.get("allowlist", {}), translated=True).to_json(),
            "agent-fleet": _allowlist(local.get("allowlist", {}), translated=False).to_json(),
        },
        "rules": rules,
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


#: gitleaks' end of a token: a quote, a backquote, a space, ``;``, an escaped newline or the end.
_TOKEN_END: Final = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
#: ... and, in a transcript, an escaped quote or backslash too: a command line shown inside a quoted
#: string (``bash -lc "... KEY=\"HRKU-AA...\" ..."``) escapes the quotes around a token.
_TOKEN_END_ESCAPED: Final = r"""(?:[\x60'"\s;]|\\[nr"'\x60\\]|$)"""


def escaped_quotes_end(pattern: str) -> str:
    """``pattern`` (a gitleaks rule) with its token end (``_TOKEN_END``) also ending at an escaped quote."""
    return pattern.replace(_TOKEN_END, _TOKEN_END_ESCAPED)


def _allowlist(obj: Mapping[str, Any], *, translated: bool) -> Allowlist:
    # Allowlists are searched (does it occur?): for_search drops what costs without deciding that.
    regexes = [for_search(translate(r) if translated else r) for r in obj.get("regexes", ())]
    return Allowlist(
        target=obj.get("regexTarget", "secret"),
        all_of=obj.get("condition", "OR").upper() == "AND",
        regexes=tuple(regexes),
        stopwords=tuple(w.lower() for w in obj.get("stopwords", ())),
        unmatchable=bool(obj.get("paths") or obj.get("commits")),
    )


def _measured(rule: Rule) -> Rule:
    """``rule`` checked (it compiles; its secret group exists) and with its ``min_length``."""
    _check(rule)
    rule.min_length = _min_width(rule.regex)
    return rule


def _min_width(pattern: str) -> int:
    """The fewest characters ``pattern`` can match (``re``'s own parser measures it)."""
    import re._parser as sre_parse  # type: ignore[import-not-found]  # (no stubs; the generator only)

    low, _ = sre_parse.parse(pattern, re.ASCII).getwidth()
    return int(low)


def _check(rule: Rule) -> None:
    try:
        compiled = rule.compiled
        for a in rule.allowlists:
            for r in a.regexes:
                Rule(id=rule.id, source=rule.source, regex=r).compiled  # noqa: B018 (compiles it)
    except Exception as exc:
        raise ValueError(f"rule {rule.id!r} does not compile: {exc}") from exc
    if rule.secret_group > compiled.groups:
        raise ValueError(f"rule {rule.id!r}: secretGroup {rule.secret_group} > its {compiled.groups} groups")


def _download(version: str, path: str) -> str:
    url = _RAW.format(version=version, path=path)
    with urllib.request.urlopen(url, timeout=60) as response:
        text: str = response.read().decode("utf-8")
    return text


def main(argv: list[str] | None = None, *, here: Path = HERE) -> int:
    """The command line (see the module docstring); ``here``: the directory of the rule files."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--version", help="a gitleaks release tag (v8.30.1): vendor its rules first")
    ap.add_argument("--from", dest="source", type=Path, help="gitleaks.toml to vendor (with --version)")
    ap.add_argument("--check", action="store_true", help="exit 1 when rules.json is not up to date")
    args = ap.parse_args(argv)
    current = json.loads((here / RULES_FILE).read_text("utf-8"))
    pin = current["sources"]["gitleaks"]
    if args.version:
        text = (
            args.source.read_text("utf-8") if args.source else _download(args.version, "config/gitleaks.toml")
        )
        licence = None if args.source else _download(args.version, "LICENSE")
        version = args.version
    else:
        if args.source:
            ap.error("--from needs --version (the release the file comes from)")
        text, licence, version = (here / GITLEAKS_FILE).read_text("utf-8"), None, pin["version"]
        if hashlib.sha256(text.encode()).hexdigest() != pin["sha256"]:
            ap.error(f"{GITLEAKS_FILE} is not the pinned {version}: vendor a release with --version")
    out = generate(text, (here / LOCAL_FILE).read_text("utf-8"), version=version)
    if args.check:
        stale = out != (here / RULES_FILE).read_text("utf-8")
        print(
            f"{RULES_FILE} is stale: run python -m agent_fleet._redact.update_rules"
            if stale
            else "up to date"
        )
        return 1 if stale else 0
    before = {r["id"] for r in current["rules"]}
    after = {r["id"] for r in json.loads(out)["rules"]}
    (here / GITLEAKS_FILE).write_text(text, "utf-8")
    if licence is not None:
        (here / LICENCE_FILE).write_text(licence, "utf-8")
    (here / RULES_FILE).write_text(out, "utf-8")
    print(f"{RULES_FILE}: gitleaks {version}, {len(after)} rules")
    for label, ids in (("added", after - before), ("removed", before - after)):
        if ids:
            print(f"  {label}: {', '.join(sorted(ids))}")
    print("now run: python -m pytest tests/test_redact.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
