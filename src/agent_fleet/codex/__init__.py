"""Codex providers and codex binary discovery."""

from agent_fleet._codex_binary import (
    CredentialSource,
    codex_version,
    codex_version_async,
    credential_sources,
    find_codex,
)
from agent_fleet.codex._account import CodexAccount, DeviceCodeLogin
from agent_fleet.codex._overload import is_retryable, retry_on_overload
from agent_fleet.codex.appserver import CodexProvider
from agent_fleet.codex.exec import CodexExecHandle, CodexExecProvider
from agent_fleet.codex.handle import CodexHandle
from agent_fleet.codex.options import ApprovalHandler, AuthRefreshHandler, AuthTokens, CodexOptions
from agent_fleet.codex.translate import SpawnPlan, Untranslated, plan_spawn

__all__ = [
    "ApprovalHandler",
    "AuthRefreshHandler",
    "AuthTokens",
    "CodexAccount",
    "CodexExecHandle",
    "CodexExecProvider",
    "CodexHandle",
    "CodexOptions",
    "CodexProvider",
    "CredentialSource",
    "DeviceCodeLogin",
    "SpawnPlan",
    "Untranslated",
    "codex_version",
    "codex_version_async",
    "credential_sources",
    "find_codex",
    "is_retryable",
    "plan_spawn",
    "retry_on_overload",
]
