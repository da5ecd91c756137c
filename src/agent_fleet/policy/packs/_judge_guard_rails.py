"""Judges for the guard rails around an agent: other agents started with their checks off, the settings
that turn them off, hooks enabled and fired in one go, and CI edited to send secrets away.

* ``agent-bypass``: an agent CLI (codex, claude, gemini, qwen, aider, copilot, cursor-agent, amp, droid,
  crush ..., also through ``npx``/``bunx``) started with a flag or configuration that disables its
  approvals or its sandbox (``--dangerously-bypass-approvals-and-sandbox``, ``--yolo``,
  ``-s danger-full-access``, ``-a never``, ``-c approval_policy=never``, ``--dangerously-skip-permissions``,
  ``--permission-mode bypassPermissions``, ``--yes-always``, ``--allow-all-tools`` ...), or with a
  configuration home the command chooses (``CODEX_HOME=/tmp/ch codex``, ``CLAUDE_CONFIG_DIR``): what that
  home holds nobody has read.
* script judges: agent settings written (``.claude/settings*.json``, ``.codex/config.toml``,
  ``.gemini/settings.json``, ``.vscode/settings.json``, ``.mcp.json`` ...) by a command that names a way
  to turn approvals or the sandbox off, or commands the agent would run on its own (hooks, MCP servers);
  a hooks directory enabled (``git config core.hooksPath DIR``) and a git command that runs hooks in the
  same command; CI configuration written by a command that sends the environment or secrets to the
  network.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.packs._argv import JudgeContext, option_values
from agent_fleet.policy.rules._writes import written_words

__all__ = ["AGENTS", "judge_agent_bypass", "judge_ci_secrets", "judge_hooks_enabled", "judge_settings"]

#: Agent CLIs by program name, and the npm packages that install them (run through ``npx``).
AGENTS = frozenset(
    {"codex", "claude", "gemini", "qwen", "aider", "copilot", "cursor-agent", "amp", "droid", "crush"}
    | {"opencode", "goose", "auggie", "cline", "kilocode", "plandex", "openhands"}
)
_PACKAGES = {
    "@openai/codex": "codex",
    "@anthropic-ai/claude-code": "claude",
    "@google/gemini-cli": "gemini",
    "@qwen-code/qwen-code": "qwen",
    "@github/copilot": "copilot",
    "@sourcegraph/amp": "amp",
    "aider-chat": "aider",
}
_RUNNERS = frozenset({"npx", "bunx", "pnpx", "uvx", "pipx"})
#: Flags that switch approvals or the sandbox off, per agent (``*``: every agent).
_BYPASS_FLAGS: dict[str, frozenset[str]] = {
    "*": frozenset({"--dangerously-bypass-approvals-and-sandbox", "--dangerously-skip-permissions"})
    | {"--allow-dangerously-skip-permissions", "--dangerously-allow-all", "--yolo"},
    "codex": frozenset({"--full-access"}),
    "gemini": frozenset({"-y"}),
    "qwen": frozenset({"-y"}),
    "crush": frozenset({"-y"}),
    "aider": frozenset({"--yes-always", "--yes"}),
    "copilot": frozenset({"--allow-all-tools", "--allow-all-paths", "--allow-all"}),
    "cursor-agent": frozenset({"--force", "-f"}),
    "droid": frozenset({"--skip-permissions-unsafe"}),
}
_CONFIG_HOMES = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "AIDER_CONFIG")
#: For an agent, a home the command chooses is a configuration home too (``~/.codex``, ``~/.claude``).
_HOMES = ("HOME", "XDG_CONFIG_HOME")
_CONFIG_HOME = re.compile(r"(?<![\w$])(" + "|".join(_CONFIG_HOMES) + r")=")
_UNSAFE_ENV = {"GOOSE_MODE": re.compile(r"^auto$", re.I), "CODEX_UNSAFE_ALLOW_NO_SANDBOX": re.compile(".")}
#: ``-c KEY=VALUE`` settings of codex that open the sandbox or stop the approvals.
_CODEX_KEYS = re.compile(
    r"^(?:sandbox_mode\s*=\s*[\"']?danger-full-access|approval_policy\s*=\s*[\"']?never"
    r"|ask_for_approval\s*=\s*[\"']?never|sandbox_workspace_write\.network_access\s*=\s*[\"']?true"
    r"|sandbox_workspace_write\.writable_roots\s*=|sandbox_permissions\s*=|shell_environment_policy\.inherit"
    r"\s*=\s*[\"']?all|dangerously|yolo)",
    re.IGNORECASE,
)
#: Text that turns an agent's checks off, in any settings format (JSON, TOML, YAML) or command.
_BYPASS_TEXT = re.compile(
    r"bypassPermissions|dangerously|danger-full-access|approval[_-]?policy\W+never|skip[_-]?permissions"
    r"|\byolo\b|autoApprove|auto[_-]?accept\W+true|yes[_-]always|allow[_-]all|\"Bash(?:\(\*+\)|\(:\*\))?\""
    r"|network[_-]access\W+true|enableAllProjectMcpServers|disableAllHooks\W+false",
    re.IGNORECASE,
)
#: Settings that make the agent run commands on its own (hooks, MCP servers, status lines, key helpers).
_RUNS_TEXT = re.compile(
    r"\"hooks\"|\bhooks\s*[:=]|statusLine|apiKeyHelper|mcpServers|mcp_servers|\"command\""
)
_SETTINGS = re.compile(
    r"(?:^|/)(?:\.claude/[^/]*\.json|\.claude\.json|\.codex/[^/]*\.toml|\.gemini/[^/]*\.json"
    r"|\.qwen/[^/]*\.json|\.vscode/settings\.json|\.cursor/[^/]*\.json|\.mcp\.json|\.aider\.conf\.ya?ml"
    r"|\.copilot/[^/]*\.json|\.factory/[^/]*\.json|\.amp/[^/]*\.json|\.goose/[^/]*\.ya?ml)$"
)
_CI = re.compile(
    r"(?:^|/)(?:\.github/workflows/[^/]+\.ya?ml|\.github/actions/.+\.ya?ml|\.gitea/workflows/[^/]+\.ya?ml"
    r"|\.gitlab-ci\.ya?ml|\.circleci/config\.ya?ml|Jenkinsfile|azure-pipelines\.ya?ml"
    r"|bitbucket-pipelines\.ya?ml|\.travis\.ya?ml|\.buildkite/[^/]+\.ya?ml|\.drone\.ya?ml|cloudbuild\.ya?ml"
    r"|\.woodpecker(?:/[^/]+)?\.ya?ml|\.gitlab/ci/[^/]+\.ya?ml)$"
)
_SECRET_TEXT = re.compile(
    r"\$\{\{\s*(?:secrets|toJSON\(\s*secrets|env|github\.token|toJSON\(\s*env)|\bsecrets\.[A-Za-z_]"
    r"|(?:^|[\s;|&(`\"'])(?:env|printenv|export\s+-p|set|declare\s+-p)\s*(?:$|[|>;)&\"'`\\])"
    r"|\$\(\s*(?:env|printenv)\s*\)|/proc/self/environ|\$\{?(?:CI_JOB_TOKEN|GITHUB_TOKEN|ACTIONS_\w+"
    r"|[A-Z_]*(?:TOKEN|SECRET|PASSWORD|API_KEY|ACCESS_KEY)\b)",
    re.MULTILINE,
)
_SENDERS = re.compile(
    r"\b(?:curl|wget|nc|ncat|netcat|socat|telnet|http|https|xh|Invoke-WebRequest|Invoke-RestMethod|iwr)\b"
    r"|/dev/(?:tcp|udp)/|\bhttps?://"
)
_URL_HOST = re.compile(r"https?://([^/\s'\"`:]+)|\b(?:nc|ncat|netcat|telnet)\s+(?:-\S+\s+)*([A-Za-z0-9.-]+)")
_HOOK_RUNNERS = frozenset(
    {"commit", "merge", "push", "rebase", "checkout", "switch", "am", "pull", "cherry-pick", "revert"}
    | {"clone", "worktree", "gc", "reset", "commit-tree", "fetch", "stash", "apply", "tag", "branch"}
)
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})


def _agent_argv(argv: Sequence[str]) -> tuple[str, Sequence[str]] | None:
    """``(agent, its arguments)`` for an agent CLI, run directly or through ``npx @scope/pkg``."""
    program = posixpath.basename(argv[0]) if argv else ""
    if program in AGENTS:
        return program, argv[1:]
    if program in _RUNNERS:
        for i, word in enumerate(argv[1:4], start=1):
            name = re.sub(r"(?<=.)@[^/@]*$", "", word)  # `@openai/codex@latest`
            if name in _PACKAGES:
                return _PACKAGES[name], argv[i + 1 :]
            if name in AGENTS:
                return name, argv[i + 1 :]
    return None


def _flag_values(args: Sequence[str], names: tuple[str, ...]) -> list[str]:
    return option_values(args, names, attached=True)


def judge_agent_bypass(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """An agent CLI started with its approvals or sandbox off, or with a configuration home the command
    itself chooses."""
    found = _agent_argv(argv)
    if found is None:
        return None
    agent, args = found
    flags = {arg.partition("=")[0] for arg in args if arg.startswith("-")}
    bypass = (_BYPASS_FLAGS["*"] | _BYPASS_FLAGS.get(agent, frozenset())) & flags
    if bypass:
        return f"{agent} {sorted(bypass)[0]} turns off its approvals or its sandbox"
    for value in _flag_values(args, ("-s", "--sandbox")):
        if value.strip("'\"") == "danger-full-access":
            return f"{agent} --sandbox danger-full-access runs without a sandbox"
    for value in _flag_values(args, ("-a", "--ask-for-approval", "--approval-mode", "--approval-policy")):
        if value.strip("'\"").lower() in ("never", "yolo"):
            return f"{agent} --ask-for-approval {value} never asks"
    for value in _flag_values(args, ("--permission-mode", "--permission_mode")):
        if value.strip("'\"") in ("bypassPermissions", "bypass"):
            return f"{agent} --permission-mode {value} skips every permission check"
    for value in _flag_values(args, ("-c", "--config", "--settings", "--profile-config")):
        if _CODEX_KEYS.match(value.strip()) or _BYPASS_TEXT.search(value):
            return f"{agent} is configured to skip approvals or its sandbox ({value[:60]!r})"
        text = ctx.written.get(value)
        if text is not None and _BYPASS_TEXT.search(text):
            return f"{agent} reads settings written by the same command that skip its checks"
    for value in _flag_values(args, ("--allowedTools", "--allowed-tools", "--allow-tool")):
        tools = re.split(r"[\s,]+", value.strip("'\""))
        if any(re.fullmatch(r"Bash(?:\(\*+\)|\(:\*\))?|shell(?:\(\*\))?", tool) for tool in tools):
            return f"{agent} may run any shell command without asking ({value!r})"
    for value in _flag_values(args, ("--add-dir",)):
        path = ctx.resolve(value)
        if path is not None and ctx.sensitive_dir(path):
            return f"{agent} --add-dir {value!r} opens the whole machine or home to it"
    for name, value in cmd.env:
        if name in _CONFIG_HOMES or name in _HOMES:
            return f"{name}={value!r}: a configuration home the command chooses, which nobody has read"
        if name in _UNSAFE_ENV and _UNSAFE_ENV[name].search(value):
            return f"{name}={value!r} turns off its approvals"
    home = _CONFIG_HOME.search(ctx.text)
    if home is not None:
        return f"{home.group(1)} set by the command: a configuration home nobody has read"
    return None


_IN_PLACE = {"yq": ("-i", "--inplace"), "dasel": ("put", "delete"), "sponge": ()}


def _written(cmd: SimpleCommand) -> Iterator[str]:
    """The files ``cmd`` writes: redirections, ``tee``, copy and move destinations, ``sed -i`` files,
    editors in place (``yq -i``, ``sponge FILE``)."""
    for redirect in cmd.redirects:
        if redirect.op in _WRITE_OPS:
            yield redirect.target
    if cmd.program not in ("rm", "rmdir", "unlink", "shred"):
        yield from written_words(cmd.argv)
    markers = _IN_PLACE.get(cmd.program)
    if markers is not None and (not markers or set(markers) & set(cmd.argv[1:])):
        yield from (a for a in cmd.argv[1:] if not a.startswith("-"))


def _writes(ctx: JudgeContext, pattern: re.Pattern[str]) -> str | None:
    for cmd in ctx.script.commands:
        for word in _written(cmd):
            if pattern.search(posixpath.normpath(word) if word else word):
                return word
    return None


def judge_settings(ctx: JudgeContext) -> str | None:
    """agent settings written that turn approvals or the sandbox off, or run commands on their own"""
    target = _writes(ctx, _SETTINGS)
    if target is None:
        return None
    bypass = _BYPASS_TEXT.search(ctx.text)
    if bypass is not None:
        return f"{target} is written with {bypass.group(0)!r}, which turns the agent's checks off"
    runs = _RUNS_TEXT.search(ctx.text)
    if runs is not None:
        return f"{target} is written with {runs.group(0)!r}: commands the agent would run without asking"
    unseen = next((c for c in ctx.script.commands if _copies_into(c, target)), None)
    if unseen is not None:
        return f"{target} is replaced by what {unseen.program} brings, which nobody has read"
    return None


def _copies_into(cmd: SimpleCommand, target: str) -> bool:
    """``cp /tmp/x .claude/settings.json``, ``curl -o .mcp.json URL``: settings whose content the
    command does not show."""
    if cmd.program in ("cp", "mv", "install", "ln", "rsync", "scp"):
        return bool(cmd.argv[1:]) and cmd.argv[-1].rstrip("/") in (target, target.rsplit("/", 1)[0])
    if cmd.program in ("curl", "wget", "http", "xh"):
        return target in cmd.argv
    return False


def judge_hooks_enabled(ctx: JudgeContext) -> str | None:
    """a hooks directory enabled and a git command that runs hooks, in one command"""
    enabled: str | None = None
    for cmd in ctx.script.commands:
        if cmd.program != "git":
            continue
        args = list(cmd.argv[1:])
        for value in [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-c"]:
            key, _, path = value.partition("=")
            if key.lower() == "core.hookspath" and path not in ("", "/dev/null"):
                return f"git -c core.hooksPath={path!r} runs the hooks it names"
        words = [a for a in args if not a.startswith("-")]
        if words[:2] and words[0] == "config" and len(words) >= 3 and words[1].lower() == "core.hookspath":
            enabled = None if words[2] in ("", "/dev/null") else words[2]
            continue
        sub = next((a for a in words if a not in ("config",)), None)
        if enabled is not None and sub in _HOOK_RUNNERS:
            return f"core.hooksPath is set to {enabled!r} and git {sub} runs its hooks at once"
    return None


def judge_ci_secrets(ctx: JudgeContext) -> str | None:
    """CI configuration written that sends the environment or secrets to the network"""
    target = _writes(ctx, _CI)
    if target is None:
        return None
    secret = _SECRET_TEXT.search(ctx.text)
    sender = _SENDERS.search(ctx.text)
    if secret is None or sender is None:
        return None
    hosts = [m.group(1) or m.group(2) for m in _URL_HOST.finditer(ctx.text)]
    known = [host_of(h, bare=True) or h for h in hosts if h]
    if known and all(ctx.hosts.trusted(h) for h in known):
        return None
    return f"{target} is written to send {secret.group(0).strip()!r} to the network"
