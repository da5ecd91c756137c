"""Network approvals from the real codex binary, decided by ``PermissionConfig.allowed_hosts`` (issue 16).

How codex 0.163 asks: with managed network requirements (``[experimental_network] enabled = true`` in
``/etc/codex/requirements.toml``) a sandboxed command's traffic goes through codex's own proxy; a host
not on that proxy's allow-list becomes an ``item/commandExecution/requestApproval`` carrying a
``networkApprovalContext`` (host, protocol) instead of a real command; no ``decline`` is offered, so the
bridge's refusal is ``cancel`` and the work goes on in a new codex turn that tells the agent why.

The test gives codex those requirements without touching the machine: codex runs in a private mount
namespace (``unshare -m``) whose ``/etc`` is an overlay holding the requirements file. The "internet"
is an HTTP server on 127.0.0.1 that codex's proxy reaches as its upstream proxy
(``allow_upstream_proxy``), so an approved request really completes.
"""

from __future__ import annotations

import http.server
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider, find_codex
from agent_fleet.events import Event
from agent_fleet.testing import CodexTestEnv, FunctionCall, Reply, ScriptedModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

HOST = "allowed.agent-fleet.test"
REQUIREMENTS = """\
[experimental_network]
enabled = true
allow_upstream_proxy = true
allow_local_binding = true
"""


class _Upstream(http.server.ThreadingHTTPServer):
    seen: list[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Upstream

    def do_GET(self) -> None:  # a forward proxy sees the absolute URL
        self.server.seen.append(self.path)
        body = b"SERVED-OK"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream(("127.0.0.1", 0), _Handler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def network_options(codex_env: CodexTestEnv, upstream: _Upstream, tmp_path: Path) -> CodexOptions:
    assert shutil.which("unshare"), "the network approval e2e test needs util-linux unshare"
    upper, work = tmp_path / "etc-upper", tmp_path / "etc-work"
    (upper / "codex").mkdir(parents=True)
    work.mkdir()
    (upper / "codex" / "requirements.toml").write_text(REQUIREMENTS)
    mount = f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
    wrapper = tmp_path / "codex-with-managed-network"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec unshare -m --propagation private sh -c \'{mount} && exec "$0" "$@"\' {find_codex()} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    proxy = f"http://127.0.0.1:{upstream.server_address[1]}"
    env = {
        **codex_env.env,
        "HTTP_PROXY": proxy,  # codex's proxy forwards approved requests here (allow_upstream_proxy)
        "http_proxy": proxy,
        "NO_PROXY": "127.0.0.1,localhost",  # the scripted model server is reached directly
        "no_proxy": "127.0.0.1,localhost",
    }
    return CodexOptions(codex_bin=wrapper, config=dict(codex_env.config), env=env)


def _fetch(host: str) -> FunctionCall:
    # Through the sandbox's proxy explicitly: its NO_PROXY lists loopback only, not this host.
    code = (
        "import os, urllib.request; "
        "proxy = urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY']}); "
        "opener = urllib.request.build_opener(proxy); "
        f"print(opener.open('http://{host}/', timeout=20).read().decode())"
    )
    return FunctionCall(name="exec_command", arguments={"cmd": f'python3 -c "{code}"', "login": False})


async def _turn(options: CodexOptions, workspace: Path, allowed: tuple[str, ...]) -> list[Event]:
    spec = Spec(
        prompt="fetch it",
        cwd=workspace,
        sandbox="workspace-write",
        permission=PermissionConfig(allowed_hosts=allowed),
    )
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        return [e async for e in handle.events()]


def _network_verdicts(events: list[Event]) -> list[tuple[dict[str, object], ToolResult]]:
    uses = {
        e.id: e for e in events if isinstance(e, ToolUse) and e.synthetic and e.input.get("kind") == "network"
    }
    return [(uses[e.id].input, e) for e in events if isinstance(e, ToolResult) and e.id in uses]


async def test_an_allowed_host_is_approved_and_the_command_succeeds(
    network_options: CodexOptions, scripted_model: ScriptedModelServer, upstream: _Upstream, workspace: Path
) -> None:
    scripted_model.enqueue(Reply(items=(_fetch(HOST),)), Reply.text("fetched"))
    events = await _turn(network_options, workspace, allowed=("*.agent-fleet.test",))
    [(asked, verdict)] = _network_verdicts(events)
    assert asked["host"] == HOST and asked["protocol"] == "http"
    assert verdict.status == "allow_for_session" and not verdict.is_error
    outputs = [e.output for e in events if isinstance(e, ToolResult) and not e.synthetic]
    assert any("SERVED-OK" in out for out in outputs), outputs
    assert upstream.seen == [f"http://{HOST}/"]
    assert isinstance(events[-1], Result) and events[-1].text == "fetched"


async def test_a_host_off_the_allow_list_is_refused_and_never_reached(
    network_options: CodexOptions, scripted_model: ScriptedModelServer, upstream: _Upstream, workspace: Path
) -> None:
    scripted_model.enqueue(Reply(items=(_fetch("evil.example.test"),)), Reply.text("could not fetch"))
    events = await _turn(network_options, workspace, allowed=("*.agent-fleet.test",))
    [(asked, verdict)] = _network_verdicts(events)
    assert asked["host"] == "evil.example.test"
    # codex offers no plain "decline" for a network approval: the refusal it does offer is "cancel"
    assert verdict.status == "cancel" and verdict.is_error
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d["rule"] for d in denied] == ["network-not-allowed"]
    assert upstream.seen == []
    # the refusal did not end the work: the turn went on, the agent told why
    assert any(isinstance(e, System) and e.subtype == "declined_turn_continued" for e in events)
    assert isinstance(events[-1], Result) and events[-1].text == "could not fetch"
    told = " ".join(scripted_model.requests[-1].user_texts())
    assert "network access to evil.example.test" in told and "network-not-allowed" in told
