"""Archiving finished threads against the real codex app-server: an archived thread leaves the list,
``unarchive_session`` brings it back, and ``resume`` continues an archived thread (codex refuses
``thread/resume`` of an archived one, so the provider unarchives it first)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import RPCError
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


async def test_resume_brings_an_archived_thread_back_with_its_history(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("first answer"), Reply.text("second answer"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="remember the word marmalade", cwd=workspace))
        await asyncio.wait_for(handle.wait(), 60)
        await handle.stop()
        await provider.archive_session(handle.session_id)
        assert handle.session_id not in {s.id for s in await provider.list_sessions()}
        with pytest.raises(RPCError):  # codex's own refusal: the thread is archived
            await provider.connection.request("thread/resume", {"threadId": handle.session_id}, timeout=30)

        again = await provider.resume(handle.session_id, Spec(prompt="what was the word?", cwd=workspace))
        result = await asyncio.wait_for(again.wait(), 60)
        assert result.text == "second answer" and result.session_id == handle.session_id
        assert "remember the word marmalade" in " ".join(scripted_model.requests[-1].user_texts())
        assert handle.session_id in {s.id for s in await provider.list_sessions()}
        await again.stop()


async def test_unarchive_session_lists_it_again_and_errors_stay_errors(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("done"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="one", cwd=workspace))
        await asyncio.wait_for(handle.wait(), 60)
        await handle.stop()
        await provider.archive_session(handle.session_id)
        assert handle.session_id in {s.id for s in await provider.list_sessions(archived=True)}
        await provider.unarchive_session(handle.session_id)
        assert handle.session_id in {s.id for s in await provider.list_sessions()}
        assert handle.session_id not in {s.id for s in await provider.list_sessions(archived=True)}
        with pytest.raises(RPCError):  # not archived (any more)
            await provider.unarchive_session(handle.session_id)
        # a thread codex never had: resume's own refusal, not the unarchive's
        with pytest.raises(RPCError, match="thread/resume"):
            await provider.resume("01a2186f-0000-7000-8000-000000000000", Spec(prompt="x", cwd=workspace))
