"""Codex providers and codex binary discovery."""

from agent_fleet.codex.binary import (
    CredentialSource,
    codex_version,
    codex_version_async,
    credential_sources,
    find_codex,
)
from agent_fleet.codex.options import ApprovalHandler, CodexOptions

__all__ = [
    "ApprovalHandler",
    "CodexOptions",
    "CredentialSource",
    "codex_version",
    "codex_version_async",
    "credential_sources",
    "find_codex",
]
