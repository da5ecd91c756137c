"""Rules about code being executed that we cannot see: downloads and decoded text run as code, scripts
held in unknown variables, and files written from a download or decoder and then run."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.bash._unwrap import (
    DECODERS,
    DOWNLOADERS,
    SHELLS,
    executes_stdin,
    inline_script,
    is_dynamic,
    is_executor,
)
from agent_fleet.policy.rules._verdict import RuleContext, Violation

__all__ = [
    "RULES",
    "cloned_then_run",
    "decoder_to_shell",
    "download_to_shell",
    "lone_dynamic",
    "opaque_script",
    "run_later",
    "shell_escape",
    "unresolved_program",
]

#: The ids these rules decide, with what each guards against.
RULES: dict[str, str] = {
    "download-to-shell": 'downloaded content executed: curl|sh, bash <(curl ...), sh -c "$(curl ...)"',
    "decoder-to-shell": "decoded or transformed text executed: base64 -d | sh, rev | sh, eval $(xxd -r)",
    "opaque-code": "code we cannot see is run: computed commands in inline code, sed s///e, exec(decode())",
    "dynamic-command": "a destructive command whose program or target cannot be resolved statically",
}

_GLOB_CHARS = re.compile(r"[*?\[]")


def unresolved_program(program: str) -> bool:
    return is_dynamic(program) or _GLOB_CHARS.search(program) is not None


def _runs_stdin(cmd: SimpleCommand) -> bool:
    return (
        executes_stdin(cmd.argv)
        or cmd.program in ("at", "batch")
        or ("xargs" in cmd.wrappers and is_executor(cmd.program))
    )


def download_to_shell(cmd: SimpleCommand) -> Violation | None:
    program = cmd.program
    downloaded = [p for p in cmd.substituted if p in DOWNLOADERS]
    if downloaded and (is_executor(program) or is_dynamic(program) or cmd.carrier):
        return Violation(
            rule="download-to-shell",
            reason=f"{program} runs what {downloaded[0]} downloads (substitution)",
        )
    if _runs_stdin(cmd):
        feeders = [name for name in cmd.feeders if name in DOWNLOADERS]
        if feeders:
            return Violation(
                rule="download-to-shell",
                reason=f"{program} runs what {feeders[0]} downloads (pipe)",
            )
    return None


def decoder_to_shell(cmd: SimpleCommand) -> Violation | None:
    program = cmd.program
    decoded = [p for p in cmd.substituted if p in DECODERS]
    if decoded and (is_executor(program) or unresolved_program(program) or cmd.carrier or _runs_stdin(cmd)):
        return Violation(
            rule="decoder-to-shell", reason=f"{program} runs what {decoded[0]} produces (substitution)"
        )
    if _runs_stdin(cmd):
        feeders = [name for name in cmd.feeders if name in DECODERS or is_executor(name)]
        if feeders:
            return Violation(
                rule="decoder-to-shell", reason=f"{program} runs what {feeders[0]} produces (pipe)"
            )
    return None


_PURE_VARIABLE = re.compile(r"\s*\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)\s*")


def opaque_script(cmd: SimpleCommand) -> Violation | None:
    """``eval "$X"``/``sh -c "$X"`` with ``X`` unknown: the script itself cannot be seen."""
    if not cmd.carrier or not (cmd.program == "eval" or cmd.program in SHELLS):
        return None
    carried = inline_script(cmd.argv)
    script = carried[0] if carried is not None else ""
    if _PURE_VARIABLE.fullmatch(script):
        return Violation(
            rule="dynamic-command", reason=f"{cmd.program} runs {script.strip()!r}, which cannot be known"
        )
    return None


#: Programs that run or install (running its scripts) the file they are given.
_INSTALLS_FILE = frozenset({"dpkg", "rpm", "apt", "apt-get", "yum", "dnf", "zypper", "installer", "msiexec"})
_EXTRACTORS = frozenset({"tar", "bsdtar", "gtar", "unzip", "7z", "cpio", "gunzip", "bunzip2", "unxz"})


def _downloaded_names(cmd: SimpleCommand) -> list[str]:
    """Files a downloader names after the URL: ``curl -O``/``-LO``, ``wget URL`` (no ``-O``)."""
    urls = [a for a in cmd.argv[1:] if "://" in a]
    remote_name = cmd.program == "wget" and not any(
        a.startswith(("-O", "--output-document")) for a in cmd.argv
    )
    remote_name = remote_name or any(
        a in ("--remote-name", "--remote-name-all") or re.fullmatch(r"-[a-zA-Z]*O[a-zA-Z]*", a)
        for a in cmd.argv
    )
    return [posixpath.basename(u.split("?", 1)[0].rstrip("/")) for u in urls] if remote_name else []


def run_later(commands: Sequence[SimpleCommand], ctx: RuleContext) -> Violation | None:
    """A file written from a download or decoder, then run (``curl -o x.sh URL; sh x.sh``), installed
    (``wget URL/x.deb && dpkg -i x.deb``), or taken from an archive a download unpacked
    (``curl URL | tar xz && ./p/install``)."""
    from agent_fleet.policy.rules._files import written_words

    produced: dict[str, str] = {}
    unpacked: list[str] = []  # directories a downloaded archive was unpacked into
    for cmd in commands:
        sources = [name for name in (cmd.program, *cmd.feeders) if name in DOWNLOADERS or name in DECODERS]
        if sources:
            words = [r.target for r in cmd.redirects if r.op in (">", ">>", ">|", "&>", "&>>")]
            words += written_words(cmd.argv) + _downloaded_names(cmd) if cmd.program in DOWNLOADERS else []
            for word in words:
                produced[posixpath.basename(word.rstrip("/"))] = sources[0]
        operands = [arg for arg in cmd.argv[1:] if not arg.startswith("-")]
        from_download = bool(sources) or any(posixpath.basename(o) in produced for o in operands)
        if cmd.program in _EXTRACTORS and from_download:
            values = [
                cmd.argv[i + 1] for i, a in enumerate(cmd.argv[:-1]) if a in ("-C", "--directory", "-d")
            ]
            unpacked += values or ["."]
            continue
        if not produced and not unpacked:
            continue
        runs = [cmd.program]
        if is_executor(cmd.program) or cmd.program in SHELLS or cmd.program in _INSTALLS_FILE:
            runs += operands[:1] if cmd.program not in _INSTALLS_FILE else operands
        raw = next((w for w in cmd.written if "/" in w and posixpath.basename(w) == cmd.program), "")
        for run in runs:
            source = produced.get(posixpath.basename(run))
            if source is not None:
                rule = "download-to-shell" if source in DOWNLOADERS else "decoder-to-shell"
                return Violation(rule=rule, reason=f"{run!r} runs a file written by {source}")
        for run in [raw, *runs[1:]]:
            inside = any(
                (d == "." and "/" in run and not run.startswith(("/", "~", "$")))
                or posixpath.normpath(run).startswith(posixpath.normpath(d).rstrip("/") + "/")
                for d in unpacked
            )
            if run and inside:
                return Violation(
                    rule="download-to-shell", reason=f"{run!r} runs a file from a downloaded archive"
                )
    return None


_MAKES = frozenset({"make", "gmake", "bmake"})


def _clone_dir(argv: Sequence[str]) -> str | None:
    """The directory ``git clone URL [DIR]`` makes: DIR, or the URL's last component without ``.git``."""
    from agent_fleet.policy.rules._writes import split_options

    rest = list(argv[argv.index("clone") + 1 :])
    _, operands = split_options(
        rest, "obcujl", ("--origin", "--branch", "--config", "--depth", "--template", "--reference")
    )
    if len(operands) > 1:
        return posixpath.normpath(operands[1])
    if operands:
        name = posixpath.basename(operands[0].rstrip("/").split(":")[-1]).removesuffix(".git")
        return name or None
    return None


def _under(word: str, roots: Sequence[str]) -> bool:
    path = posixpath.normpath(word)
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def cloned_then_run(commands: Sequence[SimpleCommand]) -> Violation | None:
    """A repository cloned and then run by the same command (``git clone URL r && cd r && ./install.sh``,
    ``bash r/setup.sh``, ``make -C r install``): code fetched on the spot, run with no review."""
    clones: list[str] = []
    inside = False
    for cmd in commands:
        if cmd.program == "git" and "clone" in cmd.argv:
            found = _clone_dir(cmd.argv)
            clones += [found] if found else []
            continue
        if not clones:
            continue
        operands = [arg for arg in cmd.argv[1:] if not arg.startswith("-")]
        if cmd.program in ("cd", "pushd"):
            inside = bool(operands) and _under(operands[0], clones)
            continue
        raw = next((w for w in cmd.written if "/" in w and posixpath.basename(w) == cmd.program), "")
        runs = [raw] if raw else []
        if cmd.program in SHELLS or cmd.program in ("source", ".") or is_executor(cmd.program):
            runs += operands[:1]
        if cmd.program in _MAKES:
            values = [
                cmd.argv[i + 1] for i, a in enumerate(cmd.argv[:-1]) if a in ("-C", "-f", "--directory")
            ]
            runs += values
            if inside:
                runs.append(".")
        for word in runs:
            if _under(word, clones) or (inside and word and not word.startswith(("/", "~", "$"))):
                return Violation(
                    rule="download-to-shell",
                    reason=f"{cmd.program} runs {word!r} from a repository cloned by the same command",
                )
    return None


#: Programs whose way of starting a shell is a known escape (GTFOBins): the shell they start runs
#: whatever reaches it, which nothing here can see.
_ESCAPES = frozenset(
    {"find", "awk", "gawk", "mawk", "nawk", "vim", "vi", "nvim", "ex", "less", "more", "man", "script"}
    | {"nsenter", "chroot", "unshare", "capsh", "setpriv", "flock", "ionice", "taskset", "expect", "gdb"}
    | {"python", "python3", "perl", "ruby", "node", "php", "lua", "tclsh", "socat", "git"}
)


def shell_escape(cmd: SimpleCommand) -> Violation | None:
    """A shell with nothing to run (no ``-c``, no script, no known input) started by another program:
    ``find . -exec /bin/sh -p \\;``, ``awk 'BEGIN{system("/bin/sh")}'``, ``script -qc bash``."""
    if cmd.program not in SHELLS or cmd.carrier or cmd.feeders or cmd.stdin:
        return None
    operands = [a for a in cmd.argv[1:] if not a.startswith(("-", "+"))]
    escapes = [w for w in cmd.wrappers if w in _ESCAPES]
    if operands or not escapes or any(r.op in ("<", "<<", "<<-", "<<<") for r in cmd.redirects):
        return None
    return Violation(rule="opaque-code", reason=f"{escapes[-1]} starts an interactive shell")


_VARIABLE_WORD = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(?:\[(?:[@*]|\d+)\])?\}?")


def lone_dynamic(cmd: SimpleCommand) -> Violation | None:
    """``$cmd`` or ``"${a[@]}"`` alone, with a value we cannot know (``read``, ``printf -v``,
    ``readarray``, the environment): a whole command line nobody can see, like ``eval "$cmd"``. And a
    program word that is still a decoder's or a download's output, by way of a variable
    (``x=$(base64 -d <<< ...); $x``)."""
    inner = re.match(r"(?:\$\(|`)\s*([\w.-]+)", cmd.program)
    if inner is not None and (inner.group(1) in DECODERS or inner.group(1) in DOWNLOADERS):
        rule = "download-to-shell" if inner.group(1) in DOWNLOADERS else "decoder-to-shell"
        return Violation(rule=rule, reason=f"the command is what {inner.group(1)} produces")
    if len(cmd.argv) != 1 or cmd.carrier or not _VARIABLE_WORD.fullmatch(cmd.program):
        return None  # `eval "$(ssh-agent -s)"`: a substitution's output is the substitution rules' case
    return Violation(
        rule="dynamic-command", reason=f"{cmd.program!r} runs a command line that cannot be known"
    )
