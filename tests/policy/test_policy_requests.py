"""The request kinds that are not shell commands: read, network, permissions, tool (issue 16)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest
from agent_fleet.policy.rules._secrets import HOME_CREDENTIALS, KEY_FILES, SYSTEM_CREDENTIALS


def _decide(request: ApprovalRequest, **config: object) -> tuple[str, str | None]:
    decision = ApprovalPolicy(PermissionConfig(**config) if config else None).evaluate(request)  # type: ignore[arg-type]
    return decision.action, decision.rule


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/a.py", ("allow_for_session", None)),
        (".", ("allow_for_session", None)),
        ("/root/.ssh/id_rsa", ("decline", "secret-read")),
        ("~/.aws/credentials", ("decline", "secret-read")),
        (".env", ("decline", "secret-read")),
        ("deploy/server.pem", ("decline", "secret-read")),
        (".env.example", ("allow_for_session", None)),
        ("keys/id_ed25519.pub", ("allow_for_session", None)),
        ("/etc/passwd", ("decline", "path-escape")),
        ("../other", ("decline", "path-escape")),
    ],
)
def test_reads_are_judged_for_secrets_and_containment(
    tmp_path: Path, path: str, expected: tuple[str, str]
) -> None:
    request = ApprovalRequest(kind="read", paths=(path,), cwd=tmp_path)
    assert _decide(request) == expected
    # a read that passes is accepted under default deny too (codex reads freely in its sandbox)
    if expected[0] != "decline":
        assert _decide(request, default="deny") == expected


def test_a_workspace_that_is_the_home_still_hides_credentials(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()
    request = ApprovalRequest(kind="read", paths=(".ssh/config",), cwd=tmp_path)
    assert _decide(request) == ("decline", "secret-read")
    assert _decide(ApprovalRequest(kind="read", cwd=tmp_path)) == ("decline", "no-paths")


@pytest.mark.parametrize(
    ("host", "port", "allowed", "expected"),
    [
        ("pypi.org", 443, (), ("decline", "network-not-allowed")),
        ("pypi.org", 443, ("pypi.org",), ("allow_for_session", None)),
        ("PyPI.org.", 443, ("pypi.org",), ("allow_for_session", None)),
        ("evil.pypi.org.evil", 443, ("*.pypi.org",), ("decline", "network-not-allowed")),
        ("files.pypi.org", 443, ("*.pypi.org",), ("allow_for_session", None)),
        ("127.0.0.1", 8080, ("127.0.0.1:8080",), ("allow_for_session", None)),
        ("127.0.0.1", 22, ("127.0.0.1:8080",), ("decline", "network-not-allowed")),
        ("127.0.0.1", None, ("127.0.0.1:8080",), ("decline", "network-not-allowed")),
        (None, None, ("pypi.org",), ("decline", "network-not-allowed")),
        (None, None, ("*",), ("allow_for_session", None)),
    ],
)
def test_network_is_the_allow_list_alone(
    host: str | None, port: int | None, allowed: tuple[str, ...], expected: tuple[str, str]
) -> None:
    request = ApprovalRequest(kind="network", host=host, port=port, protocol="https")
    assert _decide(request, allowed_hosts=allowed) == expected
    # the default neither opens nor closes the network
    assert _decide(request, allowed_hosts=allowed, default="deny") == expected


def test_permissions_are_granted_for_the_turn_only(tmp_path: Path) -> None:
    inside = ApprovalRequest(kind="permissions", paths=("build",), cwd=tmp_path)
    assert _decide(inside) == ("allow_once", None)
    assert _decide(inside, default="deny") == ("decline", "default-deny")
    outside = ApprovalRequest(kind="permissions", paths=("/",), cwd=tmp_path)
    assert _decide(outside) == ("decline", "path-escape")
    network = ApprovalRequest(kind="permissions", network=True, cwd=tmp_path)
    assert _decide(network) == ("decline", "network-not-allowed")
    assert _decide(network, allowed_hosts=("pypi.org",)) == ("decline", "network-not-allowed")
    assert _decide(network, allowed_hosts=("*://*",)) == ("allow_once", None)
    assert _decide(ApprovalRequest(kind="permissions", cwd=tmp_path)) == ("decline", "no-paths")


def test_mcp_tools_need_a_matching_name_pattern() -> None:
    tool = ApprovalRequest(kind="tool", tool="mcp:github/create_issue")
    assert _decide(tool) == ("decline", "mcp-not-allowed")
    assert _decide(tool, mcp_tools=("docs/*",)) == ("decline", "mcp-not-allowed")
    assert _decide(tool, mcp_tools=("github/*",)) == ("allow_for_session", None)
    assert _decide(tool, mcp_tools=("github/*",), default="deny") == ("decline", "default-deny")
    # the agent's own session tools: the default decides
    task = ApprovalRequest(kind="tool", tool="builtin:Task")
    assert _decide(task) == ("allow_for_session", None)
    assert _decide(task, default="deny") == ("decline", "default-deny")
    # a tool with no name is not the caller's own tool
    assert _decide(ApprovalRequest(kind="tool")) == ("decline", "unknown-request")
    # the caller's own Spec.tools function: its own patterns, not the default
    assert _decide(ApprovalRequest(kind="tool", tool="add"), default="deny") == ("allow_for_session", None)


# -- one list of credential files for commands and reads (issue 16, audit) ----------------------------------


@pytest.mark.parametrize("pattern", HOME_CREDENTIALS)
def test_every_home_credential_is_one_for_commands_and_for_reads(pattern: str, tmp_path: Path) -> None:
    relative = pattern.replace("*", "x")
    read = ApprovalRequest(kind="read", paths=(f"/home/someone/{relative}",), cwd=tmp_path)
    assert _decide(read) == ("decline", "secret-read")
    command = ApprovalRequest(kind="command", command=f"cat ~/{shlex.quote(relative)}", cwd=tmp_path)
    assert _decide(command) == ("decline", "credential-access")


@pytest.mark.parametrize(
    "name", [n for n in KEY_FILES if n not in (".env", ".env.*")] + list(SYSTEM_CREDENTIALS)
)
def test_key_files_and_system_secrets_are_declined_for_reads(name: str, tmp_path: Path) -> None:
    path = name.replace("*", "x")
    assert _decide(ApprovalRequest(kind="read", paths=(path,), cwd=tmp_path)) == ("decline", "secret-read")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".ssh", ("decline", "secret-read")),  # the directory a search would read
        ("home/u/.config/gh/hosts.yml", ("decline", "secret-read")),
        (".bash_history", ("decline", "secret-read")),
        ("src/secrets.py", ("allow_for_session", None)),
        ("docs/ssh.md", ("allow_for_session", None)),
    ],
)
def test_credentials_wherever_a_home_is(tmp_path: Path, path: str, expected: tuple[str, str]) -> None:
    assert _decide(ApprovalRequest(kind="read", paths=(path,), cwd=tmp_path)) == expected


# -- allowed_hosts entries name the protocol too (issue 16, audit) ---------------------------------------


@pytest.mark.parametrize(
    ("host", "port", "protocol", "allowed", "expected"),
    [
        ("pypi.org", None, "https", ("pypi.org",), "allow_for_session"),
        ("pypi.org", None, "http", ("pypi.org",), "allow_for_session"),
        # a bare host is the web only: another protocol needs its scheme named
        ("pypi.org", None, "socks5Tcp", ("pypi.org",), "decline"),
        ("pypi.org", None, "socks5Udp", ("*",), "decline"),
        ("pypi.org", None, "socks5Tcp", ("socks5tcp://pypi.org",), "allow_for_session"),
        ("pypi.org", None, "socks5Udp", ("socks5tcp://pypi.org",), "decline"),
        ("pypi.org", None, "socks5Udp", ("*://pypi.org",), "allow_for_session"),
        ("pypi.org", None, "http", ("https://pypi.org",), "decline"),
        ("pypi.org", None, "https", ("HTTPS://PyPI.org",), "allow_for_session"),
        # a port in the pattern: the request's, or its protocol's default
        ("pypi.org", None, "https", ("pypi.org:443",), "allow_for_session"),
        ("pypi.org", None, "http", ("pypi.org:443",), "decline"),
        ("pypi.org", 8443, "https", ("https://pypi.org:8443",), "allow_for_session"),
        ("pypi.org", None, "socks5Tcp", ("socks5tcp://pypi.org:1080",), "decline"),
        # any host on any protocol (a sandbox's whole network) needs *://*
        (None, None, None, ("*",), "decline"),
        (None, None, None, ("*://*",), "allow_for_session"),
        (None, None, "https", ("*",), "allow_for_session"),
        # an entry that names no host is no entry
        ("pypi.org", None, "https", ("https://",), "decline"),
    ],
)
def test_allowed_hosts_name_protocols(
    host: str | None, port: int | None, protocol: str | None, allowed: tuple[str, ...], expected: str
) -> None:
    request = ApprovalRequest(kind="network", host=host, port=port, protocol=protocol)
    assert _decide(request, allowed_hosts=allowed)[0] == expected


def test_a_sandbox_network_grant_is_every_protocol(tmp_path: Path) -> None:
    network = ApprovalRequest(kind="permissions", network=True, cwd=tmp_path)
    assert _decide(network, allowed_hosts=("*",)) == ("decline", "network-not-allowed")
    assert _decide(network, allowed_hosts=("*://*",)) == ("allow_once", None)


def test_install_rules_see_the_host_of_a_scheme_entry(tmp_path: Path) -> None:
    install = ApprovalRequest(
        kind="command", command="pip install --index-url https://pkgs.corp.example/simple x", cwd=tmp_path
    )
    assert _decide(install)[0] == "decline"
    assert _decide(install, allowed_hosts=("https://pkgs.corp.example",))[0] == "allow_for_session"
