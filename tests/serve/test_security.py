"""The daemon's gate, hermetic (no session is started, so no agent binary runs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet import Spec
from agent_fleet.cli import cli
from agent_fleet.errors import ProviderUnavailable, TransportError, UsageError
from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.serve._floor import Refused
from agent_fleet.serve._openapi import OPENAPI

from .conftest import TOKEN, MakeDaemon, PermissionConfig, client

ENDPOINTS = [
    ("GET", "/"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/info"),
    ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/x"),
    ("GET", "/v1/sessions/x/events"),
    ("POST", "/v1/sessions/x/turns"),
    ("POST", "/v1/sessions/x/inject"),
    ("POST", "/v1/sessions/x/stop"),
    ("GET", "/v1/approvals"),
    ("POST", "/v1/approvals/a1"),
    ("GET", "/v1/batches"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/batches/x"),
    ("GET", "/v1/batches/x/report"),
    ("POST", "/v1/batches/x/resume"),
    ("POST", "/v1/batches/attach"),
    ("POST", "/v1/batches/x/notices"),
    ("POST", "/v1/batches/x/stop"),
    ("GET", "/sessions/x"),
    ("GET", "/v1/updates"),  # (a stream: not in the first four, read with the token)
]


async def test_every_endpoint_but_healthz_needs_the_token(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    async with client(daemon, token=None) as anonymous, client(daemon, token="wrong-" + TOKEN) as wrong:
        assert (await anonymous.get("/healthz")).json()["ok"] is True
        for method, path in ENDPOINTS:
            for http in (anonymous, wrong):
                response = await http.request(method, path, json={})
                assert response.status_code == 401, (method, path, response.status_code)
                assert TOKEN not in response.text
    async with client(daemon) as http:
        assert (await http.get("/v1/info")).status_code == 200
        assert (await http.get("/v1/sessions/nope")).status_code == 404


async def test_a_cookie_alone_cannot_change_state_without_the_page_header(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    async with client(daemon, token=None) as http:
        login = await http.post("/login", data={"token": TOKEN})
        assert login.status_code == 303
        assert (await http.get("/v1/sessions")).status_code == 200  # the cookie reads
        assert (await http.post("/v1/approvals/a1", json={"decision": "decline"})).status_code == 401
        ok = await http.post("/v1/approvals/a1", json={"decision": "decline"}, headers={"X-Agent-Fleet": "1"})
        assert ok.status_code == 404  # authorised; there is just no such approval


async def test_bodies_over_the_limit_are_refused(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon(max_body=4096)
    async with client(daemon) as http:
        response = await http.post("/v1/sessions", json={"prompt": "x" * 10_000})
        assert response.status_code == 413

        async def chunks():  # no Content-Length: bounded while read
            for _ in range(10):
                yield b"x" * 1000

        for path in ("/v1/sessions", "/v1/batches", "/login"):  # issue 28: a chunked body was a 400
            form = {"Content-Type": "application/x-www-form-urlencoded"} if path == "/login" else {}
            streamed = await http.post(path, content=chunks(), headers=form)
            assert streamed.status_code == 413, (path, streamed.status_code)
            assert "over 4096 bytes" in streamed.json()["error"]["message"]


async def test_cwd_outside_the_allowed_roots_is_refused(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    link = tmp_path / "workspace" / "escape"
    link.symlink_to(outside)
    daemon = await make_daemon()
    async with client(daemon) as http:
        for cwd in (outside, link, tmp_path / "workspace" / ".." / "elsewhere"):
            response = await http.post("/v1/sessions", json={"prompt": "hi", "cwd": str(cwd)})
            assert response.status_code == 403, response.text
        bad = await http.post("/v1/sessions", json={"prompt": "hi", "nope": 1})
        assert bad.status_code == 400 and "nope" in bad.json()["error"]["message"]
        tasks = [{"id": "a", "prompt": "p", "cwd": str(outside)}]
        batch = await http.post("/v1/batches", json={"tasks": tasks})
        assert batch.status_code == 403


def test_a_non_loopback_host_needs_a_token_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a loopback address"):
        ServeConfig(host="0.0.0.0", state_dir=tmp_path)
    ServeConfig(host="0.0.0.0", state_dir=tmp_path, token_file=tmp_path / "t")  # allowed with a token
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a loopback address" in result.output
    assert "Traceback" not in result.output


async def test_a_generated_token_is_private_and_never_printed(tmp_path: Path) -> None:
    daemon = Daemon(ServeConfig(state_dir=tmp_path / "state", allow_roots=(tmp_path,)))
    await daemon.start()
    try:
        mode = stat.S_IMODE(daemon.token_path.stat().st_mode)
        assert mode == 0o600
        assert len(daemon.token) >= 32
        assert daemon.port > 0  # --port 0 picked one
        async with client(daemon, token=daemon.token) as http:
            for method, path in ENDPOINTS[:4]:
                response = await http.request(method, path)
                assert daemon.token not in response.text
    finally:
        await daemon.close()
    again = Daemon(ServeConfig(state_dir=tmp_path / "state", allow_roots=(tmp_path,)))
    assert again.token == daemon.token  # kept across restarts
    await again.close()


async def test_the_openapi_document_describes_every_route(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    served = {
        (method.lower(), route.path)
        for route in daemon.app.starlette.routes
        for method in getattr(route, "methods", None) or ()
        if method != "HEAD"
    }
    described = {(method, path) for path, ops in OPENAPI["paths"].items() for method in ops}
    assert served == described
    # The token test walks every route but the open ones.
    walked = {
        (method.lower(), path.replace("sessions/x", "sessions/{sid}").replace("batches/x", "batches/{bid}"))
        for method, path in ENDPOINTS
    }
    walked = {(m, p.replace("/a1", "/{aid}")) for m, p in walked}
    assert walked == {(m, p) for m, p in served if p not in ("/healthz", "/login")}


@pytest.mark.parametrize("raw", ["²", "١٢", "-1", "1.0", "0x1", "9" * 30, str(2**63)])
async def test_a_last_event_id_that_is_not_a_small_ascii_number_is_a_400(
    make_daemon: MakeDaemon, raw: str
) -> None:
    daemon = await make_daemon()
    daemon.store.add_session("s1", "codex", {"prompt": "p"})  # a recorded session: no agent runs
    daemon.store.update("s1", state="idle")
    async with client(daemon) as http:
        try:  # a header travels as bytes, read back as latin-1: "²" arrives as "²"
            header = raw.encode("latin-1")
        except UnicodeEncodeError:
            header = raw.encode()
        for where in ({"headers": {"Last-Event-ID": header}}, {"params": {"after": raw}}):
            response = await http.get("/v1/sessions/s1/events", **where)  # type: ignore[arg-type]
            assert response.status_code == 400, (raw, response.status_code, response.text)
            assert "Last-Event-ID" in response.json()["error"]["message"]
        ok = await http.get("/v1/sessions/s1/events", headers={"Last-Event-ID": "0"})
        assert ok.status_code == 200


async def test_login_checks_the_token_before_it_sets_a_cookie(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    async with client(daemon, token=None) as http:
        wrong = await http.post("/login", data={"token": "not-the-token"})
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers
        assert TOKEN not in wrong.text
        assert (await http.get("/v1/sessions")).status_code == 401
        right = await http.post("/login", data={"token": TOKEN})
        assert right.status_code == 303
        cookie = right.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert "secure" not in cookie.replace("samesite", "")  # plain http on loopback
        assert (await http.get("/v1/sessions")).status_code == 200


async def test_the_cookie_is_secure_when_the_daemon_is_not_on_loopback(
    tmp_path: Path, token_file: Path
) -> None:
    import httpx

    # Not started (nothing binds 0.0.0.0): the ASGI app is driven in process.
    daemon = Daemon(ServeConfig(host="0.0.0.0", state_dir=tmp_path / "s", token_file=token_file))
    try:
        transport = httpx.ASGITransport(app=daemon.app.asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://192.0.2.7") as http:
            right = await http.post("/login", data={"token": TOKEN})
            assert right.status_code == 303
            assert "; secure" in right.headers["set-cookie"].lower()
    finally:
        await daemon.close()


async def test_a_token_file_others_can_read_is_refused_and_one_the_group_can_read_warned_about(
    tmp_path: Path, token_file: Path
) -> None:
    os.chmod(token_file, 0o604)
    with pytest.raises(UsageError, match="chmod 600"):
        Daemon(ServeConfig(state_dir=tmp_path / "s", token_file=token_file))
    os.chmod(token_file, 0o640)
    daemon = Daemon(ServeConfig(state_dir=tmp_path / "s", token_file=token_file))
    await daemon.close()
    assert len(daemon.warnings) == 1 and "group" in daemon.warnings[0]
    os.chmod(token_file, 0o600)
    daemon = Daemon(ServeConfig(state_dir=tmp_path / "s", token_file=token_file))
    await daemon.close()
    assert daemon.warnings == []


def test_serve_exits_2_on_a_token_file_others_can_read(tmp_path: Path, token_file: Path) -> None:
    os.chmod(token_file, 0o644)
    argv = ["serve", "--state-dir", str(tmp_path / "s"), "--token-file", str(token_file)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2 and "chmod 600" in result.output


async def test_the_state_dir_and_the_database_are_private(tmp_path: Path) -> None:
    state = tmp_path / "fresh" / "state"
    daemon = Daemon(ServeConfig(state_dir=state, allow_roots=(tmp_path,)))
    try:
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        for name in ("sessions.sqlite3", "sessions.sqlite3-wal"):
            assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    finally:
        await daemon.close()


REFUSED_SPECS = [
    ({"sandbox": "danger-full-access"}, "danger-full-access"),
    ({"config": {"model_provider": "mine"}}, "config overrides"),
    ({"mcp_servers": {"sh": {"command": "/bin/sh", "args": ["-c", "id"]}}}, "starts a process"),
    ({"permission": {"allowed_hosts": ["*"]}}, "not within the daemon's"),
    ({"permission": {"mcp_tools": ["shell/*"]}}, "not within the daemon's"),
    ({"env": {"GIT_CONFIG_COUNT": "1"}}, "'env'"),  # issue 28: sessions and templates took it
    ({"temp_dir": "/etc"}, "outside the daemon's --allow-root"),  # a writable root of the sandbox
    ({"images": ["/etc/passwd"]}, "outside the daemon's --allow-root"),
]


@pytest.mark.parametrize(("fields", "message"), REFUSED_SPECS)
async def test_what_escapes_the_sandbox_or_the_policy_is_refused(
    make_daemon: MakeDaemon, workspace: Path, fields: dict[str, object], message: str
) -> None:
    daemon = await make_daemon()  # no provider is started: the refusal comes first
    async with client(daemon) as http:
        session = await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace), **fields})
        assert session.status_code == 403, session.text
        assert message in session.json()["error"]["message"]
        batch = await http.post(
            "/v1/batches",
            json={"tasks": [{"id": "a", "prompt": "p"}], "spec": {"cwd": str(workspace), **fields}},
        )
        assert batch.status_code == 403, batch.text
        assert message in batch.json()["error"]["message"]
    assert daemon.sessions.provider_pids() == {}


@pytest.mark.parametrize(
    ("line", "extra", "message"),
    [
        ({"sandbox": "danger-full-access"}, {}, "danger-full-access"),
        ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, {}, "'env'"),
        ({"gate_cmd": "curl -o f https://example.com"}, {}, "rule user-deny"),
        ({"gate_cmd": "rm -rf ~"}, {}, "rule rm-root"),
        ({}, {"gate_cmd": "git reset --hard"}, "rule git-reset-hard"),
        ({"deny": ["^x"], "gate_cmd": "curl -o f https://example.com"}, {}, "rule user-deny"),
    ],
)
async def test_batch_task_lines_and_gates_are_held_to_the_floor(
    make_daemon: MakeDaemon,
    workspace: Path,
    line: dict[str, object],
    extra: dict[str, object],
    message: str,
) -> None:
    daemon = await make_daemon(permission=PermissionConfig(disallow_patterns=("^curl",)))
    async with client(daemon) as http:
        tasks = [{"id": "ok", "prompt": "p"}, {"id": "bad", "prompt": "p", **line}]
        response = await http.post(
            "/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}, **extra}
        )
        assert response.status_code == 403, response.text
        text = response.json()["error"]["message"]
        assert message in text
        assert ("task 'ok'" if extra else "task 'bad'") in text  # the template's gate fails every task
    assert daemon.sessions.provider_pids() == {}


async def test_a_trusting_daemon_takes_what_it_would_refuse(make_daemon: MakeDaemon, workspace: Path) -> None:
    daemon = await make_daemon(trust_clients=True)
    spec = daemon.floor.spec(Spec(prompt="p", sandbox="danger-full-access", config={"a": 1}))
    assert spec.sandbox == "danger-full-access" and spec.config == {"a": 1}


async def test_a_task_asking_for_another_provider_is_refused(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon()
    async with client(daemon) as http:
        tasks = [{"id": "a", "prompt": "p", "provider": "claude"}]
        response = await http.post("/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}})
    assert response.status_code == 400
    assert "not the batch's (codex)" in response.json()["error"]["message"]


def test_serve_takes_the_permission_flags_of_run_and_batch(
    tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_fleet.serve

    seen: list[ServeConfig] = []

    def daemon(config: ServeConfig) -> None:  # stands in for the daemon: nothing listens
        seen.append(config)
        raise UsageError("stop here")

    monkeypatch.setattr(agent_fleet.serve, "Daemon", daemon)
    argv = ["serve", "--state-dir", str(tmp_path / "s"), "--token-file", str(token_file)]
    argv += ["--deny", "^rm", "--allow-host", "*.corp.example", "--allow-mcp", "docs/*"]
    argv += ["--default-approval", "ask", "--trust-clients", "-c", 'model="m1"']
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2 and "stop here" in result.output
    [config] = seen
    assert config.permission == PermissionConfig(
        disallow_patterns=("^rm",), default="ask", allowed_hosts=("*.corp.example",), mcp_tools=("docs/*",)
    )
    assert config.trust_clients is True
    assert config.port == 8765  # the documented default
    # Every kind the -c overrides apply to gets them (a batch or session may ask for another kind).
    assert config.options["codex"].config == {"model": "m1"}
    assert config.options["codex-exec"].config == {"model": "m1"}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (TransportError, 502),
        (ProviderUnavailable, 503),
        (UsageError, 400),
        (Refused, 403),
    ],
)
async def test_error_messages_are_redacted(
    make_daemon: MakeDaemon, workspace: Path, monkeypatch: pytest.MonkeyPatch, error: type, status: int
) -> None:
    secret = "sk-proj-" + "x7" * 16
    daemon = await make_daemon()

    async def create(*args: object, **kwargs: object) -> None:  # a provider that quotes a credential
        raise error(f"codex exited: stderr says Authorization: Bearer {secret} and {TOKEN}")

    monkeypatch.setattr(daemon.sessions, "create", create)
    async with client(daemon) as http:
        response = await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})
    assert response.status_code == status
    assert "codex exited" in response.text and "[REDACTED]" in response.text
    assert secret not in response.text and TOKEN not in response.text


def test_a_state_directory_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = CliRunner().invoke(cli, ["serve", "--port", "0", "--state-dir", str(blocker / "state")])
    assert result.exit_code == 2, result.output
    assert "cannot use the state directory" in result.output and "--state-dir" in result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
