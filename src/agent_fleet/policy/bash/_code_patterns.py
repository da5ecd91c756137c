"""Inline code of the languages ``_code`` does not parse (Perl, Ruby, Node, PHP, Lua, Tcl, Julia,
PowerShell, AppleScript, R ...), read by patterns: the calls such code cannot do without.

A call that runs a command (``system``, ``execSync``, ``os.execute``, ``exec`` ...) becomes the shell
text or argv it runs when its arguments are string literals, joined across concatenation (``"r"."m"``,
``"r" + "m"``, ``"r" .. "m"``); an argument that is not a literal becomes an unknown word, and a
command that is not a literal at all is opaque. Writes, removals, truncation, links, kills and forks
become their shell equivalents; code that evaluates decoded or downloaded text is opaque.
"""

from __future__ import annotations

import posixpath
import re

from agent_fleet.policy.bash._code import OPAQUE_TEXT, SQL_START, UNKNOWN, Inner

__all__ = ["literal_paths", "patterns"]

_STRING = (
    r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`"""
    # Ruby's %q(...)/%Q{...}/%(...) and Perl's q(...)/qq(...): strings too.
    r"""|%[qQ]?\(((?:[^()\\]|\\.)*)\)|%[qQ]?\{((?:[^{}\\]|\\.)*)\}|%[qQ]?\[((?:[^\[\]\\]|\\.)*)\]"""
    r"""|\bqq?\(((?:[^()\\]|\\.)*)\)|\bqq?\{((?:[^{}\\]|\\.)*)\})"""
)
_RUN_SITE = re.compile(
    r"\b(?:system|exec|execSync|spawnSync|execFileSync|spawn|execFile|popen|shell_exec|passthru|proc_open"
    r"|qx|pcntl_exec|IO\.popen|Open3\.\w+|%x|os\.execute|io\.popen|exec_command|Process\.(?:start|run)"
    r"|Start-Process|do shell script|shell-command|call-process|start-process|process-lines)(?!\w)"
    r"\s*[({]?\s*"
)
_RUN_ANY = re.compile(
    r"\b(?:system|execSync|spawnSync|execFileSync|shell_exec|passthru|proc_open|popen|pcntl_exec"
    r"|child_process|os\.execute|io\.popen|Open3|Process\.(?:start|run)|exec\s*\(|spawn\s*\()"
)
#: A run call whose command is not a literal (``system $cmd``, ``os.execute(cmd)``): opaque. Names a
#: method could share (``re.exec(s)``, ``spawn``) count only with a literal, as before.
_RUN_OPAQUE = re.compile(
    r"\b(?:system|execSync|spawnSync|execFileSync|shell_exec|passthru|proc_open|popen|pcntl_exec"
    r"|os\.execute|io\.popen|IO\.popen|Invoke-Expression|iex)\b"
)
#: A process function named as a string (``call_user_func("system", ...)``, ``cp['exec' + 'Sync']``).
_BY_NAME = re.compile(
    r"['\"](?:system|exec|shell_exec|passthru|popen|proc_open|execSync|spawnSync|spawn|execFile|execFileSync)"
    r"['\"]|(?:child_process|subprocess|Kernel|os)['\"]?\)?\s*\[\s*['\"][^'\"]*['\"]\s*\+"
    r"|\.send\(\s*:(?:system|exec|spawn|`)|\bObject\.getOwnPropertyNames\(\s*require"
)
_CONCAT = re.compile(r"\s*(\.\.|\.|\+|\*)\s*")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh"})
_BRACKET = re.compile(r"\[\s*")
_NEXT_ARG = re.compile(r"\s*,\s*(?:\[\s*)?")
#: Expressions for the home directory in these languages.
_HOME_EXPR = re.compile(
    r"\s*(?:(?:require\(\s*['\"]os['\"]\s*\)|os)\.homedir\(\)|Dir\.home|ENV\[\s*['\"]HOME['\"]\s*\]"
    r"|process\.env\.HOME|\$ENV\{HOME\}|getenv\(\s*['\"]HOME['\"]\s*\)|os\.getenv\(\s*['\"]HOME['\"]\s*\)"
    r"|Deno\.env\.get\(\s*['\"]HOME['\"]\s*\)|homedir\(\)|\$HOME|\$env:HOME|~(?=[\s)'\",]))"
)


def _argument(code: str, pos: int) -> tuple[str | None, int]:
    """One argument at ``pos``: a literal (joined across concatenation; a part that is not a literal
    becomes ``UNKNOWN``), ``~`` for a home-directory expression, or ``None`` when it is not known."""
    home = _HOME_EXPR.match(code, pos)
    literal = _LITERAL.match(code, pos)
    if literal is None and home is None:
        return None, pos
    text = "~" if literal is None else _first_string(literal)
    end = literal.end() if literal is not None else (home.end() if home is not None else pos)
    pos = end
    while (op := _CONCAT.match(code, pos)) is not None:
        more = _LITERAL.match(code, op.end())
        if more is not None:
            text += _first_string(more)
            pos = more.end()
            continue
        if op.group(1) != "." or code[op.end() : op.end() + 1] == "$":
            text += UNKNOWN  # `"rm -rf " .. os.getenv("X")`, `"rm " . $dir`
        break
    return text, pos


def _target(code: str, pos: int) -> str:
    """The path a file call names at ``pos``: a literal or home expression, a bare path, else unknown."""
    word, _ = _argument(code, pos)
    if word is None:
        bare = re.match(r"\s*([~/][^\s;,)\]'\"]*)", code[pos:])
        word = bare.group(1) if bare else UNKNOWN
    return word


def _run_calls(code: str) -> list[Inner]:
    found: list[Inner] = []
    for site in _RUN_SITE.finditer(code):
        pos = site.end()
        bracket = _BRACKET.match(code, pos)  # `spawnSync(['rm', '-rf', '/'])`: the argv as a list
        pos = bracket.end() if bracket is not None else pos
        first, pos = _argument(code, pos)
        if first is None:
            if _RUN_OPAQUE.match(code, site.start()):
                found.append(Inner("opaque", text="inline code runs a command that is not a literal"))
            continue
        words = [first]
        while (comma := _NEXT_ARG.match(code, pos)) is not None and code[
            comma.end() : comma.end() + 1
        ] != "{":
            word, after = _argument(code, comma.end())
            if word is None:
                if re.match(r"[\w$@]", code[comma.end() : comma.end() + 1]):
                    words.append(UNKNOWN)  # `spawn('rm', ['-rf', os.homedir() + x])`
                break
            words.append(word)
            pos = after
        if posixpath.basename(words[0].split(" ", 1)[0]) in _SHELLS and len(words[0].split()) == 1:
            found.append(Inner("opaque", text="inline code starts an interactive shell"))
        elif len(words) > 1:
            found.append(Inner("argv", argv=tuple(words)))
        else:
            found.append(Inner("script", text=words[0]))
    return found


_BACKTICK = re.compile(
    r"`((?:[^`\\]|\\.)+)`|(?:\bqx|%x)\s*(?:\((.*?)\)|\{(.*?)\}|\[(.*?)\]|/(.*?)/|\|(.*?)\||<(.*?)>)",
    re.DOTALL,
)
_WRITE_PATTERN = re.compile(
    r"\b(?:writeFileSync|appendFileSync|writeFile|appendFile|createWriteStream|file_put_contents"
    r"|File\.write|IO\.write|Deno\.writeTextFile(?:Sync)?|Bun\.write|io\.open\s*\([^)]*['\"][wa]['\"]\s*\)"
    r"|File\.open(?=\s*\([^)]*,\s*['\"][wa+]))\s*\(?\s*"
)
_PRINT = re.compile(r"\b(?:print|printf|say)\s+(?:\{?\s*\$?\w+\s*\}?\s+)?")
_PERL_OPEN = re.compile(
    r"\bopen\s*\(?\s*(?:my\s+)?[$\w]+\s*,\s*['\"]\s*(?:>>?|\+<)\s*(?:([^'\",]+)['\"]|['\"]\s*,\s*['\"]([^'\"]+)['\"])"
)


def _home_form(text: str) -> str:
    """``$ENV{HOME}/.x``, ``$HOME/.x``, ``os.homedir()+'/.x'`` -> ``~/.x``; other text as it is."""
    match = re.match(r"\s*(?:\$ENV\{HOME\}|\$HOME|\$\{HOME\}|~)(/.*)", text)
    return "~" + match.group(1) if match else text.strip()


def _written_target(code: str, pos: int) -> str:
    """The file a write call names: its literal argument, or a home dotfile its expression builds."""
    literal = _LITERAL.match(code, pos)
    if literal is not None:
        return _home_form(_first_string(literal))
    argument = code[pos : pos + 200].split(",", 1)[0]
    dotfile = _HOME_DOTFILE.search(argument)
    return "~/" + dotfile.group(1) if dotfile else UNKNOWN


_REMOVE_PATTERN = re.compile(
    r"\b(?:rmtree|remove_tree|rm_rf|rm_r|rmSync|rmdirSync|unlinkSync|rimraf|rmdir|unlink|deleteSync"
    r"|File\.delete|FileUtils\.rm\w*|Deno\.remove\w*|os\.remove|delete_file|Remove-Item(?:\s+-\w+)*"
    r"|delete-directory|delete-file"
    r"|(?<=\.)rm|(?<![\w.])rm(?=\s*\())(?!\w)"
    r"\s*\(?\s*(?:\[\s*)?(?:glob\s*\(?\s*)?"
)
_SQL_CALL = re.compile(
    r"(?:\.|->|::)(?:query|exec|execute|executeQuery|run|raw|none|any|many|oneOrNone|unsafe|prepare|do"
    r"|exec_params|async_exec|executeSql|sql)\s*\(?\s*"
)
#: An environment variable read inside a printing call: `console.log(process.env.X)`, `puts ENV["X"]`.
_PRINTED_VARIABLE = re.compile(
    r"(?:console\.(?:log|info|error|warn|dir)|process\.std(?:out|err)\.write|\bputs|\bpp?|\bprint(?:f|_r)?"
    r"|\becho|\bsay|\bwarn|\bvar_dump|Write-(?:Host|Output))\b[^;\n]*?(?:process\.env\.([A-Za-z_]\w*)"
    r"|process\.env\[\s*['\"]([^'\"]+)['\"]|\bENV\[\s*['\"]([^'\"]+)['\"]|\bENV\.fetch\(\s*['\"]([^'\"]+)['\"]"
    r"|\$ENV\{\s*['\"]?(\w+)['\"]?\s*\}|getenv\(\s*['\"]([^'\"]+)['\"]|\$env:(\w+)|Deno\.env\.get\(\s*['\"]([^'\"]+))"
)
_TRUNCATE = re.compile(r"\b(?:truncate|truncateSync|ftruncate)(?!\w)\s*\(?\s*")
#: ``(target, link)`` calls: Node ``symlinkSync``, Perl/PHP ``symlink``/``link``, Ruby ``File.symlink``.
_LINK = re.compile(r"\b(symlinkSync|symlink|linkSync|link|File\.symlink|File\.link|ln_s)(?!\w)\s*\(?\s*")
_RENAME = re.compile(r"\b(?:renameSync|rename|File\.rename|FileUtils\.mv|move)(?!\w)\s*\(?\s*")
#: Code that fetches from the network, and code that evaluates text: together, downloaded code is run.
_FETCH = re.compile(
    r"\bfetch\s*\(|\bhttps?\.(?:get|request)\s*\(|require\(\s*['\"]https?['\"]\s*\)|LWP::|\bget\s*\(\s*['\"]https?:"
    r"|URI\.open|open-uri|Net::HTTP|file_get_contents\s*\(\s*['\"]https?:|curl_exec|urlopen|socket\.http"
    r"|io\.popen\s*\(\s*['\"](?:curl|wget)|Invoke-WebRequest|Invoke-RestMethod|\biwr\b|\birm\b|axios|got\(",
    re.IGNORECASE,
)
_EVALS = re.compile(
    r"\b(?:eval|instance_eval|class_eval|module_eval|loadstring|Invoke-Expression|iex)\b|\bFunction\s*\("
)
_INCLUDE_URL = re.compile(r"\b(?:include|require)(?:_once)?\s*\(?\s*['\"]https?://")
#: Tcl/Expect run bare words: ``exec rm -rf /home``.
_TCL_EXEC = re.compile(r"(?:^|[;\n\[{])\s*exec\s+(?![-({'\"\[$])([^;\n\]}]+)")
_FORK = re.compile(r"\bfork\b|\bpcntl_fork\b|Process\.fork|cluster\.fork")
_EVAL = re.compile(r"\b(?:eval|instance_eval|class_eval|Function|vm\.runIn\w+)\s*\(?\s*(?!['\"`])")
_DECODE = re.compile(
    r"base64|decode|\bu?npack|\bpack\b|atob|Buffer\.from|fromCharCode|\\x[0-9a-f]{2}|chr\(", re.I
)
_KILL_PATTERN = re.compile(
    r"\bkill\s*\(?\s*['\"]?(?:-?\d+|\w+)['\"]?\s*,\s*(-1|0|1)\b|\bkill\s+\d+\s*,\s*(-1|0|1)\b"
)
_NODE_KILL = re.compile(r"process\.kill\s*\(\s*(-1|0|1)\b")
_LITERAL = re.compile(_STRING)


def _first_string(match: re.Match[str]) -> str:
    return next((g for g in match.groups() if g is not None), "")


def patterns(code: str) -> list[Inner]:
    found: list[Inner] = []
    runs = _run_calls(code)
    found.extend(runs)
    if not runs and _RUN_ANY.search(code):
        found.append(Inner("opaque", text="inline code runs a command that is not a literal"))
    for match in _BACKTICK.finditer(code):
        text = next((g for g in match.groups() if g is not None), "")
        if "#{" in text or "${" in text:  # Ruby/JS interpolation: the command is built at run time
            found.append(Inner("opaque", text="inline code runs an interpolated command"))
        else:
            found.append(Inner("script", text=text))
    if _BY_NAME.search(code):
        found.append(Inner("opaque", text="inline code calls a process function by a computed name"))
    for match in _WRITE_PATTERN.finditer(code):
        written = _written_target(code, match.end())
        found.append(Inner("argv", argv=("tee", written)))
        literal = _LITERAL.match(code, match.end())
        comma = _NEXT_ARG.match(code, literal.end()) if literal is not None else None
        if comma is not None and written != UNKNOWN:  # `writeFileSync('x.sh', TEXT)`: what x.sh holds
            content, _ = _argument(code, comma.end())
            found.append(Inner("write", text=content or OPAQUE_TEXT, argv=(written,)))
    for match in _PERL_OPEN.finditer(code):
        written = _home_form(match.group(1) or match.group(2))
        found.append(Inner("argv", argv=("tee", written)))
        printed = [_argument(code, m.end())[0] for m in _PRINT.finditer(code, match.end())]
        if printed:  # `print $f "TEXT"` after the open
            text = "".join(p or OPAQUE_TEXT for p in printed)
            found.append(Inner("write", text=OPAQUE_TEXT if OPAQUE_TEXT in text else text, argv=(written,)))
    for match in _REMOVE_PATTERN.finditer(code):
        found.append(Inner("argv", argv=("rm", "-rf", _target(code, match.end()))))
    for match in _TRUNCATE.finditer(code):
        found.append(Inner("argv", argv=("truncate", "-s", "0", _target(code, match.end()))))
    for match in _LINK.finditer(code):
        target, pos = _argument(code, match.end())
        comma = _NEXT_ARG.match(code, pos)
        link = _argument(code, comma.end())[0] if comma is not None else None
        if target is not None and link is not None:
            flag = "-s" if "sym" in match.group(1) or match.group(1) == "ln_s" else "-f"
            found.append(Inner("argv", argv=("ln", flag, target, link)))
    for match in _RENAME.finditer(code):
        source, pos = _argument(code, match.end())
        comma = _NEXT_ARG.match(code, pos)
        dest = _argument(code, comma.end())[0] if comma is not None else None
        if source is not None:
            found.append(Inner("argv", argv=("mv", source, dest or UNKNOWN)))
    for match in _SQL_CALL.finditer(code):  # `client.query('DROP TABLE t')`: the database pack judges it
        literal = _LITERAL.match(code, match.end())
        statement = _first_string(literal) if literal is not None else ""
        if SQL_START.match(statement):
            found.append(Inner("argv", argv=("psql", "-c", statement)))
    for match in _PRINTED_VARIABLE.finditer(code):  # `console.log(process.env.TOKEN)` = printenv TOKEN
        found.append(Inner("argv", argv=("printenv", next(g for g in match.groups() if g is not None))))
    for match in _TCL_EXEC.finditer(code):
        found.append(Inner("script", text=match.group(1)))
    if (_EVALS.search(code) and _FETCH.search(code)) or _INCLUDE_URL.search(code):
        found.append(Inner("opaque", text="inline code evaluates code it downloads"))
    if _FORK.search(code):
        found.append(Inner("opaque", text="inline code forks processes"))
    if _EVAL.search(code) and _DECODE.search(code):
        found.append(Inner("opaque", text="inline code evaluates decoded text"))
    for match in (*_KILL_PATTERN.finditer(code), *_NODE_KILL.finditer(code)):
        pid = next(g for g in match.groups() if g is not None)
        found.append(Inner("argv", argv=("kill", "-9", pid)))
    return found


def literal_paths(code: str) -> list[Inner]:
    """Every string literal that looks like a path: read (``cat``) so credential rules see it."""
    found: list[Inner] = []
    for match in _LITERAL.finditer(code):
        text = _first_string(match)
        if text.startswith(("/", "~")) or "/." in text or text.startswith("."):
            found.append(Inner("argv", argv=("cat", text)))
    for match in _HOME_DOTFILE.finditer(code):  # HOME + '/.npmrc', "$ENV{HOME}/.netrc", homedir()+'/.aws'
        found.append(Inner("argv", argv=("cat", "~/" + match.group(1))))
    return found


_HOME_DOTFILE = re.compile(r"/(\.[A-Za-z][\w.-]*(?:/[\w.-]+)*)")
