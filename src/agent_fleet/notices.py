"""Every ``System.subtype`` agent-fleet emits, declared once with what it means.

A closed set, like ``events.ERROR_CODES``: a notice is data a consumer may match on, so its name is
part of the interface. ``tests/test_notices.py`` reads every ``System(subtype=...)`` (and every runner
notice) in the source and fails on one that is not declared here; ``docs/events.md`` lists them.

Names: a bare word for what a provider reports (the same word from every provider that reports it),
``runner.<what>`` for the task runner's own notices, ``review.<what>`` for code-review turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from agent_fleet.contract import Untranslated
from agent_fleet.events import System

__all__ = ["NOTICE_SUBTYPES", "SPEC_UNSUPPORTED", "spec_unsupported"]

#: The subtype of a ``Spec`` field a provider ignored because it cannot honour it.
SPEC_UNSUPPORTED: Final = "spec_unsupported"

NOTICE_SUBTYPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # -- every provider ------------------------------------------------------------------------
        SPEC_UNSUPPORTED: "a Spec field this provider cannot honour was ignored (data: field, reason)",
        "approval_denied": "the approval policy declined a request (data: rule, reason, what was asked)",
        "events_coalesced": (
            "the reader fell event_buffer events behind: text and reasoning deltas after this are merged "
            "(data: bound)"
        ),
        "user_input": (
            "the agent or an MCP server asked for input and was answered "
            "(data: kind, questions or message, action, source; never the answers)"
        ),
        "input_handler_failed": "the input_handler raised or returned no InputAnswer; the default answered",
        "no_os_sandbox": (
            "the session runs without an OS sandbox (danger-full-access, or a sandbox that cannot start "
            "where the caller allowed that): the approval policy is the only guard (data: provider, reason)"
        ),
        # -- codex (app-server and exec) -----------------------------------------------------------------
        "stream_error": "codex exec reported a stream or model error; it may be retrying (data: message)",
        "stream_retry": (
            "codex retries the model stream: discard text streamed since the last AssistantMessage, "
            "it comes again (data: message; cause, kind, http_status, attempt and max_attempts when codex "
            "gives them: it gives up after max_attempts)"
        ),
        "warning": "a codex warning or deprecation notice (data: method and its params)",
        "session": (
            "the session's thread started or resumed (data: model, model_provider actually used, "
            "codex_version, sandbox; sandbox danger-full-access: nothing confines the agent, the approval "
            "policy is the only guard)"
        ),
        "model_rerouted": "codex answered with another model than the one asked for (data: its params)",
        "error_item": "codex exec reported an error item inside a turn that went on (data: message)",
        "codex_refused": (
            "codex itself refused a command: its sandbox stopped it (kind sandbox: item_id, command, "
            "message), it rejected an escalation (kind escalation: message), or the session's box stopped "
            "codex re-running a command outside the sandbox without an accepted escalation (kind "
            "unsandboxed_run: command)"
        ),
        # -- agent-fleet serve ----------------------------------------------------------------------------
        "approval_pending": (
            "the daemon parked a request for a person (data: approval_id, kind, command or paths, cwd, "
            "deadline, decide: the API path, dashboard: its URL)"
        ),
        "approval_decided": "a parked request was decided or timed out (data: approval_id, decision, rule)",
        "approval_handler_failed": (
            "the approval_handler raised or returned no Decision; the request was declined (data: error)"
        ),
        "declined_turn_continued": (
            "codex offered no decline, so a refusal was sent as cancel; the turn goes on with a new codex "
            "turn telling the agent what was declined (data: reason)"
        ),
        "unknown_approval_kind": (
            "an approval method (or elicitation approval kind) agent-fleet does not know; declined "
            "(data: method, kind)"
        ),
        "unknown_approval_field": (
            "an approval carried a field agent-fleet does not know where it decides safety (a file "
            "change, a permission profile); declined (data: method, field)"
        ),
        "auth_failed": (
            "codex's ChatGPT tokens could not be refreshed while this session was idle; its next turn "
            "may fail the same way (data: message, reason)"
        ),
        "unhandled_server_request": "a codex server request agent-fleet does not handle; answered not-found",
        "subagent_turn": (
            "a sub-agent's turn ended (its events carry agent=<its session id>); never the session's own "
            "end (data: status completed or an error code, text or message)"
        ),
        "codex_version": (
            "the codex binary is not the version agent-fleet is tested with, but within the supported "
            "range: it runs; sent once (data: version, message)"
        ),
        "notice": "a codex account, configuration or thread-metadata notice (data: method and its params)",
        "notices_dropped": "notices were dropped because nobody read them in time (data: count)",
        "review.entered": "a review turn entered review mode (data: target)",
        "review.exited": "a review turn left review mode (data: the review text)",
        # -- Claude --------------------------------------------------------------------------------------
        "init": "the Claude Code session started (data: session_id, model, cwd, tools, ...)",
        "conversation_reset": "Claude Code reset the conversation (data: session_id)",
        "inject_late": "injected input reached Claude after the turn ended and was dropped (data: count)",
        "claude_system": "another Claude Code system message, passed through (data: subtype, data)",
        # -- the task runner -----------------------------------------------------------------------------
        "runner.started": (
            "a task started (data: prompt, cwd, provider, model, max_followups, approvals_enforced, "
            "sandbox, os_sandbox; danger-full-access or os_sandbox null: the approval policy is the "
            "only guard)"
        ),
        "runner.session": (
            "the task's session exists, new or resumed (data: session_id, resumed, start_head: the commit "
            "its work is measured from)"
        ),
        "runner.resume_failed": "an interrupted session could not be resumed; a new one starts "
        "(data: session_id, reason)",
        "runner.followup": "the runner sent a follow-up turn (data: number, limit, prompt)",
        "runner.gate_started": "the task's gate is running (data: require_commit, command)",
        "runner.gate": (
            "the gate's verdict (data: passed, summary, checks, output_tail: the failed checks' output, "
            "its last 2,000 characters)"
        ),
        "runner.review_started": "a code review of the task's changes started (data: number, target)",
        "runner.review": "a code review's findings (data: number, thread_id, findings, blocking)",
        "runner.review_skipped": "no review was run (data: reason)",
        "runner.rate_limited": "a rate limit is near: the runner waits before a turn (data: used, wait)",
        "runner.retry": (
            "the runner runs a turn again after a retryable failure "
            "(data: attempt, max_attempts, delay, code, message)"
        ),
        "runner.finished": "the task ended (data: its TaskResult, without the final text)",
        "runner.shared_tree": (
            "the task shares its working tree with other tasks of the batch (no worktrees): its files "
            "changed are only what its session reported (data: tree, tasks)"
        ),
        "runner.batch_paused": (
            "every running task lost the model: the batch starts nothing and burns no retry until it "
            "answers (data: cause, tasks, limit: seconds before the batch stops)"
        ),
        "runner.batch_resumed": "the model answers again: the paused batch goes on (data: cause)",
        "runner.placed": (
            "Ray: a task attempt was placed on a node (data: node_id, hostname, actor, attempt, epoch)"
        ),
        "runner.worktree": (
            "Ray: the attempt's worktree on its node (data: path, branch, attempt_branch, node_id)"
        ),
        "runner.attempt_failed": (
            "Ray: an attempt was lost with its node or actor, or abandoned when its node was given up "
            "(data: attempt, epoch, node_id, hostname, reason, retry)"
        ),
        "runner.node_excluded": (
            "Ray, about the batch (task_id empty): no more work goes to a node: its provider did not "
            "start or failed, it was fenced or not heard from, or --exclude-node named it "
            "(data: node_id, hostname, where, reason, running: the tasks whose attempts were abandoned)"
        ),
        "runner.push": (
            "Ray --push: the task's branch was pushed or refused (data: branch, commit, pushed, error)"
        ),
    }
)


def spec_unsupported(items: Iterable[Untranslated]) -> list[System]:
    """The notices for the ``Spec`` fields a provider ignored, one per field."""
    return [
        System(subtype="spec_unsupported", data={"field": item.field, "reason": item.reason})
        for item in items
    ]
