"""Programs that run a command given in their arguments, in a form of their own (not a transparent prefix).

``inner_runs(argv)`` lists what ``argv`` makes run: shell texts (``su -c``, ``script -c``, ``flock -c``,
``ssh host CMD``, ``tmux new CMD``, ``parallel CMD ::: ARGS``, ``nix-shell --run``, ``vim -c '!CMD'``,
``tar --checkpoint-action=exec=CMD``/``--to-command``/``-I``, ``rsync -e``, ``zip -TT``, ``socat EXEC:``,
``awk 'BEGIN{system(CMD)}'``, ``sed 'e CMD'``, ``ssh -o ProxyCommand=``), argvs, and opaque findings
(``sed s/x/y/e`` runs the pattern space; ``awk`` calling ``system`` on a computed string). Git's own
command-running options live in ``_git``; shells, ``eval`` and friends in ``_unwrap.inline_script``;
other languages in ``_code``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from agent_fleet.policy.bash._code import Inner

__all__ = ["inner_runs"]


def _option_values(args: Sequence[str], short: str, long: tuple[str, ...]) -> list[str]:
    """Values of the given options anywhere in ``args`` (``-c X``, ``-cX``, ``--opt X``, ``--opt=X``)."""
    values: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and name in long:
            values.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            letters = arg[1:]
            for j, letter in enumerate(letters):
                if letter in short:
                    rest = letters[j + 1 :]
                    values.append(rest if rest else (args[i + 1] if i + 1 < len(args) else ""))
                    break
                if not letter.isalpha():
                    break
    return values


def _operands(args: Sequence[str], value_letters: str, value_longs: tuple[str, ...] = ()) -> list[str]:
    """Words after the leading options (getopt style, stopping at the first operand or ``--``)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return list(args[i + 1 :])
        if arg.startswith("--"):
            i += 2 if arg in value_longs else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            takes = next((j for j, letter in enumerate(letters) if letter in value_letters), None)
            i += 2 if takes is not None and takes == len(letters) - 1 else 1
            continue
        break
    return list(args[i:])


def _scripts(texts: Sequence[str]) -> list[Inner]:
    return [Inner("script", text=text) for text in texts if text]


_SSH_VALUES = "bcDEeFIiJLlmOopQRSWwB"
_TMUX_RUNS = frozenset(
    {"new", "new-session", "new-window", "neww", "split-window", "splitw", "respawn-pane", "respawnp"}
    | {"respawn-window", "respawnw", "run-shell", "run", "display-popup", "popup", "if-shell", "if"}
    | {"pipe-pane", "pipep"}
)
_VIM = frozenset({"vim", "vi", "nvim", "ex", "view", "gvim", "vimdiff", "rvim", "evim", "nex", "exim"})
_AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
_AWK_SYSTEM = re.compile(r"\bsystem\s*\(|\|\s*getline|\|\s*\"|print[^;}]*\|")
_AWK_LITERAL_RUN = re.compile(
    r"system\s*\(\s*\"((?:[^\"\\]|\\.)*)\"\s*\)|\"((?:[^\"\\]|\\.)*)\"\s*\|\s*getline"
)
_AWK_PRINT_PIPE = re.compile(r"print[^;}|]*\|\s*\"((?:[^\"\\]|\\.)*)\"")
_SED_S_E = re.compile(r"(?:^|[;\n{}]\s*)[0-9$,/!~ ]*s(.).*?\1.*?\1[gpiImM0-9w]*e")
_SED_E_CMD = re.compile(
    r"(?:^|[;\n{])\s*(?:[0-9$]+(?:,[0-9$]+)?|/[^/]*/)?\s*!?\s*e(?:\s+([^;\n}]*)|\s*(?=$|[;\n}]))"
)
_VIM_BANG = re.compile(
    r"^[:\s]*(?:(?:silent|sil|exe|execute|keepalt|noautocmd|r|read|w|write|\d*,?\d*)!?\s*)*!(.*)$"
)
_VIM_SYSTEM = re.compile(
    r"system\s*\(\s*['\"](.*?)['\"]|systemlist\s*\(\s*['\"](.*?)['\"]|:?\bterm(?:inal)?\b\s+(.*)"
)


def _vim(args: Sequence[str]) -> list[Inner]:
    commands = [arg[1:] for arg in args if arg.startswith("+") and len(arg) > 1]
    commands += _option_values(args, "cS", ("--cmd",))
    for i, arg in enumerate(args):
        if arg == "--cmd" and i + 1 < len(args):
            commands.append(args[i + 1])
    found: list[Inner] = []
    for command in commands:
        bang = _VIM_BANG.match(command)
        system = _VIM_SYSTEM.search(command)
        if bang is not None:
            found.append(Inner("script", text=bang.group(1)))
        elif system is not None:
            found.append(Inner("script", text=next(g for g in system.groups() if g is not None)))
        elif re.match(
            r"[:\s]*(?:sil(?:ent)?!?\s+)?(?:py3?|python3?|pyx|perl|ruby|lua|call|exe|execute|so|source|luafile|pyfile|rubyfile|perldo|pydo|term|terminal)\b",
            command,
        ):
            found.append(Inner("opaque", text=f"editor command {command!r} runs code"))
    return found


def _awk(args: Sequence[str]) -> list[Inner]:
    if "-f" in args or any(arg.startswith("--file") for arg in args):
        program = ""
    else:
        operands = _operands(args, "FvfiEl", ("--field-separator", "--assign", "--include", "--load"))
        program = operands[0] if operands else ""
    if not _AWK_SYSTEM.search(program):
        return []
    found = [
        Inner("script", text=next(g for g in match.groups() if g is not None))
        for match in _AWK_LITERAL_RUN.finditer(program)
    ]
    for match in _AWK_PRINT_PIPE.finditer(program):
        printed = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", program[match.start() : match.start(1) - 1])
        text = " ".join(printed)
        found.append(Inner("script", text=f"printf '%s\\n' {shlex.quote(text)} | {match.group(1)}"))
    calls = len(re.findall(r"\bsystem\s*\(|\|\s*getline|print[^;}]*\|", program))
    if calls > len(found):
        found.append(Inner("opaque", text="awk runs a command it computes"))
    return found


def _sed(args: Sequence[str]) -> list[Inner]:
    scripts = _option_values(args, "e", ("--expression",))
    if not scripts:
        operands = _operands(args, "eflsE", ("--file", "--line-length"))
        scripts = operands[:1]
    found: list[Inner] = []
    for script in scripts:
        if _SED_S_E.search(script):
            found.append(Inner("opaque", text="sed s///e runs the pattern space as a command"))
        for match in _SED_E_CMD.finditer(script):
            if match.group(1):
                found.append(Inner("script", text=match.group(1)))
            else:
                found.append(Inner("opaque", text="sed e runs the pattern space as a command"))
    return found


def _tar(args: Sequence[str]) -> list[Inner]:
    found: list[Inner] = []
    for value in _option_values(
        args, "IF", ("--checkpoint-action", "--to-command", "--use-compress-program")
    ):
        found.append(Inner("script", text=value[5:] if value.startswith("exec=") else value))
    for value in _option_values(args, "", ("--info-script", "--new-volume-script", "--rsh-command")):
        found.append(Inner("script", text=value))
    return found


def _parallel(args: Sequence[str]) -> list[Inner]:
    words = _operands(args, "jSIaEdXnPlL", ("--jobs", "--sshlogin", "--arg-file", "--delimiter"))
    template: list[str] = []
    inputs: list[str] = []
    seen_sep = False
    for word in words:
        if word in (":::", "::::", ":::+", "::::+"):
            seen_sep = True
            continue
        (inputs if seen_sep else template).append(word)
    # parallel joins the words with spaces and gives the line to a shell; with -q it quotes them first.
    texts = dict.fromkeys([" ".join(template), shlex.join(template)])
    found: list[Inner] = []
    for text in texts:
        if not inputs:
            found += _scripts([text])
        for value in inputs[:4]:
            found += _scripts([text.replace("{}", value) if "{}" in text else f"{text} {value}"])
    return found


def _ssh(args: Sequence[str]) -> list[Inner]:
    found = [
        Inner("script", text=value.partition("=")[2] or value)
        for value in _option_values(args, "o", ())
        if value.lower().startswith(("proxycommand", "localcommand", "knownhostscommand"))
    ]
    operands = _operands(args, _SSH_VALUES)
    remote = operands[1:]
    if remote[:1] == ["--"]:
        remote = remote[1:]
    if remote:
        found.append(Inner("script", text=" ".join(remote)))
    return found


def _tmux(args: Sequence[str]) -> list[Inner]:
    found = _scripts(_option_values(args[:2], "c", ()))
    words = _operands(args, "cLSfT")
    if not words or (words[0] not in _TMUX_RUNS and words[0] not in ("send-keys", "send")):
        return found
    rest = _operands(words[1:], "cetFfnsxylpLSTwbN", ("--",))
    if words[0] in ("send-keys", "send"):
        keys = [w for w in rest if w not in ("Enter", "C-m", "KPEnter")]
        return [*found, *_scripts([" ".join(keys)])]
    return [*found, *_scripts([" ".join(rest)])]


def _socat(args: Sequence[str]) -> list[Inner]:
    found: list[Inner] = []
    for arg in args:
        head, _, rest = arg.partition(":")
        if head.lower() in ("exec", "system"):
            found.append(Inner("script", text=rest.split(",")[0]))
    return found


def inner_runs(argv: Sequence[str]) -> list[Inner]:
    """What ``argv`` runs through its own arguments (see the module docstring)."""
    if not argv:
        return []
    program, args = argv[0], list(argv[1:])
    match program:
        case "sg" | "newgrp":  # sg GROUP -c CMD, sg GROUP CMD
            rest = args[1:]
            scripts = _option_values(rest, "c", ())
            return _scripts(scripts or [" ".join(rest)])
        case "su" | "runuser" | "ksu":
            return _scripts(_option_values(args, "c", ("--command", "--session-command")))
        case "flock" | "script" | "nix-shell" | "expect":
            return _scripts(_option_values(args, "c", ("--command", "--run")))
        case "make" | "gmake" | "bmake":  # `make --eval='all:; CMD'`: makefile text on the command line
            from agent_fleet.policy.bash._later import recipes

            return _scripts([recipes(text) for text in _option_values(args, "E", ("--eval",))])
        case "parallel" | "sem":
            return _parallel(args)
        case "ssh" | "autossh" | "mosh":
            return _ssh(args)
        case "tmux":
            return _tmux(args)
        case "rsync":
            return _scripts(_option_values(args, "e", ("--rsh", "--rsync-path")))
        case "zip":
            return _scripts(_option_values(args, "", ("--unzip-command",)) + _after(args, "-TT"))
        case "tar" | "bsdtar" | "gtar":
            return _tar(args)
        case "socat":
            return _socat(args)
        case "nc" | "ncat" | "netcat":
            found = _scripts(_option_values(args, "c", ("--sh-exec", "--lua-exec")))
            return found + [Inner("argv", argv=(value,)) for value in _option_values(args, "e", ("--exec",))]
        case "gdb":
            return _scripts([v[6:] for v in _after(args, "-ex") if v.startswith("shell ")])
        case _ if program in _VIM:
            return _vim(args)
        case _ if program in _AWK:
            return _awk(args)
        case "sed" | "gsed":
            return _sed(args)
        case _:
            return []


def _after(args: Sequence[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]
