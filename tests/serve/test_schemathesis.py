"""schemathesis against the served OpenAPI document, every check on, bounded in examples and time
(issue 28 item 14 and Acceptance): no failure, and every route but the open ones answers 401 without the
token. Hermetic: sessions run on a provider double (``fakes.py``), no agent binary starts."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from tests.depth import FUZZ_SECONDS

from agent_fleet.serve import Daemon, ServeConfig

from .conftest import TOKEN
from .fakes import fake_providers

pytestmark = pytest.mark.e2e  # schemathesis's CLI fuzzes a live daemon

MAX_EXAMPLES = 25  # per operation and phase: about a minute on two loaded cores
MAX_TIME = FUZZ_SECONDS  # the whole run: a minute in a deep run (CI), a short pass by default
CONFIG = Path(__file__).with_name("schemathesis.toml")


async def test_the_api_conforms_to_its_openapi_document(
    tmp_path: Path, token_file: Path, workspace: Path
) -> None:
    config = ServeConfig(
        state_dir=tmp_path / "state", token_file=token_file, allow_roots=(workspace,), max_body=64 * 1024
    )
    async with Daemon(config, providers=fake_providers) as daemon:
        st = str(Path(sys.executable).parent / "st")
        argv = [st, "--config-file", str(CONFIG), "run", f"{daemon.url}/v1/openapi.json"]
        argv += ["--checks", "all", "--max-examples", str(MAX_EXAMPLES), "--max-time", str(MAX_TIME)]
        argv += ["--header", f"Authorization: Bearer {TOKEN}", "--workers", "1", "--seed", "28"]
        argv += ["--request-timeout", "20", "--warnings", "off", "--no-color"]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path
        )
        out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-20_000:]
    assert "No issues found" in text or "passed" in text.lower(), text[-5000:]
