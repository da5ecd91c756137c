"""What git and the environment run: commands git takes from its configuration and options, and those
environment variables name.

``git_runs(argv)`` lists the shell texts git would run: ``-c alias.x='!CMD'``, ``-c core.editor=CMD``
(and every other configuration key whose value git runs as a command), ``git config KEY VALUE`` for
those keys, ``submodule foreach CMD``, ``rebase -x CMD``, ``bisect run CMD``, ``difftool -x CMD``,
``--upload-pack``/``--receive-pack``/``--exec``, ``grep -O``, ``ext::`` URLs. ``env_runs(name, value)``
does the same for environment variables (``GIT_SSH_COMMAND``, ``GIT_EDITOR``, ``PAGER``, ``BASH_ENV``,
prompts bash expands, exported functions ...). The walker parses those texts like any command, so
``git -c core.pager='rm -rf /' log`` is judged as ``rm -rf /``. ``parse_git(argv)`` is git's own
option parsing, shared with the git rules (``rules._git``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_fleet.policy.bash._code import Inner

__all__ = ["GitInvocation", "env_runs", "git_runs", "parse_git"]

_SHELL_KEY = re.compile(
    r"core\.(editor|pager|sshcommand|askpass|fsmonitor|gitproxy)|sequence\.editor|diff\.external"
    r"|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process)|gpg(\..+)?\.program"
    r"|merge\..+\.driver|(merge|diff)tool\..+\.cmd|pager\..+|credential(\..+)?\.helper"
    r"|uploadpack\.packobjectshook|remote\..+\.(receivepack|uploadpack|proxy)|web\.browser"
    r"|browser\..+\.(cmd|path)|man\..+\.(cmd|path)|sendemail\.(smtpserver|sendmailcmd)|alias\..+",
    re.IGNORECASE,
)
_ENV_SHELL = frozenset(
    {"GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS"}
    | {"SSH_ASKPASS", "GIT_PROXY_COMMAND", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "GIT_SSH", "BROWSER"}
    | {"LESSOPEN", "LESSCLOSE", "PROMPT_COMMAND", "SUDO_ASKPASS", "RSYNC_RSH", "CVS_RSH", "DIFF_EXTERNAL"}
)
#: Variables that make programs load code from a file we cannot see.
_ENV_OPAQUE = frozenset(
    {"BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PERL5OPT", "PYTHONSTARTUP", "NODE_OPTIONS", "RUBYOPT"}
    | {"GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "ZDOTDIR", "DYLD_INSERT_LIBRARIES", "GCONV_PATH"}
    # A configuration file of its own (hooks path, fsmonitor, pager ... in a file we cannot see).
    | {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"}
)
#: NODE_OPTIONS flags that tune node without loading code (`--require`/`--import`/`--loader` do load it).
_NODE_SAFE = re.compile(
    r"--(max-old-space-size|max-semi-space-size|stack-size|enable-source-maps|no-warnings|trace-warnings"
    r"|no-deprecation|trace-deprecation|openssl-legacy-provider|experimental-vm-modules|max-http-header-size"
    r"|unhandled-rejections|dns-result-order|use-openssl-ca|tls-min-v1\.[0-3]|trace-uncaught|heapsnapshot-near-heap-limit"
    r"|experimental-specifier-resolution|no-experimental-fetch|disable-warning|expose-gc)(=\S*)?$"
)
_GLOBAL_VALUES = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--exec-path"}
)


def _value_runs(key: str, value: str) -> list[Inner]:
    lower = key.lower()
    if lower.startswith("alias."):
        return [Inner("script", text=value[1:])] if value.startswith("!") else []
    if lower.startswith("credential") and not value.startswith("!") and not value.startswith("/"):
        return []  # credential.helper=store: a git-credential-* helper
    if _SHELL_KEY.fullmatch(lower):
        return [Inner("script", text=value[1:] if value.startswith("!") else value)]
    return []


#: Prompts bash expands (command substitutions included) each time it shows them: ``PS4`` for every
#: command traced (``set -x``, ``bash -x``, ``SHELLOPTS=xtrace``), the others in interactive shells.
_ENV_PROMPTS = frozenset({"PS0", "PS1", "PS2", "PS3", "PS4"})


def env_runs(name: str, value: str) -> list[Inner]:
    """What setting ``name=value`` in a command's environment makes run."""
    if name in _ENV_SHELL:
        return [Inner("script", text=value)] if value else []
    if name in _ENV_PROMPTS and ("$" in value or "`" in value):
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        return [Inner("script", text=f': "{quoted}"')]  # what its substitutions run, as bash expands it
    if name.startswith("BASH_FUNC_") and value.lstrip().startswith("()"):
        # An exported function (`BASH_FUNC_ls%%=() { ...; }`): bash defines it, and a later `ls` runs it.
        return [Inner("script", text=f"{name[10:].rstrip('%')}{value}")]
    if name == "NODE_OPTIONS" and all(_NODE_SAFE.match(word) for word in value.split()):
        return []  # `--max-old-space-size=8192`: tuning, no code loaded
    if name in _ENV_OPAQUE and value:
        return [Inner("opaque", text=f"{name} makes programs load code from {value!r}")]
    if name == "GIT_CONFIG_PARAMETERS":
        found: list[Inner] = []
        for item in re.findall(r"'((?:[^']|'\\'')*)'", value):
            key, _, val = item.partition("=")
            found.extend(_value_runs(key, val))
        return found
    if name.startswith("GIT_CONFIG_VALUE_") and value:
        return [Inner("script", text=value)]
    return []


@dataclass(slots=True)
class GitInvocation:
    sub: str = ""
    rest: list[str] = field(default_factory=list)
    config: list[tuple[str, str]] = field(default_factory=list)
    config_env: bool = False


def parse_git(argv: Sequence[str]) -> GitInvocation:
    args = list(argv[1:])
    inv = GitInvocation()
    aliases: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in _GLOBAL_VALUES:
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if name == "-c":
                key, _, val = value.partition("=")
                inv.config.append((key, val))
                if key.lower().startswith("alias."):
                    aliases[key[len("alias.") :]] = val
            elif name == "--config-env":
                inv.config_env = True
        i += 1
    if i >= len(args):
        return inv
    inv.sub, inv.rest = args[i], args[i + 1 :]
    for _ in range(5):  # aliases defined on the command line: `git -c alias.x='reset --hard' x`
        alias = aliases.pop(inv.sub, None)
        if alias is None or alias.startswith("!"):
            break
        try:
            words = shlex.split(alias)
        except ValueError:
            break
        if not words:
            break
        inv.sub, inv.rest = words[0], words[1:] + inv.rest
    return inv


def _values(rest: Sequence[str], short: str, longs: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for i, arg in enumerate(rest):
        name, eq, value = arg.partition("=")
        if name in longs or (short and arg.startswith(short) and not arg.startswith("--")):
            if name in longs and eq:
                found.append(value)
            elif arg == short or name in longs:
                found.append(rest[i + 1] if i + 1 < len(rest) else "")
            elif short and arg.startswith(short) and len(arg) > len(short):
                found.append(arg[len(short) :])
    return found


def git_runs(argv: Sequence[str]) -> list[Inner]:
    """The shell texts and argvs this git invocation runs (see the module docstring)."""
    inv = parse_git(argv)
    found: list[Inner] = []
    for key, value in inv.config:
        found.extend(_value_runs(key, value))
    rest = inv.rest
    operands = [arg for arg in rest if not arg.startswith("-")]
    scripts: list[str] = []
    match inv.sub:
        case "submodule":
            if operands[:1] == ["foreach"]:
                after = rest[rest.index("foreach") + 1 :]
                words = [w for w in after if w not in ("--recursive", "-q", "--quiet")]
                scripts.append(" ".join(words))
        case "rebase":
            scripts += _values(rest, "-x", ("--exec",))
        case "bisect":
            if operands[:1] == ["run"]:
                after = rest[rest.index("run") + 1 :]
                if after:
                    found.append(Inner("argv", argv=tuple(after)))
        case "difftool" | "mergetool":
            scripts += _values(rest, "-x", ("--extcmd",))
        case "grep":
            scripts += _values(rest, "-O", ("--open-files-in-pager",))
        case "send-email":
            scripts += _values(rest, "", ("--sendmail-cmd", "--smtp-server"))
        case "config":
            words = [w for w in rest if not w.startswith("-")]
            if words[:1] in (["set"], ["--add"]):
                words = words[1:]
            if len(words) >= 2:
                found.extend(_value_runs(words[0], words[1]))
        case _:
            pass
    scripts += _values(rest, "", ("--upload-pack", "--receive-pack", "--exec"))
    if inv.sub in ("clone", "fetch", "pull", "ls-remote"):
        scripts += _values(rest, "-u", ())
    for arg in rest:
        if arg.startswith("ext::"):  # words split on spaces; `% ` is a space inside a word, `%%` a `%`
            words = [w.replace("\0", " ").replace("%%", "%") for w in arg[5:].replace("% ", "\0").split()]
            found.append(Inner("argv", argv=tuple(words)))
    found.extend(Inner("script", text=text) for text in scripts if text)
    return found
