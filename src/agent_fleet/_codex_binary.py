"""Finding the codex binary and the credentials it will use.

Discovery order for ``find_codex``: an explicit path, then ``$CODEX_BIN``, then the binary bundled by
the ``openai-codex-cli-bin`` package (pinned by agent-fleet, so a plain install has a known-good
codex), then ``codex`` on ``PATH``.

The supported codex versions are declared here and nowhere else: ``MINIMUM_CODEX_VERSION`` (the oldest
binary the protocol smoke tests pass against; CI runs them with it) and ``PINNED_CODEX_VERSION`` (the
bundled binary, the version the whole suite runs against; ``pyproject.toml``'s pin is tested equal).
``check_codex_version`` refuses an older binary and says when one is not the pinned version.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agent_fleet.errors import ProviderUnavailable

__all__ = [
    "MINIMUM_CODEX_VERSION",
    "PINNED_CODEX_VERSION",
    "CredentialSource",
    "check_codex_version",
    "codex_version",
    "codex_version_async",
    "credential_sources",
    "default_codex_home",
    "find_codex",
    "version_from_user_agent",
]

#: The oldest codex the providers run with (the protocol smoke subset passes against it in CI).
MINIMUM_CODEX_VERSION: Final = "0.162.1"
#: The codex agent-fleet bundles and is tested against (``openai-codex-cli-bin`` in pyproject.toml).
PINNED_CODEX_VERSION: Final = "0.163.0"

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.]+))?")


def _key(version: str) -> tuple[int, int, int, int] | None:
    """A sortable key: ``0.163.0`` > ``0.163.0-alpha.2`` > ``0.162.1``; None for no version at all."""
    match = _VERSION.fullmatch(version.strip())
    if match is None:
        return None
    major, minor, patch, pre = match.groups()
    return int(major), int(minor), int(patch), 0 if pre else 1


def check_codex_version(version: str | None, *, binary: str | os.PathLike[str] | None = None) -> str | None:
    """Raise ``ProviderUnavailable`` when ``version`` is older than ``MINIMUM_CODEX_VERSION`` (or is not a
    version number); return a warning when it is not ``PINNED_CODEX_VERSION``; None when it is."""
    where = f" ({os.fspath(binary)})" if binary is not None else ""
    key = _key(version or "")
    minimum = _key(MINIMUM_CODEX_VERSION)
    if key is None or minimum is None or key < minimum:
        shown = repr(version) if key is None else version
        raise ProviderUnavailable(
            f"codex {shown}{where} is older than the oldest version agent-fleet supports, "
            f"{MINIMUM_CODEX_VERSION} (tested with {PINNED_CODEX_VERSION}): install agent-fleet's bundled "
            "codex (pip install agent-fleet) or point CODEX_BIN at a newer codex"
        )
    if key == _key(PINNED_CODEX_VERSION):
        return None
    relation = "newer than" if key > (_key(PINNED_CODEX_VERSION) or key) else "older than"
    return (
        f"codex {version}{where} is {relation} the version agent-fleet is tested with "
        f"({PINNED_CODEX_VERSION}; supported from {MINIMUM_CODEX_VERSION}): it should work, but "
        "protocol details may differ"
    )


def version_from_user_agent(user_agent: object) -> str | None:
    """The codex version in an ``initialize`` response's ``userAgent`` (``"<client>/0.163.0 (...)"``)."""
    if not isinstance(user_agent, str):
        return None
    first = user_agent.split(" ", 1)[0]
    _, _, version = first.rpartition("/")
    return version if _key(version) is not None else None


def _bundled_codex() -> Path | None:
    try:
        from codex_cli_bin import bundled_codex_path
    except ImportError:
        return None
    try:
        path = bundled_codex_path()
    except (FileNotFoundError, OSError):
        return None
    return Path(path)


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_codex(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the codex binary to run.

    An explicit path (or ``$CODEX_BIN``) that is given but unusable is an error rather than a reason
    to fall through: the caller asked for that binary. Raises ``ProviderUnavailable`` naming every
    place tried.
    """
    tried: list[str] = []
    if explicit is not None:
        path = Path(explicit).expanduser()
        if _usable(path):
            return path
        raise ProviderUnavailable(
            f"codex binary {str(path)!r} does not exist or is not executable",
            tried=[f"explicit path {path}"],
        )
    env_bin = os.environ.get("CODEX_BIN")
    if env_bin:
        path = Path(env_bin).expanduser()
        if _usable(path):
            return path
        raise ProviderUnavailable(
            f"$CODEX_BIN points at {str(path)!r}, which does not exist or is not executable",
            tried=[f"$CODEX_BIN={path}"],
        )
    tried.append("$CODEX_BIN (unset)")
    bundled = _bundled_codex()
    if bundled is not None and _usable(bundled):
        return bundled
    tried.append("bundled openai-codex-cli-bin" + (f" ({bundled})" if bundled else " (not installed)"))
    on_path = shutil.which("codex")
    if on_path:
        return Path(on_path)
    tried.append("codex on PATH")
    raise ProviderUnavailable(
        "no codex binary found: install agent-fleet with its bundled codex "
        "(pip install agent-fleet) or set CODEX_BIN",
        tried=tried,
    )


def _parse_version(output: str) -> str:
    # "codex-cli 0.163.0" -> "0.163.0"
    words = output.strip().split()
    return words[-1] if words else ""


def codex_version(path: str | os.PathLike[str]) -> str:
    """Run ``codex --version`` and return the version number (e.g. ``"0.163.0"``).

    Raises ``ProviderUnavailable`` when the binary cannot run or prints no version.
    """
    try:
        proc = subprocess.run(
            [os.fspath(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProviderUnavailable(f"cannot run {os.fspath(path)} --version: {exc}") from exc
    version = _parse_version(proc.stdout)
    if proc.returncode != 0 or not version:
        raise ProviderUnavailable(
            f"{os.fspath(path)} --version failed (exit {proc.returncode})", stderr_tail=proc.stderr[-2000:]
        )
    return version


async def codex_version_async(path: str | os.PathLike[str]) -> str:
    """Async variant of ``codex_version``."""
    try:
        proc = await asyncio.create_subprocess_exec(
            os.fspath(path),
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    except (OSError, TimeoutError) as exc:
        raise ProviderUnavailable(f"cannot run {os.fspath(path)} --version: {exc}") from exc
    version = _parse_version(out.decode(errors="replace"))
    if proc.returncode != 0 or not version:
        raise ProviderUnavailable(
            f"{os.fspath(path)} --version failed (exit {proc.returncode})",
            stderr_tail=err.decode(errors="replace")[-2000:],
        )
    return version


def default_codex_home() -> Path:
    """``$CODEX_HOME`` or ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


SourceName = Literal["explicit", "CODEX_API_KEY", "OPENAI_API_KEY", "auth.json:api_key", "auth.json:oauth"]


@dataclass(frozen=True, slots=True)
class CredentialSource:
    """A credential source that is present. ``name`` identifies it; the secret itself is never kept."""

    name: SourceName
    detail: str = ""


def credential_sources(
    codex_home: str | os.PathLike[str] | None = None,
    *,
    explicit_key: str | None = None,
    environ: dict[str, str] | None = None,
) -> list[CredentialSource]:
    """Credential sources present, in codex's priority order; names only, never values.

    Order: an explicit key, ``CODEX_API_KEY``, ``OPENAI_API_KEY``, then ``$CODEX_HOME/auth.json``
    (an ``OPENAI_API_KEY`` entry, or ChatGPT OAuth tokens).
    """
    env = os.environ if environ is None else environ
    found: list[CredentialSource] = []
    if explicit_key:
        found.append(CredentialSource("explicit"))
    for var in ("CODEX_API_KEY", "OPENAI_API_KEY"):
        if env.get(var):
            found.append(CredentialSource(var, f"${var}"))
    home = Path(codex_home).expanduser() if codex_home is not None else None
    if home is None:
        home = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else Path.home() / ".codex"
    auth = home / "auth.json"
    try:
        data = json.loads(auth.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        if data.get("OPENAI_API_KEY"):
            found.append(CredentialSource("auth.json:api_key", str(auth)))
        tokens = data.get("tokens")
        if isinstance(tokens, dict) and (tokens.get("access_token") or tokens.get("refresh_token")):
            found.append(CredentialSource("auth.json:oauth", str(auth)))
    return found
