"""Judges for code of other languages given inline (``python -c``, ``perl -e``, ``node -e``, awk
programs, here-documents fed to an interpreter): reverse and bind shells, fork or spawn loops, enormous
allocations, and code that reads local data and sends it away. Regular expressions over the code:
these languages are not parsed, so the patterns name the calls such code cannot do without.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import SimpleCommand
from agent_fleet.policy.packs._argv import JudgeContext, option_values, split_args

__all__ = [
    "inline_code",
    "judge_inline_file_server",
    "judge_inline_fork",
    "judge_inline_shell",
    "judge_inline_upload",
]

_SOCKET = re.compile(
    r"socket\.socket|socket\(|TCPSocket|TCPServer|fsockopen|stream_socket_client|IO::Socket|Socket::INET"
    r"|socket::|net\.(connect|Socket|createConnection|createServer)|/inet/tcp|UDPSocket|new\s+Socket\("
    r"|require\(\s*['\"](?:node:)?net['\"]\s*\)|from\s+['\"](?:node:)?net['\"]|Deno\.connect|Bun\.connect"
    r"|use\s+Socket|require\s*\(?\s*['\"]socket|s_client|Net::TCP",
    re.IGNORECASE,
)
_EXEC = re.compile(
    r"subprocess|os\.dup2|dup2\(|pty\.spawn|os\.system|os\.exec|popen|proc_open|shell_exec|passthru"
    r"|/bin/(ba|z|da)?sh|cmd\.exe|powershell|child_process|\bspawn\b|\bexec\s*[\(\"'{ ]"
    r"|os\.execute|system\s*\("
    r"|open\s*\(\s*STDIN|\bsh\s+-i\b|fdopen|\bsystem\b",
    re.IGNORECASE,
)
_FORK = re.compile(r"\bfork\b|pcntl_fork")
_LOOP = re.compile(r"\bwhile\b|\bfor\b|\bloop\b|\buntil\b|\.times\b|setInterval|\brepeat\b|\bgoto\b")
_INLINE_OPTIONS = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "php": ("-r",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "deno": (),
    "bun": ("-e", "--eval"),
    "lua": ("-e",),
    "luajit": ("-e",),
    "pwsh": ("-c", "-Command", "-command"),
    "tclsh": (),
    "awk": (),
    "gawk": (),
}


def inline_code(cmd: SimpleCommand, argv: Sequence[str]) -> list[str]:
    """The code an interpreter runs from its arguments or from a here-document on standard input."""
    program = re.sub(r"[0-9.]+$", "", argv[0])
    options = _INLINE_OPTIONS.get(program)
    if options is None:
        return []
    texts = option_values(argv[1:], options) if options else []
    if program in ("awk", "gawk"):
        positionals = split_args(argv[1:], ("-F", "-v", "-f")).positionals
        texts.extend(positionals[:1])
    if program == "deno" and len(argv) > 2 and argv[1] == "eval":
        texts.append(argv[2])
    if program in ("ruby", "perl", "python", "php") and not texts:
        texts.extend(r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<"))
        if len(argv) > 1 and argv[1] == "-":
            texts.extend(" ".join(a[1:]) for a in cmd.stdin if a and a[0] in ("echo", "printf"))
    return texts


def judge_inline_shell(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for code in inline_code(cmd, argv):
        if _SOCKET.search(code) and _EXEC.search(code):
            return f"{argv[0]} inline code connecting a socket to a shell or program (reverse/bind shell)"
    return None


_SPAWN = re.compile(
    r"child_process|\bspawn|subprocess|Popen|\bsystem\s*\(|os\.exec|\bexec\s*\("
    r"|Process\.start|Process\s*\(|multiprocessing|Thread\s*\(|Worker\s*\("
)
_ENDLESS = re.compile(
    r"while\s*\(?\s*(true|1|True|!0)\s*\)?|for\s*\(\s*;\s*;\s*\)|\bloop\s*(\{|do)|setInterval|repeat\s*\{"
    r"|iter\s*\(\s*int\s*,|itertools\.count|while\s*:\s*|\bredo\b"
)
#: Code that keeps more each time round: appends, pushes, concatenation onto itself.
_GROWS = re.compile(
    r"\.(?:append|push|extend|insert|unshift|add|concat|put|set)\s*\(|\bpush\s*\(?\s*@|<<\s*[\"'\w(\[]"
    r"|\+=|\*=|\.=|\bStringBuilder\b|\bList\.append|\bbytearray\("
)
_EXITS = re.compile(r"\bbreak\b|\bexit\b|\breturn\b|\blast\b|\bthrow\b|\braise\b|sys\.exit|process\.exit")
_HUGE_ALLOC = re.compile(
    r"(\*|\bx|bytearray\(|bytes\(|alloc\w*\(|Array\(|Buffer\.alloc\w*\(|zeros\(|ones\(|empty\(|repeat\()"
    r"\s*\(?\s*(?:(?:10\s*\*\*\s*|1e)(?:1[0-9]|[2-9][0-9])|2\s*\*\*\s*(?:3[3-9]|[4-9][0-9])|1\s*<<\s*(?:3[3-9]|[4-9][0-9]))\b"
)


def judge_inline_fork(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for code in inline_code(cmd, argv):
        if _SOCKET.search(code):
            continue  # a network program: the exposure pack judges it
        if _FORK.search(code) and _LOOP.search(code):
            return f"{argv[0]} inline code forking in a loop (fork bomb)"
        if _SPAWN.search(code) and _ENDLESS.search(code):
            return f"{argv[0]} inline code starting processes in an endless loop"
        if _HUGE_ALLOC.search(code):
            return f"{argv[0]} inline code allocating an enormous amount of memory"
        if _ENDLESS.search(code) and _GROWS.search(code) and not _EXITS.search(code):
            return f"{argv[0]} inline code growing memory in an endless loop"
    return None


_READS_FILE = re.compile(
    r"\bopen\s*\(|read_text|read_bytes|readFileSync|readFile\(|File\.read|IO\.read|file_get_contents"
    r"|Get-Content|\bslurp\b|<\$fh>|os\.environ|process\.env|ENV\[|getenv"
)
_SENDS = re.compile(
    r"requests\.(post|put|patch)|urlopen|http\.client|httpx\.(post|put)|\.request\(|fetch\(|axios\.(post|put)"
    r"|Net::HTTP|HTTParty\.(post|put)|LWP::|curl_exec|Invoke-(WebRequest|RestMethod)|socket\.|\.sendall\(|ftplib"
    r"|smtplib|paramiko|boto3|upload_file|put_object",
    re.IGNORECASE,
)
_CODE_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)


def judge_inline_upload(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for code in inline_code(cmd, argv):
        if not (_READS_FILE.search(code) and _SENDS.search(code)):
            continue
        hosts = [host_of(url) for url in _CODE_URL.findall(code)]
        if hosts and all(h is not None and ctx.hosts.trusted(h) for h in hosts):
            continue
        target = next((h for h in hosts if h), "the network")
        return f"{argv[0]} inline code reading local data and sending it to {target}"
    return None


_LISTENS = re.compile(
    r"createServer|\.listen\s*\(|HTTPServer|http\.server|SimpleHTTPRequestHandler|TCPServer|serve_forever"
    r"|Deno\.serve|Bun\.serve|WEBrick|HTTPServer|-run\s+-e\s+httpd|\bbind\s*\("
)
_SERVED_ROOT = re.compile(
    r"homedir\(\)|expanduser\(\s*['\"]~['\"]\s*\)|Path\.home\(\)|Dir\.home|ENV\[['\"]HOME|process\.env\.HOME"
    r"|getenv\(\s*['\"]HOME|\$ENV\{HOME\}|chdir\(\s*['\"]/['\"]\s*\)|directory\s*=\s*['\"](/|~)['\"]"
    r"|DocumentRoot\s*=>\s*['\"](/|~)"
)


def judge_inline_file_server(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for code in inline_code(cmd, argv):
        if _LISTENS.search(code) and _SERVED_ROOT.search(code):
            return f"{argv[0]} inline code serving the home directory or / over the network"
    return None
