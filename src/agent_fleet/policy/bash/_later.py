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

from agent_fleet.policy.bash._code import OPAQUE_TEXT, Inner, analyse_code, code_language
from agent_fleet.policy.bash._commands import Redirect, SimpleCommand
from agent_fleet.policy.bash._unwrap import SHELLS
from agent_fleet.policy.bash._words import known_output

__all__ = ["MAX_FILES", "MAX_TEXT", "read_text", "recipes", "record_writes", "remember", "written_runs"]

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
    if cmd.program in ("sed", "gsed", "perl"):  # `sed -i '1a CMD' x.sh`: x.sh now holds CMD too
        edit = edited(cmd.argv)
        if edit is not None:
            written += [(word, edit[1], True) for word in edit[0]]
    for word, content, append in written:
        remember(files, word, content, append=append)


def remember(files: dict[str, str], word: str, content: str, *, append: bool = False) -> None:
    """Record that the file ``word`` now holds ``content`` (after what it held, with ``append``);
    ``OPAQUE_TEXT`` marks a file written with content nobody can know, and stays so."""
    key = _key(word)
    if key not in files and len(files) >= MAX_FILES:
        return
    before = files.get(key, "") if append else ""
    if OPAQUE_TEXT in (before, content):
        files[key] = OPAQUE_TEXT
        return
    files[key] = (before + ("\n" if before and not before.endswith("\n") else "") + content)[:MAX_TEXT]


# `sed -i` scripts: the text their a/i/c commands add and their s/// replacements put in the file.
_SED_ADDRESS = re.compile(
    r"\s*(?:(?:[0-9]+|\$|/(?:[^/\\]|\\.)*/I?|\\(.)(?:(?!\1).)*\1)(?:~[0-9]+)?\s*,?\s*)*!?\s*"
)


def _sed_inserted(script: str) -> list[str]:
    texts: list[str] = []
    pos = 0
    while pos < len(script):
        while pos < len(script) and script[pos] in " \t\n;{}":
            pos += 1
        address = _SED_ADDRESS.match(script, pos)
        pos = address.end() if address is not None else pos
        if pos >= len(script):
            break
        command = script[pos]
        pos += 1
        if command in "aic":
            end = script.find("\n", pos)
            text = script[pos:] if end < 0 else script[pos:end]
            if text.strip() == "\\" and end >= 0:  # `a\` then the text on the following lines
                rest = script[end + 1 :]
                lines: list[str] = []
                for line in rest.split("\n"):
                    lines.append(line.rstrip("\\"))
                    if not line.endswith("\\"):
                        break
                text = "\n".join(lines)
                end = end + 1 + len("\n".join(rest.split("\n")[: len(lines)]))
            texts.append(text.lstrip(" \t\\"))
            pos = len(script) if end < 0 else end
        elif command in "sy" and pos < len(script):
            delimiter = script[pos]
            parts: list[str] = []
            current: list[str] = []
            pos += 1
            while pos < len(script) and len(parts) < 2:
                char = script[pos]
                if char == "\\" and pos + 1 < len(script):
                    nxt = script[pos + 1]
                    current.append(nxt if nxt == delimiter else "\n" if nxt == "n" else "\\" + nxt)
                    pos += 2
                    continue
                if char == delimiter:
                    parts.append("".join(current))
                    current = []
                else:
                    current.append(char)
                pos += 1
            if command == "s" and len(parts) == 2:
                texts.append(re.sub(r"\\[0-9]|(?<!\\)&", "${SED_MATCH}", parts[1]).replace("\\&", "&"))
            while pos < len(script) and script[pos] not in ";\n}":
                pos += 1
        else:
            while pos < len(script) and script[pos] not in ";\n}":
                pos += 1
    return texts


def edited(argv: Sequence[str]) -> tuple[list[str], str] | None:
    """For ``sed -i SCRIPT FILES`` (and ``perl -i -pe 's/../../' FILES``): the files edited in place
    and the text the edit puts in them (what its a/i/c commands add, its replacements)."""
    args = list(argv[1:])
    in_place = False
    scripts: list[str] = []
    operands: list[str] = []
    perl = argv[0] == "perl"
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            operands += args[i + 1 :]
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            in_place = in_place or name == "--in-place"
            if name == "--expression":
                scripts.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
                i += 0 if eq else 1
        elif arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for j, letter in enumerate(letters):
                if letter == "i":
                    in_place = True
                    break  # the rest is the backup suffix
                if letter == "e" or (letter == "E" and perl):
                    value = letters[j + 1 :] or (args[i + 1] if i + 1 < len(args) else "")
                    scripts.append(value)
                    i += 0 if letters[j + 1 :] else 1
                    break
                if letter in "fl" and not perl:
                    i += 0 if letters[j + 1 :] else 1
                    break
        else:
            operands.append(arg)
        i += 1
    if not in_place:
        return None
    if not scripts and operands and not perl:
        scripts, operands = [operands[0]], operands[1:]
    texts = [text for script in scripts for text in _sed_inserted(script)]
    return (operands, "\n".join(texts)) if texts and operands else None


def read_text(argv: Sequence[str], files: dict[str, str]) -> str | None:
    """What ``cat``/``head``/``tail``/``tac`` of files written earlier prints (all of it, to be safe)."""
    if not files or not argv or argv[0] not in ("cat", "head", "tail", "tac", "less", "more"):
        return None
    texts = [files.get(_key(a)) for a in argv[1:] if not a.startswith("-")]
    known = [t for t in texts if t is not None]
    return "\n".join(known) if known else None


_RULE_RECIPE = re.compile(r"^[^\t#=]*?[^\\:=]:{1,2}(?![=:])[^;#=]*;(.*)$")
_SHELL_ASSIGN = re.compile(r"^\s*[^\s#=:]+\s*!=(.*)$")
_MAKE_REFERENCE = re.compile(r"\$[({]")


def _make_references(text: str, found: list[str]) -> str:
    """``text`` with make's references turned into unknown shell variables (make expands them before the
    shell sees the line); the command of each ``$(shell CMD)`` is added to ``found``. ``$$`` is ``$``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if _MAKE_REFERENCE.match(text, i) is None:
            out.append(text[i])
            i += 1
            continue
        close = ")" if text[i + 1] == "(" else "}"
        depth, j = 1, i + 2
        while j < len(text) and depth:
            depth += 1 if text[j] == text[i + 1] else -1 if text[j] == close else 0
            j += 1
        inner = text[i + 2 : j - 1]
        if inner.startswith("shell ") or inner.startswith("shell\t"):
            found.append(_make_references(inner[6:], found))
        out.append("${MAKE_REFERENCE}")  # unknown to the shell, as its value is to us
        i = j
    return "".join(out)


def recipes(text: str) -> str:
    """The shell lines a makefile runs: recipe lines (tab-indented, or after ``;`` on a rule's line),
    ``$(shell CMD)`` anywhere and ``VAR != CMD``; make's own references become unknown variables."""
    lines: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("\t"):
            lines.append(_make_references(line[1:].lstrip("@-+ \t"), lines))
            continue
        rule = _RULE_RECIPE.match(line)
        assign = _SHELL_ASSIGN.match(line)
        if rule is not None:
            lines.append(_make_references(rule.group(1).lstrip("@-+ \t"), lines))
        elif assign is not None:
            lines.append(_make_references(assign.group(1), lines))
        else:
            _make_references(line, lines)  # `$(shell ...)` in assignments, conditionals, prerequisites
    return "\n".join(line for line in lines if line.strip())


def _operands(args: Sequence[str]) -> list[str]:
    return [arg for arg in args if not arg.startswith("-") or arg == "-"]


def _as_file(text: str, program_hint: str | None) -> list[Inner]:
    """What running a file of ``text`` runs: code of the language its ``#!`` line (or hint) names."""
    if text == OPAQUE_TEXT:
        return [Inner("opaque", text="a file inline code wrote with content that cannot be known is run")]
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
