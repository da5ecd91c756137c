"""Judges for packages fetched and run on the spot, and for registry settings written into a project.

* ``ephemeral-package``: ``npx PKG``, ``npm exec``, ``pnpm dlx``, ``yarn dlx``, ``bunx``, ``npm init X``
  (which runs ``create-X``), ``uvx``, ``pipx run``, ``uv tool run|install``, ``pipx install`` download a
  package and run it at once, with no lock file and no review: a typo-squatted or hostile name is code
  execution. Accepted: the well-known tools below (``tsc``, ``eslint``, ``create-vite``, ``ruff`` ...),
  packages the project itself declares (``package.json`` dependencies) or has installed
  (``node_modules/.bin``), and whole scopes of known publishers (``@angular/*``, ``@nestjs/*`` ...).
  (``go run|install M@V`` is not judged so: Go modules live on vanity domains as often as on forges,
  so a host says nothing about who wrote the code.)
* ``registry-config``: a registry or index setting written into a file (``.npmrc``, ``.yarnrc.yml``,
  ``pip.conf``, ``uv.toml``, ``pyproject.toml``, ``.cargo/config.toml``, ``Gemfile`` ...) that points at a
  host not on the allow-list, or turns TLS verification off: every later install, by the agent or a
  person, then fetches from there.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Sequence

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import SimpleCommand
from agent_fleet.policy.packs._argv import JudgeContext, read_small_file
from agent_fleet.policy.rules._tools import NPM_SCOPES, NPM_TOOLS, PY_TOOLS, package_name

__all__ = ["judge_ephemeral_package", "judge_registry_config"]

_DLX_VERBS = frozenset({"exec", "x", "dlx"})
_CREATE_VERBS = frozenset({"init", "create", "innit"})
_VALUE_OPTIONS = frozenset({"-p", "--package", "-c", "--call", "--cache", "--registry", "--userconfig"})


def _npm_packages(program: str, args: Sequence[str]) -> list[str]:
    """The packages an npx-style command downloads and runs (empty: none, or not such a command)."""
    packages: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positionals.extend(args[i + 1 : i + 2])
            break
        name, eq, value = arg.partition("=")
        if name in ("-p", "--package"):
            packages.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
            i += 1 if eq else 2
            continue
        if name in _VALUE_OPTIONS and not eq:
            i += 2
            continue
        if not arg.startswith("-"):
            positionals.append(arg)
            verb = positionals[0] in _DLX_VERBS | _CREATE_VERBS
            if program in ("npx", "bunx", "pnpx") or (verb and len(positionals) > 1):
                break  # what follows the package is its own command line
        i += 1
    if program in ("npx", "bunx", "pnpx"):
        return packages or positionals[:1]
    if positionals[:1] and positionals[0] in _DLX_VERBS:
        return packages or positionals[1:2]
    if program in ("npm", "pnpm", "yarn", "bun") and positionals[:1] and positionals[0] in _CREATE_VERBS:
        if len(positionals) < 2 or positionals[1].startswith((".", "/")):
            return []
        spec = positionals[1]
        if spec.startswith("@"):
            scope, _, rest = spec.partition("/")
            return [f"{scope}/create-{rest}" if rest else f"{scope}/create"]
        return [f"create-{spec}"]
    return []


def _declared(name: str, ctx: JudgeContext) -> bool:
    """Does the project itself depend on, or already have installed, ``name``?"""
    text = read_small_file("package.json", ctx) if ctx.cwd else None
    if text:
        try:
            manifest = json.loads(text)
        except ValueError:
            manifest = {}
        if isinstance(manifest, dict):
            for key in ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies"):
                section = manifest.get(key)
                if isinstance(section, dict) and name in section:
                    return True
    binary = ctx.resolve(f"node_modules/.bin/{name.rsplit('/', 1)[-1]}") if ctx.cwd else None
    return binary is not None and os.path.exists(binary)


def _known_npm(name: str, ctx: JudgeContext) -> bool:
    if not name or name.startswith((".", "/", "~", "file:")) or "://" in name or name.startswith("git"):
        return True  # local paths; URLs and git sources are the install-source rule's business
    if name in NPM_TOOLS or name.split("/", 1)[0] in NPM_SCOPES:
        return True
    return _declared(name, ctx)


_UV_VALUES = frozenset(
    {"--python", "-p", "--from", "--with", "--with-editable", "--with-requirements", "--index", "--index-url"}
    | {
        "--extra-index-url",
        "--constraint",
        "-c",
        "--override",
        "--cache-dir",
        "--python-preference",
        "--env-file",
    }
    | {"--spec", "--pip-args", "--suffix", "--python-version"}
)


def _python_packages(program: str, args: Sequence[str]) -> list[str]:
    positionals: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _UV_VALUES:
            skip = True
        elif not arg.startswith("-"):
            positionals.append(arg)
    if program == "uvx":
        froms = [a.partition("=")[2] for a in args if a.startswith("--from=")]
        froms += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--from"]
        return froms or positionals[:1]
    if program == "pipx" and positionals[:1] and positionals[0] in ("run", "install"):
        return positionals[1:2]
    if program == "uv" and positionals[:2] in (["tool", "run"], ["tool", "install"]):
        return positionals[2:3]
    return []


def judge_ephemeral_package(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    program, args = argv[0], list(argv[1:])
    if program in ("uvx", "pipx", "uv"):
        for spec in _python_packages(program, args):
            name = re.split(r"[=<>!~\[@ ]", spec, maxsplit=1)[0].lower()
            if name and name not in PY_TOOLS and not name.startswith((".", "/", "~")) and "://" not in spec:
                return (
                    f"{program} downloads and runs {name!r}, which is neither a known tool nor the project's"
                )
        return None
    for spec in _npm_packages(program, args):
        name = package_name(spec)
        if not _known_npm(name, ctx):
            return f"{program} downloads and runs {name!r}, which is neither a known tool nor the project's"
    return None


_REGISTRY_FILES = frozenset(
    {".npmrc", ".yarnrc", ".yarnrc.yml", "bunfig.toml", "pip.conf", "pip.ini", "uv.toml", "pyproject.toml"}
    | {"poetry.toml", "pdm.toml", ".pdm.toml", ".condarc", "condarc", "Gemfile", "gems.rb", "go.env"}
    | {"settings.xml", "gradle.properties", "composer.json", "NuGet.Config", "nuget.config", ".pypirc"}
    | {"requirements.txt", "requirements-dev.txt", "constraints.txt", "requirements.in"}
)
_REGISTRY_KEYS = re.compile(
    r"registry|index|find-links|source|mirror|proxy|replace-with|url\s*=|repositories|channels|GOPROXY"
    r"|^\s*(-i|-f)\s",
    re.IGNORECASE,
)
_PYPROJECT_KEYS = re.compile(r"^\s*(url|index-url|extra-index-url|find-links|default-index)\s*=")
_URL_HOST = re.compile(r"[a-z][a-z0-9+.-]*://([^\s\"'<>/#|,;\\]+)", re.IGNORECASE)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)
_TLS_OFF = re.compile(
    r"strict-ssl\s*=\s*false|enableStrictSsl\s*:\s*false|sslverify\s*[=:]\s*(false|0)|ssl_verify\s*[=:]\s*"
    r"(false|0)|verify_ssl\s*=\s*false|trusted-host|cert\s*=\s*/dev/null|GOINSECURE|GONOSUMDB|GONOSUMCHECK"
    r"|GOFLAGS=.*-insecure|unsafeHttpWhitelist|GOSUMDB\s*=\s*off|disable_ssl|insecure\s*[=:]\s*true",
    re.IGNORECASE,
)


def _written_targets(cmd: SimpleCommand) -> list[str]:
    targets = [r.target for r in cmd.redirects if r.op in (">", ">>", ">|", "&>", "&>>")]
    if cmd.program == "tee":
        targets += [arg for arg in cmd.argv[1:] if not arg.startswith("-")]
    return targets


def _edited(cmd: SimpleCommand) -> list[tuple[str, str]]:
    """``(file, expression)`` for ``sed -i``/``perl -i`` edits of registry files: the new text is in the
    expression (``sed -i 's#pypi.org#evil#' pip.conf``)."""
    if cmd.program not in ("sed", "gsed", "perl") or not any(a.startswith("-i") for a in cmd.argv[1:]):
        return []
    words = [a for a in cmd.argv[1:] if not a.startswith("-")]
    return [(w, " ".join(words)) for w in words if posixpath.basename(w) in _REGISTRY_FILES]


def judge_registry_config(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    for target, expression in _edited(cmd):
        for host in _URL_HOST.findall(expression):  # a sed expression glues URLs: `s#old#new#`
            if not ctx.hosts.allows(host.rpartition("@")[2].split(":")[0].lower()):
                return f"{cmd.program} -i points {target} at {host}, which is not on the allowed hosts"
    for target in _written_targets(cmd):
        name = posixpath.basename(target)
        if name not in _REGISTRY_FILES and not target.endswith((".cargo/config", ".cargo/config.toml")):
            continue
        text = ctx.written.get(target)
        if text is None:
            continue
        if _TLS_OFF.search(text):
            return f"{target} turns TLS verification off for package downloads"
        keys = _PYPROJECT_KEYS if name == "pyproject.toml" else _REGISTRY_KEYS
        for line in text.splitlines():
            if not keys.search(line):
                continue
            for url in _URL.findall(line):
                host = host_of(url)
                if not ctx.hosts.allows(host):
                    shown = host or url
                    return f"{target} points package installs at {shown}, which is not on the allowed hosts"
    return None
