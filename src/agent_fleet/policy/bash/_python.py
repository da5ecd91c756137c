"""Python given inline, read with ``ast``: the shell-equivalent actions its calls perform (see ``_code``).

Constant strings, ``+``/f-strings of constants, ``os.path.join``, ``Path(...) / ...`` and names bound to
constants are resolved; loops over a directory listing bind their variable to a glob under it; files
opened for writing, and what is written to them, are recorded; SQL handed to a database driver becomes
``psql -c SQL``; a secret variable printed becomes ``printenv NAME``.
"""

from __future__ import annotations

import ast
import posixpath

from agent_fleet.policy.bash._code import OPAQUE_TEXT, SQL_START, UNKNOWN, Inner

__all__ = ["Python"]

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
#: Methods of database drivers and query builders that run the SQL they are given.
_SQL_CALLS = frozenset(
    {"execute", "executemany", "executescript", "exec_driver_sql", "query", "raw", "execute_sql", "run_sql"}
    | {"fetch", "fetchrow", "fetchval", "sql", "exec", "run"}
)
_SHELL_NAMES = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "ash"})


class Python(ast.NodeVisitor):
    """Collects ``found``: what the visited module would run or touch."""

    def __init__(self) -> None:
        self.found: list[Inner] = []
        self.names: dict[str, str] = {}
        self.modules: dict[str, str] = {}  # alias -> module (`import subprocess as sp`)
        self.imported: dict[str, str] = {}  # name -> module (`from shutil import rmtree`)
        self.renamed: dict[str, str] = {}  # `from os import system as run`: run -> system
        self.listings: set[str] = set()  # names bound to the entries of a listing (`files` of os.walk)
        self.handles: dict[str, str] = {}  # `with open(p, "w") as f`: f -> p

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

    # Loops over what a directory holds: the loop variable stands for those paths, a glob under the
    # directory (`for p in Path('.').rglob('*.pyc'): p.unlink()` removes `./**/*.pyc`, not anything).

    def _listed(self, node: ast.AST) -> str | None:
        """The paths an iterable of directory entries yields, as a glob, when its base is known."""
        if not isinstance(node, ast.Call):
            return None
        name = _call_name(node.func)
        args = node.args
        base: str | None
        if isinstance(node.func, ast.Attribute) and name in ("rglob", "glob", "iterdir", "walk"):
            module = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            if self.modules.get(module, module) in ("glob", "os"):
                pattern = self.literal(args[0]) if args else None
                if name == "walk":
                    return None if pattern is None else posixpath.join(pattern, "**")
                return pattern if name in ("glob",) else None
            base = self.literal(node.func.value)
            pattern = self.literal(args[0]) if args else "*"
            if base is None or pattern is None:
                return None
            if name == "rglob":
                return posixpath.join(base, "**", pattern)
            return posixpath.join(base, pattern if name == "glob" else "*")
        if name in ("glob", "iglob") and args and self.imported.get(_call_name(node.func)) == "glob":
            return self.literal(args[0])
        if name in ("listdir", "scandir", "walk"):
            base = self.literal(args[0]) if args else "."
            return None if base is None else posixpath.join(base, "**" if name == "walk" else "*")
        if name in ("sorted", "list", "reversed", "filter") and args:
            return self._listed(args[-1])
        return None

    def _elements(self, node: ast.AST) -> str | None:
        """What a loop over ``node`` binds: a glob for a directory listing (or a name bound to one's
        entries), ``{a,b}`` for a literal list of strings; ``None`` when not known."""
        if isinstance(node, ast.Name) and node.id in self.listings:
            return self.names.get(node.id)
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and node.elts:
            items = [self.literal(element) for element in node.elts]
            if all(item is not None and not set(item) & set("{},") for item in items):
                return items[0] if len(items) == 1 else "{" + ",".join(item or "" for item in items) + "}"
            return None
        return self._listed(node)

    def _bind(self, target: ast.AST, iterable: ast.AST) -> None:
        listed = self._elements(iterable)
        names = [target] if isinstance(target, ast.Name) else []
        if isinstance(target, ast.Tuple):  # `for root, dirs, files in os.walk(d)`: names of entries
            names = [element for element in target.elts if isinstance(element, ast.Name)]
        for i, name in enumerate(names):
            self.listings.discard(name.id)
            if listed is None:
                self.names.pop(name.id, None)
                continue
            self.names[name.id] = listed if i == 0 else "*"
            if i > 0:
                self.listings.add(name.id)  # `for f in files`: each entry's name

    def _opened_for_writing(self, node: ast.AST) -> str | None:
        """The path ``open(p, "w")`` (or a handle bound to one) writes, else ``None``."""
        if isinstance(node, ast.Name):
            return self.handles.get(node.id)
        if not isinstance(node, ast.Call) or _call_name(node.func) != "open":
            return None
        mode = self.literal(node.args[1]) if len(node.args) > 1 else None
        for keyword in node.keywords:
            if keyword.arg == "mode":
                mode = self.literal(keyword.value)
        if mode is None or not set(mode) & set("wax+"):
            return None
        return self._target(node.args[0] if node.args else None)

    def _content(self, node: ast.AST | None) -> str:
        if isinstance(node, ast.List | ast.Tuple):
            parts = [self.literal(element) for element in node.elts]
            return OPAQUE_TEXT if any(p is None for p in parts) else "".join(p or "" for p in parts)
        value = self.literal(node)
        return OPAQUE_TEXT if value is None else value

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            path = self._opened_for_writing(item.context_expr)
            if isinstance(item.optional_vars, ast.Name):
                if path is not None:
                    self.handles[item.optional_vars.id] = path
                else:
                    self.handles.pop(item.optional_vars.id, None)
        for statement in node.body:
            self.visit(statement)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._bind(node.target, node.iter)
        for statement in (*node.body, *node.orelse):
            self.visit(statement)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        for generator in node.generators:
            self.visit(generator.iter)
            self._bind(generator.target, generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

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
        self._judge_call(node, name, receiver, args, first)
        written = self._write_call(node, name)  # after the `tee` that stands for the write itself
        if written is not None:
            self.found.append(written)
        self.found.extend(self._printed_variables(node, name))

    def _sql(self, node: ast.Call, name: str, first: ast.AST | None) -> Inner | None:
        """``cursor.execute("DROP TABLE t")``, ``conn.execute(text("..."))``, ``metadata.drop_all(e)``: the
        SQL a database driver runs, as ``psql -c SQL`` (the database pack judges the statement)."""
        if not isinstance(node.func, ast.Attribute):
            return None
        if name == "drop_all":
            return Inner("argv", argv=("psql", "-c", "DROP TABLE every_table_of_the_metadata"))
        if name not in _SQL_CALLS:
            return None
        if isinstance(first, ast.Call) and _call_name(first.func) in ("text", "sql", "SQL") and first.args:
            first = first.args[0]
        statement = self.literal(first)
        if statement is None or SQL_START.match(statement) is None:
            return None
        return Inner("argv", argv=("psql", "-c", statement))

    def _judge_call(
        self, node: ast.Call, name: str, receiver: str, args: list[ast.expr], first: ast.AST | None
    ) -> None:
        sql = self._sql(node, name, first)
        if sql is not None:
            self.found.append(sql)
            return
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
                from agent_fleet.policy.bash._code import analyse_code

                self.found.extend(analyse_code("python", code, _depth=1))
            elif name in ("__import__", "import_module") and code is not None:
                pass
            elif name == "getattr" and len(args) > 1:
                attr = self.literal(args[1])
                if attr is None or attr in _SHELL_CALLS | _EXEC_CALLS | _REMOVE_TREE | _REMOVE:
                    self.found.append(Inner("opaque", text="getattr of a process or file-removal call"))
            else:
                self.found.append(Inner("opaque", text=f"{name}() of code that is not a literal"))

    def _environment_read(self, node: ast.AST) -> str | None:
        """The variable ``os.environ[X]``, ``os.environ.get(X)`` or ``os.getenv(X)`` reads, if named."""
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            return self.literal(node.slice)
        if isinstance(node, ast.Call) and node.args:
            name = _call_name(node.func)
            target = node.func.value if isinstance(node.func, ast.Attribute) else None
            if (name == "get" and target is not None and _is_environ(target)) or name == "getenv":
                return self.literal(node.args[0])
        return None

    def _printed_variables(self, node: ast.Call, name: str) -> list[Inner]:
        """``print(os.environ["TOKEN"])``: what ``printenv TOKEN`` shows (the shell rules judge it)."""
        if name not in ("print", "pprint", "write", "dump", "dumps") or (
            name == "write" and not _stdout(node)
        ):
            return []
        found: list[Inner] = []
        for arg in node.args:
            for child in ast.walk(arg):
                variable = self._environment_read(child)
                if variable is not None:
                    found.append(Inner("argv", argv=("printenv", variable)))
        return found

    def _write_call(self, node: ast.Call, name: str) -> Inner | None:
        """``open(p, "w").write(TEXT)``, ``f.write(TEXT)`` for a handle so opened, ``print(TEXT,
        file=f)``, ``Path(p).write_text(TEXT)``: the file and what it will hold."""
        func, args = node.func, node.args
        path: str | None = None
        content: ast.AST | None = args[0] if args else None
        if name in ("write", "writelines") and isinstance(func, ast.Attribute):
            path = self._opened_for_writing(func.value)
        elif name in ("write_text", "write_bytes") and isinstance(func, ast.Attribute):
            path = self._target(func.value)
        elif name == "print":
            handle = next((k.value for k in node.keywords if k.arg == "file"), None)
            path = self._opened_for_writing(handle) if handle is not None else None
            texts = [self.literal(arg) for arg in args]
            text = None if any(t is None for t in texts) else " ".join(t or "" for t in texts) + "\n"
            return Inner("write", text=text or OPAQUE_TEXT, argv=(path,)) if path is not None else None
        if path is None:
            return None
        return Inner("write", text=self._content(content), argv=(path,))

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


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _stdout(node: ast.Call) -> bool:
    """``sys.stdout.write(...)``, ``sys.stderr.write(...)``."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and func.value.attr in ("stdout", "stderr")
    )


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
