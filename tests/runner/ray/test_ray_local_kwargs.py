"""The local instance's arguments: a Ray root short enough for Unix socket paths under any TMPDIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.runner._ray_local import local_init_kwargs


def test_a_short_tmpdir_keeps_rays_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tempfile.tempdir", "/tmp")
    assert "_temp_dir" not in local_init_kwargs(1 << 20)


def test_a_long_tmpdir_moves_rays_files_to_a_short_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # A socket path may be 107 bytes; under this TMPDIR Ray's plasma_store socket alone would be ~140.
    monkeypatch.setattr("tempfile.tempdir", "/tmp/pytest-of-root/pytest-6/test_cli_without_an_address_st0/t")
    root = local_init_kwargs(1 << 20)["_temp_dir"]
    session = "/session_2026-11-26_15-19-01_962145_4194304/sockets/plasma_store"
    assert len(root + session) <= 107
