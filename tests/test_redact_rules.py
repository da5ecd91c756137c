"""The redactor's rule set as data: gitleaks' RE2 patterns carried over to Python, the generated
``rules.json`` pinned to the vendored sources, the keyword prefilter, gitleaks' finding semantics
(secret group, entropy, allowlists) and the one-step update."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from agent_fleet._redact import REDACTED, Redactor
from agent_fleet._redact._re2 import Re2Error, speed_up, translate
from agent_fleet._redact._rules import Allowlist, Rule, RuleSet, default_rules, entropy
from agent_fleet._redact.update_rules import generate, main

HERE = Path(__file__).resolve().parents[1] / "src" / "agent_fleet" / "_redact"


# -- RE2 -> Python ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("re2", "python"),
    [
        # A flag group in the middle holds to the end of its group, for every alternative after it.
        (r"\b(SG\.(?i)[a-z]{3})", r"\b(SG\.(?i:[a-z]{3}))"),
        (r"(a(?i)b|c)d", r"(a(?i:b)|(?i:c))d"),
        (r"x(?i)y(?-i)z", r"x(?i:y)(?-i:z)"),
        (r"(?i)abc", r"(?i)abc"),  # a global flag at the very start stays global
        (r"a\zb", r"a\Zb"),
        (r"a\sb[\s,]", r"a[\t\n\f\r ]b[\t\n\f\r ,]"),  # RE2's \s has no vertical tab
        (r"[[:alnum:]_]", r"[0-9A-Za-z_]"),
        (r"[a-z~~|&[]", r"[a-z\~\~\|\&\[]"),  # what Python would read as set operations, escaped
        (r"(?<name>x)", r"(?P<name>x)"),
        (r"\x{263a}", r"\U0000263a"),
    ],
)
def test_translate(re2: str, python: str) -> None:
    assert translate(re2) == python


def test_a_mid_pattern_flag_means_what_it_means_in_re2() -> None:
    pattern = re.compile(translate(r"(a(?i)b|c)d"), re.ASCII)
    assert pattern.fullmatch("aBd") and pattern.fullmatch("Cd") and not pattern.fullmatch("ABd")


@pytest.mark.parametrize("bad", [r"\pL", r"[[:^alpha:]]", r"(?U)a*", "(a", "a)", "[ab"])
def test_what_cannot_be_carried_over_is_refused(bad: str) -> None:
    with pytest.raises(Re2Error):
        translate(bad)


def test_speed_up_drops_the_lazy_prefix_and_moves_a_leading_boundary() -> None:
    pattern, prefix = speed_up(r"(?i)[\w.-]{0,50}?(?:adafruit)=([a-z]{4})")
    assert pattern == r"(?i)(?:adafruit)=([a-z]{4})"
    assert prefix is not None and prefix.widen("my_adafruit=abcd", 3) == 0
    pattern, prefix = speed_up(r"\b(hvb\.[\w-]{5})")
    assert pattern == r"(hvb\.(?<!\whvb\.)[\w-]{5})" and prefix is None
    # Not when a group opened before the literal has another alternative (its \b would be lost).
    assert speed_up(r"\b((?:hvs\.x|s\.y))")[0] == r"\b((?:hvs\.x|s\.y))"
    for text in ("a hvb.12345", "ahvb.12345", "hvb.12345"):
        assert bool(re.search(r"\b(hvb\.[\w-]{5})", text)) == bool(
            re.search(speed_up(r"\b(hvb\.[\w-]{5})")[0], text)
        )


# -- the generated rules ---------------------------------------------------------------------------------


def test_the_rules_are_generated_from_the_vendored_sources() -> None:
    """rules.json is what the generator makes of the pinned gitleaks.toml and local.toml: no hand edit."""
    data = json.loads((HERE / "rules.json").read_text())
    pin = data["sources"]["gitleaks"]
    gitleaks = (HERE / "gitleaks.toml").read_text()
    assert hashlib.sha256(gitleaks.encode()).hexdigest() == pin["sha256"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", pin["version"])
    assert "MIT License" in (HERE / pin["licence"]).read_text()
    expected = generate(gitleaks, (HERE / "local.toml").read_text(), version=pin["version"])
    assert (HERE / "rules.json").read_text() == expected
    upstream = tomllib.loads(gitleaks)["rules"]
    ids = {r["id"] for r in data["rules"]}
    assert {r["id"] for r in upstream if "regex" in r} <= ids, "every gitleaks rule with a pattern is used"
    assert len(ids) >= 230


def test_every_rule_has_keywords_but_a_few_cheap_ones() -> None:
    rules = default_rules()
    assert [r.id for r in rules.rules if not r.keywords] == ["discord-bot-token"]
    assert all(k == k.lower() for r in rules.rules for k in r.keywords)


def test_ordinary_text_runs_no_rule_with_a_keyword() -> None:
    """The prefilter: most text is never scanned by most rules."""
    rules = default_rules()
    prose = "I changed the parser so that quoted strings keep their escapes, and ran the tests: 42 passed."
    log = "\n".join(
        f"2026-11-23T08:00:{i:02d}Z INFO worker-{i} processed item {i} in 0.{i}s" for i in range(40)
    )
    for text in (prose, log):
        assert [r.id for r in rules.to_run(text)] == ["discord-bot-token"]
    assert "github-pat" in [r.id for r in rules.to_run("the token is ghp_" + "x" * 36)]
    assert rules.to_run("short") == []  # shorter than any rule can match


def test_keywords_overlapping_each_other_are_all_found() -> None:
    rules = RuleSet(
        [
            Rule(id="ab", source="t", regex="abc", keywords=("ab",)),
            Rule(id="bcd", source="t", regex="bcd", keywords=("bcd",)),
            Rule(id="b", source="t", regex="b", keywords=("b",)),
        ]
    )
    assert [r.id for r in rules.to_run("xABCDx")] == ["ab", "bcd", "b"]


def test_the_secret_is_the_group_gitleaks_would_report() -> None:
    text = "key=abc123XYZ and more"
    first = Rule(id="r", source="t", regex=r"(key)=()([a-zA-Z0-9]+)")
    assert [text[s:e] for s, e in first.secrets(text)] == ["key"]  # the first non-empty group
    chosen = Rule(id="r", source="t", regex=r"(key)=([a-zA-Z0-9]+)", secret_group=2)
    assert [text[s:e] for s, e in chosen.secrets(text)] == ["abc123XYZ"]
    whole = Rule(id="r", source="t", regex=r"\nkey=[a-z0-9]+\n")
    lines = "x\nkey=abc\ny"
    assert [lines[s:e] for s, e in whole.secrets(lines)] == ["key=abc"]  # newlines trimmed


def test_entropy_and_allowlists() -> None:
    assert entropy("aaaa") == 0.0 and entropy("abcd") == 2.0
    rule = Rule(id="r", source="t", regex=r"tok=(\w+)", entropy=3.0)
    assert list(rule.secrets("tok=aaaaaaaaaaaa")) == []
    assert list(rule.secrets("tok=a1B2c3D4e5F6"))
    by_word = Allowlist(stopwords=("example",))
    by_line = Allowlist(target="line", regexes=(r"^#",))
    by_match = Allowlist(target="match", regexes=(r"^tok=x",))
    for allow, text in ((by_word, "tok=myEXAMPLE99"), (by_line, "# tok=zz9"), (by_match, "tok=xy9")):
        rule = Rule(id="r", source="t", regex=r"tok=(\w+)", allowlists=(allow,))
        assert list(rule.secrets(text)) == [], text
        assert list(rule.secrets("tok=other9")), text
    # An AND allowlist that also names paths never holds on a text (it has no path).
    both = Allowlist(all_of=True, regexes=(".",), unmatchable=True)
    assert list(Rule(id="r", source="t", regex=r"tok=(\w+)", allowlists=(both,)).secrets("tok=a"))
    # A lazy prefix dropped by the generator is put back for a match allowlist.
    rules = default_rules()
    generic = next(r for r in rules.rules if r.id == "generic-api-key")
    assert generic.prefix is not None
    glob = (rules.allowlists["gitleaks"],)
    assert list(generic.secrets("primary_key = 'Zq3xL9vT2mK8pR4w'", glob)) == []  # primary_key: allowed
    assert list(generic.secrets("client_key = 'Zq3xL9vT2mK8pR4w'", glob))


def test_gitleaks_global_allowlist_applies_to_gitleaks_rules_only() -> None:
    rules = default_rules()
    assert rules.allowlists["gitleaks"].regexes and rules.allowlists["agent-fleet"].regexes
    r = Redactor({})
    assert r.text("export API_TOKEN=${{ secrets.API_TOKEN }}") == "export API_TOKEN=${{ secrets.API_TOKEN }}"


def test_the_redactor_keeps_the_context_and_merges_overlapping_finds() -> None:
    r = Redactor({"MY_TOKEN": "ghp_" + "q1" * 18})
    text = "GH_TOKEN=ghp_" + "q1" * 18 + " done"
    assert r.text(text) == f"GH_TOKEN={REDACTED} done"  # env value, github-pat and secret-variable: one span


# -- the update, one step --------------------------------------------------------------------------------


def _copy_rules(tmp_path: Path) -> Path:
    here = tmp_path / "rules"
    here.mkdir()
    for name in ("gitleaks.toml", "gitleaks.LICENSE", "local.toml", "rules.json"):
        shutil.copy(HERE / name, here / name)
    return here


def test_updating_from_a_newer_gitleaks_file_regenerates_and_pins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = _copy_rules(tmp_path)
    newer = (HERE / "gitleaks.toml").read_text().replace('id = "zendesk-secret-key"', 'id = "zendesk-key-v2"')
    source = tmp_path / "gitleaks.toml"
    source.write_text(newer)
    assert main(["--version", "v9.0.0", "--from", str(source)], here=here) == 0
    data = json.loads((here / "rules.json").read_text())
    assert data["sources"]["gitleaks"]["version"] == "v9.0.0"
    assert data["sources"]["gitleaks"]["sha256"] == hashlib.sha256(newer.encode()).hexdigest()
    assert (here / "gitleaks.toml").read_text() == newer
    out = capsys.readouterr().out
    assert "added: zendesk-key-v2" in out and "removed: zendesk-secret-key" in out
    assert main(["--check"], here=here) == 0


def test_check_says_when_the_rules_are_stale(tmp_path: Path) -> None:
    here = _copy_rules(tmp_path)
    assert main(["--check"], here=here) == 0
    local = here / "local.toml"
    local.write_text(local.read_text().replace('keywords = ["mysql"]', 'keywords = ["mysql", "mariadb"]'))
    assert main(["--check"], here=here) == 1
    assert main([], here=here) == 0 and main(["--check"], here=here) == 0


def test_a_hand_edited_vendored_file_is_refused(tmp_path: Path) -> None:
    here = _copy_rules(tmp_path)
    (here / "gitleaks.toml").write_text((here / "gitleaks.toml").read_text() + "\n# edited\n")
    with pytest.raises(SystemExit):
        main([], here=here)


def test_a_local_rule_that_does_not_compile_is_refused() -> None:
    local = (HERE / "local.toml").read_text() + '\n[[rules]]\nid = "broken"\nregex = "(unclosed"\n'
    with pytest.raises(ValueError, match="broken"):
        generate((HERE / "gitleaks.toml").read_text(), local, version="v0.0.0")
