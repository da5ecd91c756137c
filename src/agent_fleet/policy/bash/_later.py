"""Files a command writes and then runs: what the file will hold is known, so what it runs is judged.

``echo 'rm -rf ~' > x.sh && bash x.sh`` runs ``rm -rf ~`` as surely as ``bash -c 'rm -rf ~'`` does. The
walker records the text of every file a command writes with known content (``echo``/``printf``/``cat``
here-documents redirected with ``>``/``>>``, ``tee FILE`` fed known text), by the path as written;
when a later command runs one of those files, its text is judged as what that command runs:

* a shell or ``source``/``.`` given the file, or the file run by its path (``./x.sh``; a ``#!`` line
  naming an interpreter is honoured);
* an interpreter given the file (``python3 t.py``, ``node x.js``, ``perl x.pl`` ...): read as code;
* ``make`` with a makefile written so (``Makefile``, ``-f FILE``, ``-C DIR``): its recipe lines;
* ``npm``/``pnpm``/``yarn``/``bun`` running a script of a ``package.json`` written so (``npm test``,
  ``npm run x``, and the install hooks of ``npm install``);
* the file fed to a shell or interpreter (``sh < x``), its text read by ``cat``/``head``/``tail`` into a
  pipe or a substitution (``cat x | sh``, ``bash -c "$(cat x)"``, ``$(< x)``: the walker asks
  ``read_text``), a copy of it (``cp x y``, ``cp /dev/stdin y <<< TEXT``), a program of that name in a
  ``PATH`` directory the command set, and code a project tool loads (``pytest`` and ``conftest.py``,
  ``pip install .`` and ``setup.py``, ``direnv`` and ``.envrc``, ``npx X`` and ``node_modules/.bin/X``).

A file whose content is not known (``cp evil.sh x.sh``) is left to the rules that judge the command
itself, as before. Bounded: at most ``MAX_FILES`` files of ``MAX_TEXT`` characters are remembered.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence

from agent_fleet.policy.bash._code import Inner, analyse_code, code_language
from agent_fleet.policy.bash._commands import Redirect, SimpleCommand
from agent_fleet.policy.bash._unwrap import SHELLS
from agent_fleet.policy.bash._words import known_output

__all__ = ["MAX_FILES", "MAX_TEXT", "read_text", "recipes", "record_writes", "written_runs"]

MAX_FILES = 32
MAX_TEXT = 64 * 1024
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "bun"})
_NPM_LIFECYCLE = {
    "install": ("preinstall", "install", "postinstall", "prepare"),
    "test": ("pretest", "test", "posttest"),
    "start": ("prestart", "start", "poststart"),
    "stop": ("prestop", "stop", "poststop"),
    "restart": ("prerestart", "restart", "postrestart"),
}
_NPM_ALIASES = {"i": "install", "ci": "install", "add": "install", "t": "test", "tst": "test"}
_SHEBANG = re.compile(r"#!\s*(?:/usr/bin/env\s+(?:-S\s+)?)?(\S+)")


def _key(word: str) -> str:
    return posixpath.normpath(word) if word else word


def _known_text(cmd: SimpleCommand) -> str | None:
    if cmd.program in ("cat", "tee"):
        texts = [r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<")]
        return "\n".join(texts) if texts else None
    text = known_output(cmd.program, cmd.argv[1:])
    if text is not None and cmd.program == "echo" and "-n" not in cmd.argv[1:2]:
        text += "\n"
    return text


def record_writes(files: dict[str, str], cmd: SimpleCommand, stdin_texts: Sequence[str]) -> None:
    """Remember the text of each file ``cmd`` writes, when that text is known."""
    written: list[tuple[str, str, bool]] = []
    text = _known_text(cmd)
    for redirect in cmd.redirects:
        if redirect.op in _WRITE_OPS and not re.fullmatch(r"[0-9-]*", redirect.target):
            if text is None:
                files.pop(_key(redirect.target), None)  # rewritten with what we cannot know
            else:
                written.append((redirect.target, text, redirect.op in (">>", "&>>")))
    if cmd.program == "tee":
        fed = text if text is not None else ("\n".join(stdin_texts) if stdin_texts else None)
        append = any(arg in ("-a", "--append") for arg in cmd.argv[1:])
        for operand in (arg for arg in cmd.argv[1:] if not arg.startswith("-")):
            if fed is None:
                files.pop(_key(operand), None)
            else:
                written.append((operand, fed, append))
    if cmd.program in ("cp", "mv", "install") and len(cmd.argv) >= 3 and not cmd.argv[-1].startswith("-"):
        source, dest = cmd.argv[-2], cmd.argv[-1]
        copied = files.get(_key(source))
        if source in ("/dev/stdin", "-") and stdin_texts:
            copied = "\n".join(stdin_texts)
        if source in ("/dev/stdin", "-") and copied is None:
            copied = "\n".join(r.target for r in cmd.redirects if r.op in ("<<", "<<-", "<<<")) or None
        if copied is not None:
            written.append((dest, copied, False))
    for word, content, append in written:
        key = _key(word)
        if key not in files and len(files) >= MAX_FILES:
            continue
        files[key] = ((files.get(key, "") if append else "") + content)[:MAX_TEXT]


def read_text(argv: Sequence[str], files: dict[str, str]) -> str | None:
    """What ``cat``/``head``/``tail``/``tac`` of files written earlier prints (all of it, to be safe)."""
    if not files or not argv or argv[0] not in ("cat", "head", "tail", "tac", "less", "more"):
        return None
    texts = [files.get(_key(a)) for a in argv[1:] if not a.startswith("-")]
    known = [t for t in texts if t is not None]
    return "\n".join(known) if known else None


def recipes(text: str) -> str:
    """The shell lines of a makefile: its recipe lines (tab-indented), one command each."""
    lines = [line[1:].lstrip("@-+") for line in text.splitlines() if line.startswith("\t")]
    return "\n".join(lines)


def _operands(args: Sequence[str]) -> list[str]:
    return [arg for arg in args if not arg.startswith("-") or arg == "-"]


def _as_file(text: str, program_hint: str | None) -> list[Inner]:
    """What running a file of ``text`` runs: code of the language its ``#!`` line (or hint) names."""
    match = _SHEBANG.match(text)
    language = code_language(posixpath.basename(match.group(1))) if match is not None else None
    language = language or program_hint
    if language is not None and language != "other":
        return analyse_code(language, text)
    return [Inner("script", text=text)]


def _make(args: Sequence[str], files: dict[str, str]) -> list[Inner]:
    directory = ""
    named: list[str] = []
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-C", "--directory"):
            directory = value
        elif arg.startswith("--directory="):
            directory = arg.partition("=")[2]
        elif arg in ("-f", "--file", "--makefile"):
            named.append(value)
        elif arg.startswith(("--file=", "--makefile=")):
            named.append(arg.partition("=")[2])
        elif arg.startswith("-f") and len(arg) > 2:
            named.append(arg[2:])
    candidates = named or list(_MAKEFILES)
    for name in candidates:
        text = files.get(_key(posixpath.join(directory, name)))
        if text is not None:
            return [Inner("script", text=recipes(text))]
    return []


def _npm(program: str, args: Sequence[str], files: dict[str, str]) -> list[Inner]:
    text = files.get("package.json")
    if text is None:
        return []
    try:
        scripts = json.loads(text).get("scripts", {})
    except (ValueError, AttributeError):
        return []
    if not isinstance(scripts, dict):
        return []
    operands = _operands(args)
    if not operands:
        names: tuple[str, ...] = _NPM_LIFECYCLE["install"] if program != "npm" else ()
    else:
        verb = _NPM_ALIASES.get(operands[0], operands[0])
        if verb in ("run", "run-script", "rum", "urn") and len(operands) > 1:
            names = (f"pre{operands[1]}", operands[1], f"post{operands[1]}")
        elif verb in _NPM_LIFECYCLE:
            names = _NPM_LIFECYCLE[verb]
        elif program != "npm":  # `yarn build`, `pnpm lint`: a script by its name
            names = (verb,)
        else:
            names = ()
    return [Inner("script", text=scripts[n]) for n in names if isinstance(scripts.get(n), str)]


_CODE_SUFFIXES = {
    ".py": "python",
    ".js": "node",
    ".mjs": "node",
    ".cjs": "node",
    ".ts": "node",
    ".rb": "ruby",
}
_CODE_SUFFIXES |= {".pl": "perl", ".php": "php", ".lua": "lua"}
#: Tools that load the project's own code: what the command wrote there, they run
#: (``conftest.py`` for pytest, ``setup.py`` for ``pip install .``, ``.envrc`` for direnv ...).
_PROJECT_RUNNERS = frozenset(
    {"pytest", "py.test", "tox", "nox", "pip", "pip3", "uv", "poetry", "hatch", "pdm", "rake", "bundle"}
    | {"just", "direnv", "jest", "vitest", "mocha", "webpack", "vite", "next", "gulp", "grunt", "eslint"}
    | {"prettier", "babel", "nuxt", "astro", "tsx", "ts-node", "playwright", "cypress", "npm", "npx"}
    | {"yarn", "pnpm", "bun", "bunx"}
)
_SHELL_FILES = frozenset({".envrc", "justfile", "Justfile", ".justfile"})


def _project_code(files: dict[str, str]) -> list[Inner]:
    found: list[Inner] = []
    for name, text in files.items():
        base = posixpath.basename(name)
        language = _CODE_SUFFIXES.get(posixpath.splitext(base)[1])
        if base in _SHELL_FILES:
            found.append(Inner("script", text=recipes(text) if "justfile" in base.lower() else text))
        elif base == "Rakefile":
            found.extend(analyse_code("ruby", text))
        elif language is not None:
            found.extend(analyse_code(language, text))
    return found


def written_runs(
    argv: Sequence[str],
    raw_program: str,
    files: dict[str, str],
    *,
    redirects: Sequence[Redirect] = (),
    path: str | None = None,
) -> list[Inner]:
    """What ``argv`` runs from files written earlier in the same command (see the module docstring).
    ``redirects``: the command's own (``sh < x``); ``path``: its ``PATH`` when the script set it."""
    if not files or not argv:
        return []
    program, args = argv[0], list(argv[1:])
    if "/" in raw_program and _key(raw_program) in files:
        return _as_file(files[_key(raw_program)], None)
    here = ("$PWD/", "${PWD}/", "$(pwd)/")
    for directory in (path or "").split(":"):  # `PATH=./bin:$PATH git status` with bin/git written
        directory = next((directory[len(h) :] for h in here if directory.startswith(h)), directory)
        if directory and not directory.startswith("$") and _key(posixpath.join(directory, program)) in files:
            return _as_file(files[_key(posixpath.join(directory, program))], None)
    fed = next((files[_key(r.target)] for r in redirects if r.op == "<" and _key(r.target) in files), None)
    if fed is not None and (program in SHELLS or program in ("source", ".") or code_language(program)):
        language = code_language(program)
        if program in SHELLS or program in ("source", ".") or language in (None, "other"):
            return [Inner("script", text=fed)]
        return analyse_code(language, fed)
    if program in _PROJECT_RUNNERS:
        found = _project_code(files)
        if program in ("npx", "bunx", "pnpm", "yarn", "npm"):
            operands = _operands(args)
            for name in operands[:2]:
                text = files.get(_key(f"node_modules/.bin/{name}"))
                if text is not None:
                    found.extend(_as_file(text, None))
        if program in ("npm", "pnpm", "yarn", "bun"):
            found.extend(_npm(program, args, files))
        if found:
            return found
    if program in SHELLS or program in ("source", "."):
        if any(arg in ("-c", "-s") for arg in args):
            return []
        operands = _operands(args)
        text = files.get(_key(operands[0])) if operands else None
        return [Inner("script", text=text)] if text is not None else []
    if program in ("make", "gmake", "bmake"):
        return _make(args, files)
    if program in _PACKAGE_MANAGERS:
        return _npm(program, args, files)
    language = code_language(program)
    if language is not None and language != "other":
        operands = _operands(args)
        text = files.get(_key(operands[0])) if operands else None
        return _as_file(text, language) if text is not None else []
    return []
