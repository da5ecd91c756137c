"""Against the real ``codex exec-server`` (pinned 0.163.0), over stdio and over a loopback websocket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from agent_fleet.errors import ConnectionClosed, UsageError
from agent_fleet.execserver import (
    ExecServerClient,
    ExecServerError,
    InternalServerError,
    InvalidParamsError,
    InvalidRequestError,
    NotFoundError,
    ProcessTimeout,
    WriteRejected,
)

pytestmark = pytest.mark.e2e  # runs the real binary


async def test_thirty_one_shot_runs_are_exact_with_zero_reads(client: ExecServerClient) -> None:
    for i in range(30):
        script = f"printf 'out-{i}\\n'; printf 'err-{i}' >&2; printf 'more-{i}'; exit {i % 7}"
        result = await client.run(["sh", "-c", script], timeout=30)
        assert result.stdout == f"out-{i}\nmore-{i}".encode()
        assert result.stderr == f"err-{i}".encode()
        assert result.exit_code == i % 7
        assert not result.sandbox_denied and not result.truncated
    stats = client.stats
    assert stats.read_calls == 0
    assert dict(stats.requests) == {"initialize": 1, "process/start": 30}
    assert stats.notifications_received >= 30 * 2 and stats.bytes_received > 0 and stats.bytes_sent > 0


async def test_output_streams_in_order(client: ExecServerClient) -> None:
    proc = await client.start(["sh", "-c", "for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; sleep 0.01; done"])
    seen = [(stream, data) async for stream, data in proc.output()]
    result = await proc.wait()
    assert b"".join(d for s, d in seen if s == "stdout") == b"".join(b"o%d\n" % i for i in range(1, 6))
    assert b"".join(d for s, d in seen if s == "stderr") == b"".join(b"e%d\n" % i for i in range(1, 6))
    assert result.stdout.count(b"\n") == 5 and client.stats.read_calls == 0


async def test_output_drains_after_exit(client: ExecServerClient) -> None:
    # 3 MB: process/exited arrives while output is still streaming; completing then would lose data.
    result = await client.run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2"])
    assert result.stdout == b"a" * 3_000_000
    assert result.stderr == b"done\n"
    assert not result.truncated and client.stats.read_calls == 0


async def test_tty_process_echoes_what_is_written(client: ExecServerClient) -> None:
    proc = await client.start(["cat"], tty=True)
    await proc.write(b"ping\n")
    got = b""
    async with asyncio.timeout(10):
        async for stream, data in proc.output():
            assert stream == "pty"
            got += data
            if got.count(b"ping") >= 2:  # the terminal's echo, then cat's copy
                break
    assert got == b"ping\r\nping\r\n"
    await proc.write(b"\x04")  # ^D: end of input on the terminal
    result = await asyncio.wait_for(proc.wait(), 10)
    assert result.exit_code == 0 and result.stdout.startswith(b"ping\r\nping\r\n")


async def test_pipe_stdin(client: ExecServerClient) -> None:
    proc = await client.start(["head", "-n", "1"], pipe_stdin=True)
    await proc.write(b"first line\nsecond\n")
    result = await asyncio.wait_for(proc.wait(), 10)
    assert (result.exit_code, result.stdout) == (0, b"first line\n")


async def test_terminate(client: ExecServerClient) -> None:
    proc = await client.start(["sleep", "30"])
    started = time.monotonic()
    assert await proc.terminate() is True
    result = await asyncio.wait_for(proc.wait(), 10)
    assert result.exit_code != 0 and time.monotonic() - started < 5
    assert await proc.terminate() is False  # no longer running
    assert client.stats.read_calls == 0


async def test_interrupt(client: ExecServerClient) -> None:
    proc = await client.start(["sleep", "30"])
    await proc.interrupt()
    result = await asyncio.wait_for(proc.wait(), 10)
    assert result.exit_code == 130  # 128 + SIGINT


async def test_run_timeout_terminates(client: ExecServerClient) -> None:
    started = time.monotonic()
    with pytest.raises(ProcessTimeout) as info:
        await client.run(["sh", "-c", "echo started; exec sleep 30"], timeout=0.5)
    assert time.monotonic() - started < 5
    assert info.value.stdout == b"started\n" and isinstance(info.value, TimeoutError)


async def test_cwd_and_env(client: ExecServerClient, tmp_path: Path) -> None:
    work = tmp_path / "dir with space"
    work.mkdir()
    result = await client.run(
        ["sh", "-c", 'pwd; echo "$ONLY"; echo "${HOME:-unset}"'], cwd=work, env={"ONLY": "1"}
    )
    assert result.stdout == f"{work}\n1\nunset\n".encode()
    inherited = await client.run(["sh", "-c", 'test -n "$PATH" && echo ok'])
    assert inherited.stdout == b"ok\n"


async def test_fs_round_trip(client: ExecServerClient, tmp_path: Path) -> None:
    fs = client.fs
    root = tmp_path / "fs root"
    await fs.create_directory(root / "a" / "b", recursive=True)
    payload = bytes(range(256)) * 17
    await fs.write_file(root / "a" / "data.bin", payload)
    assert await fs.read_file(root / "a" / "data.bin") == payload
    assert (root / "a" / "data.bin").read_bytes() == payload

    meta = await fs.get_metadata(root / "a" / "data.bin")
    assert (meta.is_file, meta.is_directory, meta.size) == (True, False, len(payload))
    assert (await fs.get_metadata(root / "a")).is_directory

    await fs.copy(root / "a" / "data.bin", root / "copy.bin")
    await fs.copy(root / "a", root / "a2", recursive=True)
    names = sorted((e.file_name, e.is_directory) for e in await fs.read_directory(root))
    assert names == [("a", True), ("a2", True), ("copy.bin", False)]
    assert await fs.read_file(str(root / "a2" / "data.bin")) == payload
    assert await fs.canonicalize(root / "a" / ".." / "copy.bin") == str(root / "copy.bin")

    await fs.remove(root / "copy.bin")
    await fs.remove(root / "a2", recursive=True)
    assert [e.file_name for e in await fs.read_directory(root)] == ["a"]
    assert client.stats.requests["fs/readFile"] == 2


async def test_typed_errors(client: ExecServerClient, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as nf:
        await client.fs.read_file(tmp_path / "missing")
    assert nf.value.code == -32004 and nf.value.method == "fs/readFile" and nf.value.message

    with pytest.raises(InvalidParamsError) as ip:
        await client.start([])
    assert ip.value.code == -32602 and "argv" in ip.value.message

    with pytest.raises(InvalidRequestError) as ir:
        await client.fs.read_file(tmp_path)  # a directory
    assert ir.value.code == -32600

    with pytest.raises(InternalServerError) as ie:
        await client.start([str(tmp_path / "no-such-program")])
    assert ie.value.code == -32603

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    with pytest.raises(InternalServerError):
        await client.fs.remove(tmp_path / "d")  # not empty, not recursive
    with pytest.raises(NotFoundError):
        await client.fs.remove(tmp_path / "nothing")
    await client.fs.remove(tmp_path / "nothing", force=True)

    for exc in (nf.value, ip.value, ir.value, ie.value):
        assert isinstance(exc, ExecServerError)

    with pytest.raises(UsageError):
        await client.fs.read_file("relative/path")  # rejected locally: no meaning on the server

    proc = await client.start(["sleep", "5"])
    with pytest.raises(WriteRejected) as wr:
        await proc.write(b"nobody reads this")
    assert wr.value.status == "stdinClosed"
    await proc.terminate()
    await proc.wait()


async def test_spawned_child_dies_with_the_client() -> None:
    async with ExecServerClient.spawn() as client:
        server_pid = int((await client.run(["sh", "-c", "echo $PPID"])).stdout)
        proc = await client.start(["sh", "-c", "echo $$; exec sleep 30"])
        async for _, data in proc.output():
            sleeper_pid = int(data)
            break
    # close() terminated it; whether its exit event won the race with the close or not, nobody waits
    # forever.
    assert proc.done
    with contextlib.suppress(ConnectionClosed):
        assert (await proc.wait()).exit_code != 0
    deadline = time.monotonic() + 5
    alive = {server_pid, sleeper_pid}
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if _alive(pid)}
        await asyncio.sleep(0.05)
    assert not alive, f"orphans left: {alive}"


async def test_stdio_child_death_fails_processes_clearly() -> None:
    async with ExecServerClient.spawn() as client:
        proc = await client.start(["sh", "-c", "sleep 0.3; kill -KILL $PPID; sleep 1"])
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(proc.wait(), 10)
        assert info.value.exit_code == -9
        with pytest.raises(ConnectionClosed):
            await client.run(["true"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def test_final_read_mode_costs_one_read_per_process(ws_url: str) -> None:
    async with ExecServerClient.connect(ws_url, final_read=True) as client:
        for _ in range(3):
            result = await client.run(["sh", "-c", "echo x"])
            assert (result.exit_code, result.stdout) == (0, b"x\n")
        assert client.stats.read_calls == 3


async def test_client_must_be_opened_first(ws_url: str) -> None:
    opening = ExecServerClient.connect(ws_url)
    client = await opening
    try:
        assert client.session_id and client.environment_info["executorVersion"]
    finally:
        await client.close()
    with pytest.raises(ConnectionClosed):
        await client.run(["true"])
