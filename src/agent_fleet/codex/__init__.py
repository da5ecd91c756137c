"""Codex providers and codex binary discovery."""

from agent_fleet.codex.binary import (
    CredentialSource,
    codex_version,
    codex_version_async,
    credential_sources,
    find_codex,
)

__all__ = [
    "CredentialSource",
    "codex_version",
    "codex_version_async",
    "credential_sources",
    "find_codex",
]
