"""The judges rule packs may name in ``check = "..."``, and the script-level judges.

A command judge is ``(cmd, argv, ctx) -> reason | None``: ``argv`` is the command's effective argv
(``python -m pip install`` is ``pip install``). A script judge sees the whole script (``ctx.script``,
``ctx.text``): shell loops that fork without end, a downloaded file run later in the same script,
package-index environment variables pointing at unknown hosts.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from tree_sitter import Node

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import SimpleCommand, UnparsableCommand, parse_bash, parse_script
from agent_fleet.policy.bash._unwrap import DOWNLOADERS, SHELLS, inline_script, is_interpreter
from agent_fleet.policy.packs._argv import JudgeContext, option_values, split_args
from agent_fleet.policy.packs._judge_code import (
    judge_inline_file_server,
    judge_inline_fork,
    judge_inline_shell,
    judge_inline_upload,
)
from agent_fleet.policy.packs._judge_domains import (
    judge_bucket_upload,
    judge_mail_out,
    judge_production_dispatch,
)
from agent_fleet.policy.packs._judge_exfil import judge_piped_upload
from agent_fleet.policy.packs._judge_guard_rails import (
    judge_agent_bypass,
    judge_ci_secrets,
    judge_hooks_enabled,
    judge_settings,
)
from agent_fleet.policy.packs._judge_infra import (
    judge_container_wipe,
    judge_remote_manifest,
    judge_scale_to_zero,
    judge_socket_relay,
)
from agent_fleet.policy.packs._judge_net import (
    judge_drop_host,
    judge_fed_from_file,
    judge_forge_push_source,
    judge_forge_upload,
    judge_http_serve,
    judge_load_target,
    judge_netcat,
    judge_remote_copy,
    judge_sensitive_operand,
    judge_shell_from_network,
    judge_socat,
    judge_ssh_tunnel,
    judge_stdin_put,
    judge_substituted_exfil,
    judge_tcp_redirect,
    judge_upload,
    orchestrated_text,
)
from agent_fleet.policy.packs._judge_proxy import judge_proxied_credentials
from agent_fleet.policy.packs._judge_supply import judge_ephemeral_package, judge_registry_config
from agent_fleet.policy.packs._judge_sys import (
    judge_answered_yes,
    judge_container_mount,
    judge_cpu_burn,
    judge_fill_disk,
    judge_git_config,
    judge_git_push,
    judge_http_delete,
    judge_install_source,
    judge_system_site,
    judge_unbounded_parallel,
)
from agent_fleet.policy.packs._sql import (
    judge_cypher,
    judge_http_wipe,
    judge_mongo,
    judge_private_db,
    judge_redis,
    judge_sql,
)

__all__ = ["JUDGES", "SCRIPT_JUDGES", "Judge", "ScriptJudge"]

Judge = Callable[[SimpleCommand, Sequence[str], JudgeContext], "str | None"]
ScriptJudge = Callable[[JudgeContext], "str | None"]


def _download_consumer(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    downloaded = [program for program in cmd.substituted if program in DOWNLOADERS]
    if downloaded:
        return f"{argv[0]} reads code that {downloaded[0]} downloads"
    return None


def _orchestrated_shell(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """Shell text sent to many machines (``ansible all -m shell -a 'rm -rf /var/www'``), judged by the
    built-in rules and the packs like a local command."""
    from agent_fleet.policy.packs._packs import (
        pack_set,  # the pack set judging this command is built from here
    )

    for text in orchestrated_text(argv):
        try:
            script = parse_script(text)
        except UnparsableCommand:
            continue
        core = ctx.builtin(script) if ctx.builtin is not None else None
        if core is not None and core[0] != "privilege-escalation":
            return f"{core[1]} ({core[0]})"
        inner = pack_set().check(replace(ctx, script=script, text=text))
        if inner is not None:
            return f"{inner.reason} ({inner.rule})"
    return None


_POWERSHELL_DOWNLOADERS = frozenset({"iwr", "irm", "invoke-webrequest", "invoke-restmethod", "wget", "curl"})


def _fed_by_download(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for feeder in cmd.stdin:
        if feeder and (feeder[0] in DOWNLOADERS or feeder[0].lower() in _POWERSHELL_DOWNLOADERS):
            return f"{argv[0]} runs what {feeder[0]} downloads"
    return None


JUDGES: dict[str, Judge] = {
    "sql": judge_sql,
    "mongo": judge_mongo,
    "redis": judge_redis,
    "install-source": judge_install_source,
    "system-site": judge_system_site,
    "git-config": judge_git_config,
    "git-push": judge_git_push,
    "http-delete": judge_http_delete,
    "container-mount": judge_container_mount,
    "fill-disk": judge_fill_disk,
    "upload": judge_upload,
    "drop-host": judge_drop_host,
    "netcat": judge_netcat,
    "shell-from-network": judge_shell_from_network,
    "socat": judge_socat,
    "tcp-redirect": judge_tcp_redirect,
    "ssh-tunnel": judge_ssh_tunnel,
    "http-serve": judge_http_serve,
    "inline-shell": judge_inline_shell,
    "inline-fork": judge_inline_fork,
    "stdin-put": judge_stdin_put,
    "load-target": judge_load_target,
    "remote-copy": judge_remote_copy,
    "substituted-exfil": judge_substituted_exfil,
    "download-consumer": _download_consumer,
    "answered-yes": judge_answered_yes,
    "cpu-burn": judge_cpu_burn,
    "cypher": judge_cypher,
    "private-db": judge_private_db,
    "http-wipe": judge_http_wipe,
    "fed-from-file": judge_fed_from_file,
    "forge-upload": judge_forge_upload,
    "forge-push-source": judge_forge_push_source,
    "inline-upload": judge_inline_upload,
    "sensitive-operand": judge_sensitive_operand,
    "orchestrated-shell": _orchestrated_shell,
    "fed-by-download": _fed_by_download,
    "ephemeral-package": judge_ephemeral_package,
    "unbounded-parallel": judge_unbounded_parallel,
    "registry-config": judge_registry_config,
    "remote-manifest": judge_remote_manifest,
    "container-wipe": judge_container_wipe,
    "socket-relay": judge_socket_relay,
    "scale-to-zero": judge_scale_to_zero,
    "piped-upload": judge_piped_upload,
    "inline-file-server": judge_inline_file_server,
    "agent-bypass": judge_agent_bypass,
    "production-dispatch": judge_production_dispatch,
    "bucket-upload": judge_bucket_upload,
    "mail-out": judge_mail_out,
}

# --------------------------------------------------------------------------------------------------
# Script-level judges.

_ALWAYS_TRUE = re.compile(
    r"^\s*(true|:|/bin/true|/usr/bin/true|\[\s*1\s*\]|\[\[\s*1\s*\]\]|\(\(\s*1\s*\)\)|1)\s*;?\s*$"
)
_ALWAYS_FALSE = re.compile(r"^\s*(false|/bin/false|\[\s*\]|\(\(\s*0\s*\)\))\s*;?\s*$")


def _nodes(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _texts(ctx: JudgeContext) -> list[str]:
    texts = [ctx.text]
    for cmd in ctx.script.commands:
        if cmd.carrier:
            inner = inline_script(cmd.argv)
            if inner is not None:
                texts.append(inner[0])
    return texts


def _endless_bodies(ctx: JudgeContext, needle: str) -> Iterator[tuple[Node, bytes]]:
    """The body of every loop in the script (inline scripts included) that never ends by its own
    condition (``while true``, ``while :``, ``until false``, ``for ((;;))``), for texts holding ``needle``."""
    for text in _texts(ctx):
        if needle not in text or not re.search(r"\b(while|until|for)\b", text):
            continue
        source = text.encode("utf-8", "surrogateescape")
        root = parse_bash(source).root_node
        for node in _nodes(root):
            condition = node.child_by_field_name("condition")
            if node.type == "while_statement" and condition is not None:
                cond = source[condition.start_byte : condition.end_byte].decode("utf-8", "replace")
                endless = bool(_ALWAYS_TRUE.match(cond))
                if node.children and node.children[0].type == "until":
                    endless = bool(_ALWAYS_FALSE.match(cond))
            elif node.type == "c_style_for_statement":
                header = source[node.start_byte : node.end_byte].decode("utf-8", "replace")
                endless = bool(re.match(r"for\s*\(\(\s*[^;]*;\s*;", header))
            else:
                continue
            body = node.child_by_field_name("body")
            if endless and body is not None:
                yield body, source


def _endless_fork_loop(ctx: JudgeContext) -> str | None:
    """An endless shell loop starting background jobs, or a script re-running itself in the background."""
    for cmd in ctx.script.commands:
        words = (cmd.program, *cmd.argv[1:2]) if cmd.program in SHELLS else (cmd.program,)
        itself = any(word in ("$0", "${0}", "$BASH_SOURCE", "${BASH_SOURCE}") for word in words)
        if itself and (cmd.background or cmd.in_pipeline):
            return "the script starts copies of itself in the background (fork bomb)"
    for body, _ in _endless_bodies(ctx, "&"):
        if any(child.type == "&" for child in _nodes(body)):
            return "an endless loop starting background processes (fork bomb)"
    return None


_RANGE = re.compile(r"\{(-?\d{1,12})\.\.(-?\d{1,12})(?:\.\.(-?\d{1,12}))?\}")
_SEQ = re.compile(r"\$\(\s*seq\s+(?:-\S+\s+)*(\d{1,12})(?:\s+(\d{1,12}))?(?:\s+(\d{1,12}))?\s*\)")


def _span(low: str, high: str | None, step: str | None = None) -> int:
    a, b = (1, int(low)) if high is None else (int(low), int(high))
    return abs(b - a) // max(1, abs(int(step or 1)))


def _seq_span(match: re.Match[str]) -> int:
    """How many numbers ``seq LAST``, ``seq FIRST LAST`` or ``seq FIRST STEP LAST`` prints."""
    first, second, third = match.groups()
    if third is not None:
        return _span(first, third, second)
    return _span(first, second)


def _huge_expansion(ctx: JudgeContext) -> str | None:
    """A brace range bash expands to tens of millions of words (``echo {1..99999999}``): memory."""
    for text in _texts(ctx):
        for match in _RANGE.finditer(text):
            if _span(match.group(1), match.group(2), match.group(3)) >= 10**7:
                return f"the brace range {match.group(0)} expands to more words than memory holds"
    return None


def _mass_background_loop(ctx: JudgeContext) -> str | None:
    """A loop over thousands of values starting a background job each time (``for i in $(seq 1 100000);
    do sleep 1000 & done``): as many processes as values."""
    for text in _texts(ctx):
        if "&" not in text or "for" not in text:
            continue
        source = text.encode("utf-8", "surrogateescape")
        for node in _nodes(parse_bash(source).root_node):
            if node.type != "for_statement":
                continue
            header = source[node.start_byte : node.end_byte].decode("utf-8", "replace").split(" do", 1)[0]
            spans = [_span(m.group(1), m.group(2), m.group(3)) for m in _RANGE.finditer(header)]
            spans += [_seq_span(m) for m in _SEQ.finditer(header)]
            body = node.child_by_field_name("body")
            forks = body is not None and any(c.type == "&" for c in _nodes(body))
            if spans and max(spans) >= 1000 and forks:
                return f"a loop over {max(spans)} values starting a background job for each"
    return None


_LOOP_EXITS = frozenset({"break", "exit", "return", "sleep", "read", "wait", "timeout"})


def _endless_growth_loop(ctx: JudgeContext) -> str | None:
    """An endless shell loop that keeps growing a variable (``while :; do x=$x$x; done``): memory."""
    for body, source in _endless_bodies(ctx, "="):
        words = {source[n.start_byte : n.end_byte].decode("utf-8", "replace") for n in _nodes(body)}
        if words & _LOOP_EXITS:
            continue
        for node in _nodes(body):
            if node.type != "variable_assignment" or not node.named_children:
                continue
            text = source[node.start_byte : node.end_byte].decode("utf-8", "replace")
            name, _, value = text.partition("=")
            appends = name.endswith("+")
            name = name.rstrip("+")
            if appends or re.search(r"\$\{?" + re.escape(name) + r"(?![A-Za-z0-9_])", value):
                return f"an endless loop growing ${name} each time round (memory)"
    return None


def _endless_write_loop(ctx: JudgeContext) -> str | None:
    """An endless loop writing into a file with nothing in it that ends or paces it: the disk fills."""
    for body, source in _endless_bodies(ctx, ">"):
        words = {source[n.start_byte : n.end_byte].decode("utf-8", "replace") for n in _nodes(body)}
        if words & _LOOP_EXITS:
            continue
        for node in _nodes(body):
            if node.type != "file_redirect":
                continue
            text = source[node.start_byte : node.end_byte].decode("utf-8", "replace")
            target = re.sub(r"^[0-9&]*>+\|?\s*", "", text)
            if text.lstrip("0123456789&").startswith(">") and target not in ("/dev/null", "&1", "&2", "-"):
                return f"an endless loop writing into {target} fills the disk"
    return None


def _download_targets(cmd: SimpleCommand) -> list[str]:
    if cmd.program not in ("curl", "wget", "wget2", "aria2c", "fetch"):
        return []
    args = cmd.argv[1:]
    outputs = option_values(args, ("-o", "--output", "-O", "--output-document"), attached=True)
    if cmd.program == "curl":
        outputs = [o for o in option_values(args, ("-o", "--output")) if o != "-"]
        if split_args(args).flags & {"-O", "--remote-name"}:
            outputs += [posixpath.basename(u.split("?")[0]) for u in args if "://" in u]
    elif cmd.program.startswith("wget") and not outputs:
        outputs = [posixpath.basename(u.split("?")[0]) for u in args if "://" in u]
    for redirect in cmd.redirects:
        if redirect.op in (">", ">>", ">|"):
            outputs.append(redirect.target)
    return [posixpath.basename(o) for o in outputs if o and o != "-" and o != "/dev/null"]


def _download_then_run(ctx: JudgeContext) -> str | None:
    """A file downloaded earlier in the same command is then executed."""
    downloaded: set[str] = set()
    for cmd in ctx.script.commands:
        if downloaded:
            program_word = next((w for w in cmd.written if posixpath.basename(w) == cmd.program), cmd.program)
            if "/" in program_word and posixpath.basename(program_word) in downloaded:
                return f"runs {program_word}, downloaded earlier in the same command"
            runner = cmd.program in SHELLS or is_interpreter(cmd.program) or cmd.program in ("source", ".")
            operands = split_args(cmd.argv[1:]).positionals
            if runner and operands and posixpath.basename(operands[0]) in downloaded:
                return f"{cmd.program} runs {operands[0]}, downloaded earlier in the same command"
        downloaded.update(_download_targets(cmd))
    return None


_INDEX_ENV = re.compile(
    r"\b(PIP_INDEX_URL|PIP_EXTRA_INDEX_URL|PIP_FIND_LINKS|PIP_TRUSTED_HOST|UV_INDEX_URL|UV_EXTRA_INDEX_URL"
    r"|UV_DEFAULT_INDEX|UV_INDEX|UV_FIND_LINKS|NPM_CONFIG_REGISTRY|npm_config_registry|YARN_REGISTRY"
    r"|YARN_NPM_REGISTRY_SERVER|BUN_CONFIG_REGISTRY|GOPROXY|CARGO_REGISTRIES_\w+_INDEX)=[\"']?([^\s\"';&|]+)"
)
_TLS_OFF = re.compile(
    r"\b(GIT_SSL_NO_VERIFY=(1|true|yes)|NODE_TLS_REJECT_UNAUTHORIZED=[\"']?0|GOINSECURE=|GOFLAGS=[\"']?[^\s]*-insecure|PIP_TRUSTED_HOST=)"
)


def _index_environment(ctx: JudgeContext) -> str | None:
    """Package-index variables pointing at unknown hosts, or verification of downloads turned off."""
    hosts = ctx.hosts.with_forge(ctx.cwd)
    for match in _INDEX_ENV.finditer(ctx.text):
        name, value = match.groups()
        for part in value.split(","):
            if name == "GOPROXY" and part in ("direct", "off"):
                continue
            host = host_of(part) or (part.lower() if name == "PIP_TRUSTED_HOST" else None)
            if not hosts.allows(host):
                return f"{name} points package installs at {host or part}, which is not on the allowed hosts"
    tls = _TLS_OFF.search(ctx.text)
    if tls is not None and not tls.group(1).startswith("PIP_TRUSTED_HOST"):
        return f"{tls.group(1).rstrip('=')} turns off verification of downloaded code"
    return None


_ENV_AUTO_APPROVE = re.compile(
    r"\b(TF_CLI_ARGS(_apply|_destroy)?=[\"']?[^\s\"']*(-auto-approve|-destroy)|PULUMI_SKIP_CONFIRMATIONS=[\"']?(true|1)"
    r"|TF_CLI_ARGS_destroy=)"
)


def _env_auto_approve(ctx: JudgeContext) -> str | None:
    """Infrastructure confirmations turned off through the environment (``TF_CLI_ARGS=-auto-approve``)."""
    found = _ENV_AUTO_APPROVE.search(ctx.text)
    if found is None:
        return None
    return f"{found.group(1)} applies or destroys infrastructure without confirmation"


#: (rule id, domain, judge), run once per script after every command's pack rules.
SCRIPT_JUDGES: tuple[tuple[str, str, ScriptJudge], ...] = (
    ("guard-rails/agent-settings", "guard-rails", judge_settings),
    ("guard-rails/hooks-enabled", "guard-rails", judge_hooks_enabled),
    ("guard-rails/ci-secrets", "guard-rails", judge_ci_secrets),
    ("exfiltration/proxied-credentials", "exfiltration", judge_proxied_credentials),
    ("exhaustion/endless-fork-loop", "exhaustion", _endless_fork_loop),
    ("exhaustion/endless-write-loop", "exhaustion", _endless_write_loop),
    ("exhaustion/endless-growth-loop", "exhaustion", _endless_growth_loop),
    ("exhaustion/huge-expansion", "exhaustion", _huge_expansion),
    ("exhaustion/mass-background-loop", "exhaustion", _mass_background_loop),
    ("infrastructure/environment-auto-approve", "infrastructure", _env_auto_approve),
    ("supply-chain/download-then-run", "supply-chain", _download_then_run),
    ("supply-chain/index-environment", "supply-chain", _index_environment),
)
