"""Rule packs: the approval policy's domain knowledge as data, one TOML file per domain.

A pack names its ``domain`` and lists ``[[rules]]``; a rule fires on a simple command when *every*
condition it states holds (see docs/rule-packs.md for the format and examples)::

    domain = "infrastructure"
    [value_options]                       # options that take a value, so positionals are found
    kubectl = ["-n", "--namespace", "--context"]
    [[rules]]
    name = "kubectl-delete"
    programs = ["kubectl", "oc"]          # fnmatch patterns on the normalised program name
    subcommand = ["delete"]               # positionals, in order ("a|b" alternatives, fnmatch)
    reason = "kubectl delete removes live cluster resources"

Conditions: ``programs``, ``subcommand`` (+ ``depth``: the last step must be among the first ``depth``
positionals, default ``len(subcommand) + 2``), ``flags_any``/``flags_all``/``flags_none``,
``args_any``/``args_none`` (regular expressions searched in each argument), ``mass`` (an operand comes
from ``$(...)`` or ``xargs``), ``check`` (a built-in judge, ``agent_fleet.policy.packs._judges.JUDGES``).

The built-in packs (``policy/packs/*.toml``) are always loaded; ``PermissionConfig.rule_packs`` adds
files of the user's own, which can add rules but never remove or shadow a built-in one (a rule id
``domain/name`` already taken is a ``UsageError``). Every decline names ``domain/name`` as its rule.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from agent_fleet.errors import UsageError
from agent_fleet.policy._hosts import HostList
from agent_fleet.policy.bash._shell import ParsedScript, SimpleCommand, UnparsableCommand, parse_script
from agent_fleet.policy.packs._argv import (
    JudgeContext,
    assignments,
    cd_targets,
    effective_argv,
    split_args,
    written_files,
)
from agent_fleet.policy.packs._judges import JUDGES, SCRIPT_JUDGES
from agent_fleet.policy.packs._nested import nested_commands

__all__ = [
    "PACK_RULES",
    "Pack",
    "PackRule",
    "PackSet",
    "PackViolation",
    "builtin_packs",
    "load_pack",
    "pack_set",
]

_MAX_NESTING = 3
INTERNAL_ERROR = "packs/internal-error"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_RULE_KEYS = frozenset(
    {"name", "reason", "programs", "subcommand", "depth", "flags_any", "flags_all", "flags_none"}
    | {"args_any", "args_none", "mass", "check"}
)
_PACK_KEYS = frozenset({"domain", "description", "value_options", "rules"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PackViolation:
    rule: str
    domain: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PackRule:
    id: str
    domain: str
    reason: str
    programs: tuple[str, ...] = ()
    subcommand: tuple[tuple[str, ...], ...] = ()
    depth: int = 0
    flags_any: frozenset[str] = frozenset()
    flags_all: frozenset[str] = frozenset()
    flags_none: frozenset[str] = frozenset()
    args_any: tuple[re.Pattern[str], ...] = ()
    args_none: tuple[re.Pattern[str], ...] = ()
    mass: bool = False
    check: str | None = None

    def program_matches(self, program: str) -> bool:
        return not self.programs or any(fnmatch.fnmatchcase(program, p) for p in self.programs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pack:
    domain: str
    description: str
    source: str
    value_options: Mapping[str, tuple[str, ...]]
    rules: tuple[PackRule, ...]


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where}: expected a string or a list of strings")
    return tuple(value)


def _regexes(value: Any, where: str) -> tuple[re.Pattern[str], ...]:
    compiled: list[re.Pattern[str]] = []
    for pattern in _strings(value, where):
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise UsageError(f"{where}: invalid regular expression {pattern!r}: {exc}") from exc
    return tuple(compiled)


def _rule(raw: Any, domain: str, where: str) -> PackRule:
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: a rule must be a table")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    name, reason = raw.get("name"), raw.get("reason")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UsageError(f"{where}: 'name' must be lowercase letters, digits and dashes, not {name!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise UsageError(f"{where} ({name}): 'reason' is required")
    where = f"{where} ({name})"
    check = raw.get("check")
    if check is not None and check not in JUDGES:
        raise UsageError(f"{where}: unknown check {check!r} (known: {', '.join(sorted(JUDGES))})")
    programs = _strings(raw.get("programs", []), f"{where}.programs")
    steps = tuple(
        tuple(step.split("|")) for step in _strings(raw.get("subcommand", []), f"{where}.subcommand")
    )
    depth = raw.get("depth", len(steps) + 2)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < len(steps):
        raise UsageError(f"{where}: 'depth' must be an integer of at least the subcommand's length")
    mass = raw.get("mass", False)
    if not isinstance(mass, bool):
        raise UsageError(f"{where}: 'mass' must be true or false")
    conditions = [programs, steps, raw.get("flags_any"), raw.get("flags_all"), raw.get("args_any"), check]
    if not any(conditions) and not mass:
        raise UsageError(f"{where}: a rule needs at least one condition")
    return PackRule(
        id=f"{domain}/{name}",
        domain=domain,
        reason=reason.strip(),
        programs=programs,
        subcommand=steps,
        depth=depth,
        flags_any=frozenset(_strings(raw.get("flags_any", []), f"{where}.flags_any")),
        flags_all=frozenset(_strings(raw.get("flags_all", []), f"{where}.flags_all")),
        flags_none=frozenset(_strings(raw.get("flags_none", []), f"{where}.flags_none")),
        args_any=_regexes(raw.get("args_any", []), f"{where}.args_any"),
        args_none=_regexes(raw.get("args_none", []), f"{where}.args_none"),
        mass=mass,
        check=check,
    )


def parse_pack(data: Mapping[str, Any], source: str) -> Pack:
    unknown = set(data) - _PACK_KEYS
    if unknown:
        raise UsageError(f"rule pack {source}: unknown keys {', '.join(sorted(unknown))}")
    domain = data.get("domain")
    if not isinstance(domain, str) or not _NAME.fullmatch(domain):
        raise UsageError(f"rule pack {source}: 'domain' must be lowercase letters, digits and dashes")
    options = data.get("value_options", {})
    if not isinstance(options, dict):
        raise UsageError(f"rule pack {source}: 'value_options' must be a table")
    value_options = {
        str(program): _strings(names, f"rule pack {source}: value_options.{program}")
        for program, names in options.items()
    }
    rules_raw = data.get("rules", [])
    if not isinstance(rules_raw, list) or not rules_raw:
        raise UsageError(f"rule pack {source}: needs at least one [[rules]] entry")
    rules = tuple(_rule(raw, domain, f"rule pack {source}: rules[{i}]") for i, raw in enumerate(rules_raw))
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise UsageError(f"rule pack {source}: duplicate rule names")
    description = data.get("description", "")
    return Pack(
        domain=domain,
        description=str(description),
        source=source,
        value_options=value_options,
        rules=rules,
    )


def load_pack(path: str) -> Pack:
    """Read and validate one pack file; any problem is a ``UsageError`` naming the file."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"rule pack {path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"rule pack {path}: not valid TOML: {exc}") from exc
    return parse_pack(data, path)


@functools.cache
def builtin_packs() -> tuple[Pack, ...]:
    """The packs shipped in ``agent_fleet/policy/packs``, in file-name order."""
    folder = resources.files("agent_fleet.policy").joinpath("packs")
    packs: list[Pack] = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".toml"):
            packs.append(
                parse_pack(tomllib.loads(entry.read_text(encoding="utf-8")), f"built-in {entry.name}")
            )
    return tuple(packs)


def _subcommand(rule: PackRule, positionals: Sequence[str]) -> bool:
    index = 0
    for step in rule.subcommand:
        while index < len(positionals) and not any(fnmatch.fnmatchcase(positionals[index], p) for p in step):
            index += 1
        if index >= min(len(positionals), rule.depth):
            return False
        index += 1
    return True


def _is_mass(cmd: SimpleCommand, operands: Sequence[str]) -> bool:
    return "xargs" in cmd.wrappers or any("$(" in word or "`" in word for word in operands)


class PackSet:
    """Packs merged into one matcher: rules grouped by the programs they name, judged in load order
    (built-in packs by file name, then the user's in the order given). Safe to share between threads:
    the only mutation is a memo of rules per program name."""

    __slots__ = ("_any", "_by_program", "_cache", "_hosts", "_order", "_packs", "_value_options")

    def __init__(self, packs: Sequence[Pack], hosts: HostList | None = None) -> None:
        self._hosts = hosts if hosts is not None else HostList()
        seen: dict[str, str] = {}
        for pack in packs:
            for rule in pack.rules:
                if rule.id in seen:
                    raise UsageError(
                        f"rule pack {pack.source}: rule {rule.id!r} is already defined by {seen[rule.id]}; "
                        "packs can add rules, never replace one"
                    )
                seen[rule.id] = pack.source
        self._packs = tuple(packs)
        options: dict[str, set[str]] = {}
        for pack in packs:
            for program, names in pack.value_options.items():
                options.setdefault(program, set()).update(names)
        self._value_options = {program: frozenset(names) for program, names in options.items()}
        rules = [rule for pack in packs for rule in pack.rules]
        self._order = {rule.id: index for index, rule in enumerate(rules)}
        self._cache: dict[str, tuple[PackRule, ...]] = {}
        # One pass: each rule under the program names it spells out; rules with a pattern (`acme-*`) or
        # no program are tried on each new program name by `_rules_for` (and memoised there).
        by_program: dict[str, list[PackRule]] = {}
        for rule in rules:
            for name in dict.fromkeys(p for p in rule.programs if not any(c in p for c in "*?[")):
                by_program.setdefault(name, []).append(rule)
        self._by_program: dict[str, tuple[PackRule, ...]] = {k: tuple(v) for k, v in by_program.items()}
        self._any = tuple(
            rule for rule in rules if not rule.programs or any(c in "".join(rule.programs) for c in "*?[")
        )

    @property
    def packs(self) -> tuple[Pack, ...]:
        return self._packs

    def _rules_for(self, program: str) -> tuple[PackRule, ...]:
        """The rules naming ``program`` (literally or by pattern), in load order; memoised."""
        cached = self._cache.get(program)
        if cached is not None:
            return cached
        exact = self._by_program.get(program, ())
        ids = {rule.id for rule in exact}
        fuzzy = [rule for rule in self._any if rule.id not in ids and rule.program_matches(program)]
        found = tuple(sorted((*exact, *fuzzy), key=lambda rule: self._order[rule.id]))
        if len(self._cache) < 4096:  # program names are few; dynamic ones ($X) are not cached forever
            self._cache[program] = found
        return found

    def check_script(
        self,
        script: ParsedScript,
        text: str,
        cwd: str | None,
        roots: Sequence[str],
        home: str,
        builtin: Callable[[ParsedScript], tuple[str, str] | None] | None = None,
    ) -> PackViolation | None:
        """Judge a parsed script run in ``cwd`` (absolute or ``None``) with writable ``roots``;
        ``builtin`` (the engine's built-in rules) is also applied to commands run elsewhere. Never
        raises: a failure inside the packs declines with rule ``packs/internal-error`` (fail closed)."""
        try:
            return self._check_script(script, text, cwd, roots, home, builtin)
        except RecursionError:
            reason = "the command nests too deeply for the rule packs to judge"
        except Exception as exc:  # a bug must not let a command through
            reason = f"the rule packs failed on this command ({type(exc).__name__})"
        return PackViolation(rule=INTERNAL_ERROR, domain="packs", reason=f"packs: {reason}")

    def _check_script(
        self,
        script: ParsedScript,
        text: str,
        cwd: str | None,
        roots: Sequence[str],
        home: str,
        builtin: Callable[[ParsedScript], tuple[str, str] | None] | None,
    ) -> PackViolation | None:
        ctx = JudgeContext(
            cwd=cwd,
            roots=tuple(roots),
            home=home,
            hosts=self._hosts,
            script=script,
            text=text,
            cd_targets=cd_targets(script, cwd, home),
            written=written_files(script, cwd),
            variables=assignments(text) if "=" in text and "$" in text else {},
            builtin=builtin,
        )
        return self.check(ctx)

    def check(self, ctx: JudgeContext) -> PackViolation | None:
        """The first pack rule a command of the script breaks, then the script-level judges."""
        found = self._check_commands(ctx, depth=0)
        if found is not None:
            return found
        for rule_id, domain, judge in SCRIPT_JUDGES:
            reason = judge(ctx)
            if reason is not None:
                return PackViolation(rule=rule_id, domain=domain, reason=f"{domain}: {reason}")
        return None

    def _check_commands(self, ctx: JudgeContext, depth: int) -> PackViolation | None:
        """Every command of ``ctx.script``, then what each runs elsewhere (``docker exec db psql ...``)."""
        for cmd in ctx.script.commands:
            if cmd.carrier:
                # `xargs -P 0 sh -c ...`: the carried script is judged on its own; the fan-out
                # around the carrier may still break a rule of its own.
                fans_out = bool({"xargs", "parallel"} & set(cmd.wrappers))
                wrapped = fans_out and cmd.written and cmd.written != cmd.argv
                found = self._check_command(replace(cmd, argv=cmd.written), ctx) if wrapped else None
                if found is not None:
                    return found
                continue
            found = self._check_command(cmd, ctx)
            if found is None and cmd.wrappers and cmd.written and cmd.written != cmd.argv:
                # The built-in walker peels wrappers (``systemd-run``, ``at``, ``nohup`` ...) off argv;
                # a pack may have a rule for the wrapper itself (a timer that outlives the session).
                found = self._check_command(replace(cmd, argv=cmd.written), ctx)
            if found is not None:
                return found
            if depth >= _MAX_NESTING:
                continue
            for inner in nested_commands(effective_argv(cmd, ctx.variables)):
                try:
                    script = parse_script(inner)
                except UnparsableCommand:
                    continue  # text for another machine we cannot read; the outer command was judged
                text = inner if isinstance(inner, str) else " ".join(inner)
                core = ctx.builtin(script) if ctx.builtin is not None else None
                if core is not None and core[0] != "privilege-escalation":  # sudo on that machine is its own
                    where = cmd.program
                    return PackViolation(
                        rule=core[0], domain="core", reason=f"run through {where}: {core[1]}"
                    )
                found = self._check_commands(replace(ctx, script=script, text=text), depth + 1)
                if found is not None:
                    return found
        return None

    def _check_command(self, cmd: SimpleCommand, ctx: JudgeContext) -> PackViolation | None:
        argv = effective_argv(cmd, ctx.variables)
        if not argv:
            return None
        program = argv[0]
        rules = self._rules_for(program)
        if not rules or "--help" in argv[1:]:  # help output changes nothing, in every CLI the packs name
            return None
        parsed = split_args(argv[1:], self._value_options.get(program, ()))
        for rule in rules:
            reason = _fires(rule, cmd, argv, parsed, ctx)
            if reason is not None:
                return PackViolation(rule=rule.id, domain=rule.domain, reason=f"{rule.domain}: {reason}")
        return None


def _fires(
    rule: PackRule, cmd: SimpleCommand, argv: Sequence[str], parsed: Any, ctx: JudgeContext
) -> str | None:
    if rule.subcommand and not _subcommand(rule, parsed.positionals):
        return None
    flags = parsed.flags
    if rule.flags_any and not (rule.flags_any & flags):
        return None
    if rule.flags_all and not (rule.flags_all <= flags):
        return None
    if rule.flags_none & flags:
        return None
    args = argv[1:]
    if rule.args_any and not any(p.search(arg) for p in rule.args_any for arg in args):
        return None
    if any(p.search(arg) for p in rule.args_none for arg in args):
        return None
    if rule.mass and not _is_mass(cmd, parsed.operands):
        return None
    if rule.check is not None:
        try:
            detail = JUDGES[rule.check](cmd, argv, ctx)
        except Exception as exc:  # a judge bug must not let a command through: fail closed
            detail = (
                f"the {rule.check!r} check failed ({type(exc).__name__}), so the command is not judged safe"
            )
        if detail is None:
            return None
        return f"{rule.reason}: {detail}"
    return rule.reason


@functools.lru_cache(maxsize=64)
def pack_set(paths: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = ()) -> PackSet:
    """The built-in packs plus the user's pack files, with the user's allowed hosts (cached)."""
    packs = builtin_packs() + tuple(load_pack(path) for path in paths)
    return PackSet(packs, HostList(user=tuple(allowed_hosts)))


#: Every built-in pack rule id, with its reason (merged into the engine's ``RULES``).
PACK_RULES: dict[str, str] = {}


def _register_builtin_ids() -> None:
    for pack in builtin_packs():
        for rule in pack.rules:
            PACK_RULES[rule.id] = rule.reason
    for rule_id, _domain, judge in SCRIPT_JUDGES:
        PACK_RULES[rule_id] = (judge.__doc__ or rule_id).strip().splitlines()[0]
    PACK_RULES[INTERNAL_ERROR] = "the rule packs failed while judging the command (declined: fail closed)"


_register_builtin_ids()
