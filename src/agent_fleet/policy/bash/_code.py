"""Inline code of other languages (``python -c``, ``python - <<EOF``, ``perl -e``, ``node -e`` ...) turned
into the shell-equivalent actions it performs, so the built-in rules judge them like any command.

Each finding is an ``Inner``: a shell text to parse (``os.system("rm -rf /")``), an argv
(``subprocess.run(["rm", "-rf", "/"])``), a synthetic argv standing for a file operation
(``shutil.rmtree(p)`` -> ``rm -rf p``, ``open(p, "w")`` -> ``tee p``, reading a credential path ->
``cat p``, ``os.kill(-1, 9)`` -> ``kill -9 -1``), or an opaque finding (code that runs code we cannot
see: ``exec(base64.b64decode(...))``, ``os.fork()``). A target that is not a literal becomes ``$?``, a
dynamic word the rules decline for destructive programs. Python is read with ``ast`` (constant strings,
``+``/f-strings of constants, ``os.path.join``, ``Path(...) / ...`` and names bound to constants are
resolved); other languages, and Python that does not parse, by patterns over the text.
"""

from __future__ import annotations

import ast
import posixpath
import re
import warnings
from dataclasses import dataclass
from typing import Literal

__all__ = ["Inner", "analyse_code", "code_language"]

UNKNOWN = "$?"
#: Inline code longer than this is not analysed (and so is declined as opaque).
MAX_CODE_CHARS = 128 * 1024


@dataclass(frozen=True, slots=True)
class Inner:
    """Something a command runs: ``script`` (shell text), ``argv``, or ``opaque`` (``text`` says why)."""

    kind: Literal["script", "argv", "opaque"]
    text: str = ""
    argv: tuple[str, ...] = ()
    positional: tuple[str, ...] | None = None


_LANGUAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(python|pypy)[0-9.]*"), "python"),
    (re.compile(r"perl[0-9.]*"), "perl"),
    (re.compile(r"ruby[0-9.]*|irb"), "ruby"),
    (re.compile(r"node|nodejs|deno|bun"), "node"),
    (re.compile(r"php[0-9.]*"), "php"),
    (re.compile(r"lua(jit)?[0-9.]*"), "lua"),
    (re.compile(r"tclsh[0-9.]*|wish|expect"), "tcl"),
    (
        re.compile(r"pwsh|powershell|osascript|Rscript|julia|groovy|jshell|scala|kotlin|emacs|guile|racket"),
        "other",
    ),
)
# (language, option letters whose value is code, long options whose value is code)
_CODE_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "python": ("c", ()),
    "perl": ("eE", ()),
    "ruby": ("e", ()),
    "node": ("ep", ("--eval", "--print")),
    "php": ("rB", ()),
    "lua": ("e", ()),
    "tcl": ("c", ()),
    "other": ("ceE", ("--command", "--eval", "-Command", "-command", "-e")),
}
_VALUE_LETTERS = {"python": "WXQ", "perl": "IMmxd", "ruby": "rICFE", "node": "r", "php": "dcz", "lua": "l"}


def code_language(program: str) -> str | None:
    for pattern, language in _LANGUAGES:
        if pattern.fullmatch(program):
            return language
    return None


def inline_codes(argv: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(language, code)`` for code given on the command line (``python -c CODE``, ``perl -e CODE``)."""
    if not argv:
        return []
    language = code_language(argv[0])
    if language is None:
        return []
    letters, longs = _CODE_OPTIONS[language]
    values = _VALUE_LETTERS.get(language, "")
    found: list[tuple[str, str]] = []
    args = argv[1:]
    if argv[0] in ("deno", "bun") and args[:1] == ("eval",):
        return [(language, " ".join(args[1:]))]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        name, eq, value = arg.partition("=")
        if name in longs:
            code = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            found.append((language, code))
            i += 1 if eq else 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        for j, letter in enumerate(arg[1:], start=1):
            if letter in letters:
                rest = arg[j + 1 :]
                code = rest if rest else (args[i + 1] if i + 1 < len(args) else "")
                found.append((language, code))
                if not rest:
                    i += 1
                break
            if letter in values:
                if j == len(arg) - 1:
                    i += 1
                break
        if language == "python" and found:
            break  # python -c CODE: the rest are sys.argv
        i += 1
    return found


# --------------------------------------------------------------------------------------------------
# Python, by its syntax tree.

_SHELL_CALLS = frozenset({"system", "popen", "getoutput", "getstatusoutput", "create_subprocess_shell"})
_EXEC_CALLS = frozenset(
    {"run", "call", "check_call", "check_output", "Popen", "spawn", "create_subprocess_exec"}
    | {"execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe"}
    | {"spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn"}
    | {"posix_spawnp", "startfile"}
)
_PROCESS_MODULES = frozenset({"os", "subprocess", "pty", "commands", "asyncio", "sh", "plumbum", "posix"})
_REMOVE_TREE = frozenset({"rmtree", "removedirs", "rm_rf", "rmdir_tree"})
_REMOVE = frozenset({"remove", "unlink", "rmdir"})
_MOVE = frozenset({"move", "rename", "replace", "renames"})
_COPY = frozenset({"copy", "copy2", "copyfile", "copytree", "copyfileobj"})
_WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to"})
_READ_METHODS = frozenset({"read_text", "read_bytes"})
_OPAQUE_CALLS = frozenset({"exec", "eval", "compile", "execfile", "__import__", "getattr", "import_module"})
_KILL = frozenset({"kill", "killpg"})
_SHELL_NAMES = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "ash"})


class _Python(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Inner] = []
        self.names: dict[str, str] = {}
        self.modules: dict[str, str] = {}  # alias -> module (`import subprocess as sp`)
        self.imported: dict[str, str] = {}  # name -> module (`from shutil import rmtree`)
        self.renamed: dict[str, str] = {}  # `from os import system as run`: run -> system

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.modules[alias.asname or alias.name] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.imported[alias.asname or alias.name] = (node.module or "").split(".")[0]
            if alias.asname:
                self.renamed[alias.asname] = alias.name

    def literal(self, node: ast.AST | None) -> str | None:
        match node:
            case ast.Constant(value=str() as value):
                return value
            case ast.Constant(value=int() as number) if not isinstance(number, bool):
                return str(number)
            case ast.Name(id=name):
                return self.names.get(name)
            case ast.JoinedStr(values=values):
                parts = [self.literal(v.value if isinstance(v, ast.FormattedValue) else v) for v in values]
                return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
            case ast.BinOp(op=ast.Add(), left=left, right=right):
                a, b = self.literal(left), self.literal(right)
                return None if a is None or b is None else a + b
            case ast.BinOp(op=ast.Div(), left=left, right=right):
                a, b = self.literal(left), self.literal(right)
                return None if a is None or b is None else posixpath.join(a, b)
            case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=int() as number)):
                return str(-number)
            case ast.Call(func=func, args=args):
                name = _call_name(func)
                if name in ("join",) and args:
                    parts = [self.literal(arg) for arg in args]
                    if all(p is not None for p in parts):
                        return posixpath.join(*[p or "" for p in parts])
                if (
                    name in ("expanduser", "resolve", "absolute")
                    and isinstance(func, ast.Attribute)
                    and not args
                ):
                    return self.literal(func.value)  # `Path('~').expanduser()`: the path it is called on
                if name in ("expanduser", "Path", "PurePath", "PosixPath", "abspath", "realpath", "str"):
                    return self.literal(args[0]) if args else ("." if name != "str" else None)
                if name == "home":
                    return "~"
                if name == "joinpath" and isinstance(func, ast.Attribute):
                    parts = [self.literal(func.value), *(self.literal(arg) for arg in args)]
                    if all(p is not None for p in parts):
                        return posixpath.join(*[p or "" for p in parts])
                    return None
                if name in ("expanduser", "resolve", "absolute") and isinstance(func, ast.Attribute):
                    return self.literal(func.value)
                if name in ("getcwd", "cwd"):
                    return "."
                return None
            case ast.Attribute(attr="home"):
                return "~"
            case _:
                return None

    def words(self, node: ast.AST | None) -> tuple[str, ...] | None:
        """A literal list of words; elements that are not literal become unknown words."""
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            return tuple(self._word(element) for element in node.elts)
        return None

    def _word(self, node: ast.AST) -> str:
        if isinstance(node, ast.Attribute) and node.attr == "executable":
            return "python3"  # sys.executable
        value = self.literal(node)
        return UNKNOWN if value is None else value

    def _target(self, node: ast.AST | None) -> str:
        value = self.literal(node)
        return UNKNOWN if value is None else value

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.literal(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if value is not None:
                    self.names[target.id] = value
                else:
                    self.names.pop(target.id, None)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _call_name(node.func)
        receiver = _receiver(node.func)
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            receiver = self.modules.get(node.func.value.id, receiver)
            if receiver == "<path>" and node.func.value.id in self.modules.values():
                receiver = node.func.value.id
        elif isinstance(node.func, ast.Name) and node.func.id in self.imported:
            receiver = self.imported[node.func.id]
            name = self.renamed.get(node.func.id, node.func.id)
        args = node.args
        first = args[0] if args else None
        if name in _SHELL_CALLS or (name in _EXEC_CALLS and receiver in _PROCESS_MODULES | {""}):
            self._process(name, node, first)
        elif name in _REMOVE_TREE:
            self.found.append(Inner("argv", argv=("rm", "-rf", self._target(first))))
        elif name in _REMOVE and (receiver in ("os", "shutil", "posix", "pathlib") or receiver == "<path>"):
            target = self._target(first) if receiver != "<path>" else self._target(_path_of(node.func))
            self.found.append(Inner("argv", argv=("rm", "-rf" if target == UNKNOWN else "-f", target)))
        elif name in _MOVE and receiver in ("os", "shutil", "<path>") and args:
            source = self._target(_path_of(node.func)) if receiver == "<path>" else self._target(first)
            dest = self._target(args[0] if receiver == "<path>" else (args[1] if len(args) > 1 else None))
            self.found.append(Inner("argv", argv=("mv", source, dest)))
        elif name in _COPY and receiver == "shutil" and len(args) > 1:
            self.found.append(Inner("argv", argv=("cp", "-r", self._target(first), self._target(args[1]))))
        elif name in ("chmod", "chown", "lchown") and receiver in ("os", "shutil") and first is not None:
            self.found.append(Inner("argv", argv=("chmod", "-R", "777", self._target(first))))
        elif name in ("truncate", "ftruncate") and receiver in ("os", "posix") and first is not None:
            self.found.append(Inner("argv", argv=("truncate", "-s", "0", self._target(first))))
        elif name in ("symlink", "link") and receiver in ("os", "posix") and len(args) > 1:
            flag = "-s" if name == "symlink" else "-f"
            self.found.append(Inner("argv", argv=("ln", flag, self._target(first), self._target(args[1]))))
        elif name in _KILL and receiver in ("os", "posix") and first is not None:
            self.found.append(Inner("argv", argv=("kill", "-9", self._target(first))))
        elif name == "fork" or name == "forkpty":
            self.found.append(Inner("opaque", text="inline code forks processes"))
        elif name == "open" and receiver in ("", "io", "os", "codecs") and first is not None:
            mode = self.literal(args[1]) if len(args) > 1 else None
            for keyword in node.keywords:
                if keyword.arg in ("mode", "flags"):
                    mode = self.literal(keyword.value)
            path = self._target(first)
            writes = (mode is None and receiver == "os") or (
                mode is not None and bool(set(mode) & set("wax+"))
            )
            self.found.append(Inner("argv", argv=("tee", path) if writes else ("cat", path)))
        elif name in _WRITE_METHODS and receiver == "<path>":
            self.found.append(Inner("argv", argv=("tee", self._target(_path_of(node.func)))))
        elif name in _READ_METHODS and receiver == "<path>":
            self.found.append(Inner("argv", argv=("cat", self._target(_path_of(node.func)))))
        elif name in _OPAQUE_CALLS and args:
            code = self.literal(first)
            if name in ("exec", "eval", "compile", "execfile") and code is not None:
                self.found.extend(analyse_code("python", code, _depth=1))
            elif name in ("__import__", "import_module") and code is not None:
                pass
            elif name == "getattr" and len(args) > 1:
                attr = self.literal(args[1])
                if attr is None or attr in _SHELL_CALLS | _EXEC_CALLS | _REMOVE_TREE | _REMOVE:
                    self.found.append(Inner("opaque", text="getattr of a process or file-removal call"))
            else:
                self.found.append(Inner("opaque", text=f"{name}() of code that is not a literal"))

    def _process(self, name: str, node: ast.Call, first: ast.AST | None) -> None:
        if first is None:
            return
        words = self.words(first)
        if words is not None:
            self._run(words)
            return
        text = self.literal(first)
        if text is None:
            self.found.append(Inner("opaque", text=f"{name}() of a command that is not a literal"))
        elif name in _EXEC_CALLS and not name.startswith("create") and name[:4] in ("exec", "spaw", "posi"):
            listed = self.words(node.args[1]) if len(node.args) > 1 else None
            if listed is not None:
                self._run((text, *listed[1:]))
            else:
                rest = [self.literal(arg) for arg in node.args[1:]]
                self._run((text, *(p or UNKNOWN for p in rest[1:])))
        elif len(text.split()) == 1 and text.rsplit("/", 1)[-1] in _SHELL_NAMES:
            self.found.append(Inner("opaque", text=f"{name}() starts an interactive shell"))
        else:
            self.found.append(Inner("script", text=text))

    def _run(self, argv: tuple[str, ...]) -> None:
        if len(argv) == 1 and argv[0].rsplit("/", 1)[-1] in _SHELL_NAMES:
            self.found.append(Inner("opaque", text="inline code starts an interactive shell"))
        else:
            self.found.append(Inner("argv", argv=argv))


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _receiver(func: ast.AST) -> str:
    """``os`` for ``os.remove``, ``<path>`` for ``Path(x).unlink``/``p.unlink``, ``""`` for a bare name."""
    if not isinstance(func, ast.Attribute):
        return ""
    value = func.value
    if isinstance(value, ast.Name):
        return value.id if value.id in _PROCESS_MODULES | {"shutil", "io", "codecs"} else "<path>"
    if isinstance(value, ast.Call) and _call_name(value.func) == "__import__":
        arg = value.args[0] if value.args else None
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
    if isinstance(value, ast.Attribute) and value.attr in ("path",):
        return "os"
    return "<path>"


def _path_of(func: ast.AST) -> ast.AST | None:
    return func.value if isinstance(func, ast.Attribute) else None


def analyse_code(language: str, code: str, *, _depth: int = 0) -> list[Inner]:
    """What ``code`` in ``language`` would run or touch (see the module docstring)."""
    if _depth > 3:
        return [Inner("opaque", text="inline code nests too deeply")]
    if len(code) > MAX_CODE_CHARS:
        return [Inner("opaque", text=f"inline code longer than {MAX_CODE_CHARS} characters is not judged")]
    found: list[Inner] = []
    if language == "python":
        try:
            with warnings.catch_warnings():  # invalid escapes and the like: not ours to report
                warnings.simplefilter("ignore")
                tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        if tree is not None:
            visitor = _Python()
            try:
                visitor.visit(tree)
            except RecursionError:
                return [Inner("opaque", text="inline code nests too deeply")]
            found.extend(visitor.found)
            from agent_fleet.policy.bash._code_patterns import literal_paths

            found.extend(literal_paths(code))
            return found
    from agent_fleet.policy.bash._code_patterns import literal_paths, patterns  # it builds on Inner

    found.extend(patterns(code))
    found.extend(literal_paths(code))
    return found
