"""The offline try-out: a scripted agent that does any task the same plain way, and a repository for it.

``python -m agent_fleet.testing`` (see ``__main__``) serves it so that ``agent-fleet run`` and
``agent-fleet batch`` can be tried from the command line with no credentials and no network.

The scripted agent reads each request instead of replaying a queue, since the sessions of a batch
interleave on one server: the task is its first prompt, the turn is how many prompts the session has
sent (first prompt + follow-ups), the step is how many tool outputs follow the latest prompt. In turn 1:

1. adds ``<first words of the prompt>.md`` with ``apply_patch``;
2. runs ``cat`` on it (accepted, runs in the sandbox);
3. runs ``git reset --hard`` (declined by the approval policy's built-in rule);
4. commits, asking to run outside the sandbox (``workspace-write`` keeps ``.git`` read-only);
5. says it is done.

A prompt containing "forgets to commit" skips step 4 in turn 1, so a ``--require-commit`` gate fails
and the runner sends a follow-up turn, in which the agent commits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

from agent_fleet.testing._repo import make_repo, shell_call
from agent_fleet.testing._server import (
    CustomToolCall,
    Item,
    ReasoningItem,
    RecordedRequest,
    Reply,
    Text,
)

FORGETS_TO_COMMIT: Final = "forgets to commit"
_USAGE: Final = {"input_tokens": 1200, "output_tokens": 60}

EXAMPLE_TASKS: Final[tuple[dict[str, Any], ...]] = (
    {"id": "greeting", "prompt": "Add a greeting for new contributors and commit it."},
    {"id": "release-notes", "prompt": "Write release notes for version 0.2 and commit them."},
    {
        "id": "todo",
        "prompt": f"Add a todo list and commit it. (The scripted agent {FORGETS_TO_COMMIT} at first: "
        "the gate sends it back.)",
        "require_commit": True,
    },
)


def _prompt_texts(request: RecordedRequest) -> tuple[list[str], int]:
    """The user prompts of the request (codex's own ``<context>`` messages left out), and how many
    tool outputs follow the latest one."""
    prompts: list[str] = []
    last = -1
    for index, item in enumerate(request.input):
        if item.get("type") != "message" or item.get("role") != "user":
            continue
        content = item.get("content")
        parts = content if isinstance(content, list) else []
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        # "<...>" is codex's own context; "[agent-fleet] ..." is the provider telling the agent that a
        # request was declined (the turn goes on after a refusal codex only lets us send as a cancel):
        # part of the same scripted turn, not a prompt.
        text = "\n".join(t for t in texts if t and not t.lstrip().startswith(("<", "[agent-fleet]")))
        if text:
            prompts.append(text)
            last = index
    outputs = ("function_call_output", "custom_tool_call_output")
    steps = sum(1 for item in request.input[last + 1 :] if item.get("type") in outputs) if prompts else 0
    return prompts, steps


def note_path(prompt: str) -> str:
    """The file the scripted agent writes for ``prompt``, named after its first words."""
    words = re.findall(r"[a-z0-9]+", prompt.lower())[:4]
    return f"{'-'.join(words) or 'note'}.md"


def _steps(prompt: str, turn: int) -> list[Item]:
    path = note_path(prompt)
    commit = shell_call(f"git add -A && git commit -q -m 'Add {path}'", escalate=True)
    forgetful = FORGETS_TO_COMMIT in prompt
    if turn == 0:
        patch = f"*** Begin Patch\n*** Add File: {path}\n+{prompt}\n*** End Patch\n"
        steps: list[Item] = [
            CustomToolCall(name="apply_patch", input=patch),
            shell_call(f"cat {path}"),
            shell_call("git reset --hard"),
        ]
        return steps if forgetful else [*steps, commit]
    if turn == 1 and forgetful:
        return [commit]
    return []


def tryout_agent(request: RecordedRequest) -> Reply | None:
    """The reply of the try-out's scripted agent to ``request`` (``None`` for a request with no prompt)."""
    prompts, step = _prompt_texts(request)
    if not prompts:
        return None
    turn = len(prompts) - 1
    steps = _steps(prompts[0], turn)
    if step < len(steps):
        items: tuple[Item, ...] = (steps[step],)
        if step == 0 and turn == 0:
            items = (ReasoningItem(summary=f"Plan: write {note_path(prompts[0])}, check it, commit."), *items)
        return Reply(items=items, usage=_USAGE)
    done = "Done: the file is written and committed. (My `git reset --hard` was declined by the policy.)"
    return Reply(items=(Text(text=done if turn == 0 else "Committed now."),), usage=_USAGE)


def make_example(directory: Path) -> tuple[Path, Path]:
    """Create ``directory/repo`` (a git repository with one commit) and ``directory/tasks.jsonl``.

    Raises ``FileExistsError`` when either is already there (nothing is overwritten).
    """
    repo, tasks = directory / "repo", directory / "tasks.jsonl"
    for path in (repo, tasks):
        if path.exists():
            raise FileExistsError(f"{path} already exists")
    make_repo(repo, who="try-out")
    tasks.write_text("".join(json.dumps(task) + "\n" for task in EXAMPLE_TASKS), encoding="utf-8")
    return repo, tasks
