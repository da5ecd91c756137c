"""plan_spawn: every Spec field is translated, handled locally, or listed as untranslated."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Spec
from agent_fleet.codex.translate import APPROVAL_POLICY, declared_writable_roots, plan_spawn

# field -> (a non-default value, where it must show up)
CASES: dict[str, tuple[Any, str]] = {
    "prompt": ("do it", "turn.input"),
    "cwd": ("/tmp", "thread.cwd"),
    "model": ("gpt-5.5", "thread.model"),
    "base_instructions": ("be terse", "thread.baseInstructions"),
    "developer_instructions": ("use tabs", "thread.developerInstructions"),
    "reasoning_effort": ("high", "turn.effort"),
    "sandbox": ("read-only", "thread.sandbox"),
    "permission": (PermissionConfig(default="deny"), "local"),
    "mcp_servers": ({"docs": {"command": "docs-mcp"}}, "mcp"),
    "output_schema": ({"type": "object"}, "turn.outputSchema"),
    "mode": ("plan", "turn.input"),
    "images": (("https://example.invalid/a.png",), "turn.input"),
    "config": ({"model_verbosity": "low"}, "thread.config"),
    "timeout": (30.0, "local"),
    "idle_timeout": (60.0, "local"),
    "tools": ((len,), "thread.dynamicTools"),
    "answers": ({"Database": "sqlite"}, "local"),
    "env": ({"CI": "1"}, "thread.config"),
    "temp_dir": ("/tmp/box", "local"),  # the session's box (codex._box)
}
# Fields the app-server provider does not carry yet: reported, never dropped silently.
UNTRANSLATED: dict[str, Any] = {"max_turns": 3, "max_cost_usd": 1.0}


def test_every_spec_field_has_a_case() -> None:
    assert {f.name for f in fields(Spec)} == set(CASES) | set(UNTRANSLATED)


@pytest.mark.parametrize("name", sorted(UNTRANSLATED))
def test_field_not_carried_is_reported_when_set(name: str) -> None:
    assert not plan_spawn(Spec(prompt="p")).untranslated
    plan = plan_spawn(Spec(prompt="p", **{name: UNTRANSLATED[name]}))
    assert [u.field for u in plan.untranslated] == [name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_field_lands_where_expected(name: str) -> None:
    value, where = CASES[name]
    base = Spec(prompt="p")
    spec = Spec(**{**{"prompt": "p"}, name: value})
    plan, plain = plan_spawn(spec), plan_spawn(base)
    assert not plan.untranslated
    match where.split("."):
        case ["thread", key]:
            assert plan.thread_params[key] != plain.thread_params.get(key)
        case ["turn", key]:
            assert plan.turn_params[key] != plain.turn_params.get(key)
        case ["local"]:
            assert name in plan.local
        case ["mcp"]:
            assert plan.thread_params["config"] == {"mcp_servers": {"docs": {"command": "docs-mcp"}}}


def test_mcp_servers_are_the_threads_own_config() -> None:
    # Per-thread config: two sessions may define one server name differently (no shared user config).
    a = plan_spawn(Spec(prompt="p", mcp_servers={"docs": {"command": "a"}}))
    b = plan_spawn(Spec(prompt="p", mcp_servers={"docs": {"command": "b"}}))
    assert a.thread_params["config"]["mcp_servers"]["docs"] == {"command": "a"}
    assert b.thread_params["config"]["mcp_servers"]["docs"] == {"command": "b"}
    merged = plan_spawn(
        Spec(
            prompt="p",
            config={
                "model_verbosity": "low",
                "mcp_servers": {"x": {"command": "x"}, "docs": {"command": "old"}},
            },
            mcp_servers={"docs": {"command": "new"}},
        )
    )
    assert merged.thread_params["config"] == {
        "model_verbosity": "low",
        "mcp_servers": {"x": {"command": "x"}, "docs": {"command": "new"}},
    }


def test_every_thread_asks_for_approval() -> None:
    assert plan_spawn(Spec(prompt="p")).thread_params["approvalPolicy"] == APPROVAL_POLICY == "untrusted"


def test_turn_input_text_mode_and_images(tmp_path: Path) -> None:
    image = tmp_path / "shot.png"
    plan = plan_spawn(Spec(prompt="look", mode="chat", images=(image, "https://h.invalid/x.png")))
    text, local, remote = plan.turn_params["input"]
    assert text["type"] == "text" and text["text"].endswith("look") and text["text"] != "look"
    assert local == {"type": "localImage", "path": str(image.resolve())}
    assert remote == {"type": "image", "url": "https://h.invalid/x.png"}
    assert plan_spawn(Spec(prompt="look")).turn_params["input"] == [{"type": "text", "text": "look"}]


def test_env_is_the_threads_shell_environment_over_the_providers_own() -> None:
    plan = plan_spawn(
        Spec(prompt="p", env={"CI": "1"}, config={"shell_environment_policy.set": {"A": "spec", "CI": "0"}}),
        {"shell_environment_policy": {"set": {"B": "provider"}}},
    )
    # a key path override replaces the whole table: the provider's and the spec's variables come along
    assert plan.thread_params["config"]["shell_environment_policy.set"] == {
        "B": "provider",
        "A": "spec",
        "CI": "1",
    }
    assert (
        "config"
        not in plan_spawn(Spec(prompt="p"), {"shell_environment_policy.set": {"B": "x"}}).thread_params
    )


def test_declared_writable_roots_most_specific_first() -> None:
    nested = {"sandbox_workspace_write": {"writable_roots": ["~/cache", "build", 7]}}
    dotted = {"sandbox_workspace_write.writable_roots": ["/srv/shared"]}
    home = os.path.expanduser("~")
    assert declared_writable_roots(nested, dotted) == (f"{home}/cache", "build")
    assert declared_writable_roots({}, dotted) == ("/srv/shared",)
    assert declared_writable_roots({"sandbox_workspace_write": {"writable_roots": "/"}}, dotted) == ()
    assert declared_writable_roots({}, {}) == ()
