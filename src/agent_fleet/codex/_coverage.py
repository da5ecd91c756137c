"""What agent-fleet does with every notification, server request and item type of the app-server
protocol, and the script that checks it against the pinned binary's schema.

``python -m agent_fleet.codex._coverage`` runs ``codex app-server generate-json-schema --experimental``,
fails (exit 1) on any name this table does not classify, and rewrites the coverage section of
``docs/codex-protocol-notes.md``; ``--check`` only compares (exit 1 when the docs are stale).
``tests/codex/test_coverage.py`` holds the table to the mapping code and (e2e) to the binary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["ITEM_TYPES", "NOTIFICATIONS", "SERVER_REQUESTS", "render", "schema_names"]

TYPED: Final = "typed"
NOTICE: Final = "notice"
DROPPED: Final = "dropped"
OPTED_OUT: Final = "opted out"
UNKNOWN: Final = "UnknownEvent"

_U = (UNKNOWN, "passed through with its threadId/turnId")

#: method -> (kind, what agent-fleet does with it)
NOTIFICATIONS: Final[Mapping[str, tuple[str, str]]] = {
    # -- turn and items --------------------------------------------------------------------------
    "turn/started": (DROPPED, "names the turn (the handle adopts its id)"),
    "turn/completed": (TYPED, "Result, or Error with a code from codexErrorInfo"),
    "turn/diff/updated": (TYPED, "Diff"),
    "turn/plan/updated": (TYPED, "Plan"),
    "item/started": (TYPED, "ToolUse / SubAgent by item type (see below)"),
    "item/completed": (TYPED, "by item type (see below)"),
    "item/agentMessage/delta": (TYPED, "TextDelta (the fast path)"),
    "item/mcpToolCall/progress": (TYPED, "ToolProgress"),
    "thread/tokenUsage/updated": (TYPED, "TokenUsage (session total, the turn's share, context window)"),
    "error": (TYPED, "System(stream_retry) when codex retries; else the Error of the failed turn"),
    "model/rerouted": (NOTICE, "System(model_rerouted)"),
    "thread/compacted": (
        DROPPED,
        "never sent by codex 0.163 after a compaction (its contextCompaction item is: Compaction); dropped",
    ),
    # -- notices ---------------------------------------------------------------------------------
    "warning": (NOTICE, "System(warning)"),
    "configWarning": (NOTICE, "System(warning); provider notices() and every live session"),
    "deprecationNotice": (NOTICE, "System(warning); provider notices() and every live session"),
    "guardianWarning": (NOTICE, "System(warning)"),
    "account/rateLimits/updated": (TYPED, "RateLimits; Provider.rate_limits; the runner slows down"),
    "mcpServer/startupStatus/updated": (TYPED, "McpServerStatus, on the session it concerns"),
    "account/updated": (NOTICE, "System(notice)"),
    "account/login/completed": (NOTICE, "System(notice)"),
    "account/gatewayOAuth/changed": (NOTICE, "System(notice)"),
    "skills/changed": (NOTICE, "System(notice)"),
    "app/list/updated": (NOTICE, "System(notice)"),
    "mcpServer/oauthLogin/completed": (NOTICE, "System(notice)"),
    "modelProvider/authRecoveryStarted": (NOTICE, "System(notice)"),
    "modelProvider/authRecoveryCompleted": (NOTICE, "System(notice)"),
    "externalAgentConfig/import/completed": (NOTICE, "System(notice)"),
    "thread/archived": (NOTICE, "System(notice)"),
    "thread/unarchived": (NOTICE, "System(notice)"),
    "thread/deleted": (NOTICE, "System(notice)"),
    "thread/closed": (NOTICE, "System(notice)"),
    "thread/name/updated": (NOTICE, "System(notice)"),
    "thread/reverted": (NOTICE, "System(notice)"),
    "windows/worldWritableWarning": (NOTICE, "System(notice)"),
    "windowsSandbox/setupCompleted": (NOTICE, "System(notice)"),
    "autoApprovalReview/strictReviewRequired": (NOTICE, "System(notice)"),
    # -- nothing for a consumer --------------------------------------------------------------------
    "thread/started": (
        DROPPED,
        "follows thread/start; the response has the same (its thread id is inside, so no session gets "
        "it, and it is not put on notices())",
    ),
    "thread/status/changed": (DROPPED, "the turn's own events say the same"),
    "serverRequest/resolved": (DROPPED, "we answered the request ourselves"),
    "item/commandExecution/outputDelta": (OPTED_OUT, "the completed item has the aggregated output"),
    "item/fileChange/outputDelta": (OPTED_OUT, "the completed item has the result"),
    "item/reasoning/summaryPartAdded": (OPTED_OUT, "the completed item has the reasoning"),
    "item/reasoning/summaryTextDelta": (OPTED_OUT, "the completed item has the reasoning"),
    "item/reasoning/textDelta": (OPTED_OUT, "the completed item has the reasoning"),
    "item/plan/delta": (OPTED_OUT, "turn/plan/updated has the plan"),
    "remoteControl/status/changed": (OPTED_OUT, "remote control is not used"),
    "thread/readState/changed": (OPTED_OUT, "UI read markers"),
    # -- passed through untyped --------------------------------------------------------------------
    "thread/attachment/updated": _U,
    "thread/goal/updated": (TYPED, "Goal (objective, status, budget, what was spent)"),
    "thread/goal/cleared": (TYPED, "Goal(cleared=True)"),
    "thread/prediction/updated": _U,
    "thread/queue/changed": _U,
    "project/changed": _U,
    "thread/project/updated": _U,
    "thread/environment/connected": _U,
    "thread/environment/disconnected": _U,
    "thread/settings/updated": _U,
    "hook/started": _U,
    "hook/completed": _U,
    "item/autoApprovalReview/started": _U,
    "item/autoApprovalReview/completed": _U,
    "command/exec/outputDelta": (UNKNOWN, "only for command/exec, which agent-fleet does not call"),
    "process/outputDelta": (UNKNOWN, "only for process/spawn, which agent-fleet does not call"),
    "process/exited": (UNKNOWN, "only for process/spawn, which agent-fleet does not call"),
    "item/commandExecution/terminalInteraction": _U,
    "item/fileChange/patchUpdated": _U,
    "mcpServer/event/stream/notification": _U,
    "externalAgentConfig/import/progress": _U,
    "fs/changed": (UNKNOWN, "only after fs/watch, which agent-fleet does not call"),
    "model/verification": _U,
    "turn/moderationMetadata": _U,
    "model/safetyBuffering/updated": _U,
    "fuzzyFileSearch/sessionUpdated": (UNKNOWN, "only for fuzzyFileSearch, not called"),
    "fuzzyFileSearch/sessionCompleted": (UNKNOWN, "only for fuzzyFileSearch, not called"),
    "thread/realtime/started": (UNKNOWN, "realtime (voice) threads are not started by agent-fleet"),
    "thread/realtime/itemAdded": (UNKNOWN, "realtime, not started"),
    "thread/realtime/item/started": (UNKNOWN, "realtime, not started"),
    "thread/realtime/item/transcript/delta": (UNKNOWN, "realtime, not started"),
    "thread/realtime/item/completed": (UNKNOWN, "realtime, not started"),
    "thread/realtime/transcript/delta": (UNKNOWN, "realtime, not started"),
    "thread/realtime/transcript/done": (UNKNOWN, "realtime, not started"),
    "thread/realtime/outputAudio/delta": (UNKNOWN, "realtime, not started"),
    "thread/realtime/sdp": (UNKNOWN, "realtime, not started"),
    "thread/realtime/error": (UNKNOWN, "realtime, not started"),
    "thread/realtime/closed": (UNKNOWN, "realtime, not started"),
}

_APPROVAL = (
    "approval",
    "the approval policy (and approval_handler) decides; a sub-agent's in the session that spawned it",
)
_NOT_FOUND = ("not handled", "answered -32601, with System(unhandled_server_request)")

SERVER_REQUESTS: Final[Mapping[str, tuple[str, str]]] = {
    "item/commandExecution/requestApproval": _APPROVAL,
    "item/fileChange/requestApproval": _APPROVAL,
    "item/permissions/requestApproval": _APPROVAL,
    "applyPatchApproval": _APPROVAL,
    "execCommandApproval": _APPROVAL,
    "item/tool/requestUserInput": (
        "answered",
        "CodexOptions.input_handler or canned_answers, else declined; a sub-agent's as its session's "
        "(codex 0.163 sends none for one: it refuses a sub-agent's request_user_input itself)",
    ),
    "mcpServer/elicitation/request": (
        "answered",
        "an MCP tool approval (_meta.codex_approval_kind) by the approval policy (mcp_tools); "
        "any other by CodexOptions.input_handler or canned_answers, else declined; a sub-agent's as "
        "its session's",
    ),
    "item/tool/call": (
        "answered",
        "runs the Spec.tools function (ToolUse / ToolResult); a sub-agent's with its session's tools "
        "(codex 0.163 gives them to a sub-agent forked from the session's history)",
    ),
    "account/chatgptAuthTokens/refresh": (
        "answered",
        "CodexOptions.auth_refresh_handler, else an auth_failed Error on every live turn and "
        "System(auth_failed) with each idle session's next turn",
    ),
    "attestation/generate": _NOT_FOUND,
    "currentTime/read": ("answered", "the current time"),
}

ITEM_TYPES: Final[Mapping[str, tuple[str, str]]] = {
    "agentMessage": (TYPED, "AssistantMessage (final text of the Result)"),
    "reasoning": (TYPED, "Reasoning"),
    "plan": (TYPED, "Plan"),
    "commandExecution": (TYPED, "ToolUse(shell) / ToolResult"),
    "fileChange": (TYPED, "ToolUse(apply_patch) / ToolResult"),
    "mcpToolCall": (TYPED, "ToolUse(mcp:server/tool) / ToolResult"),
    "dynamicToolCall": (TYPED, "ToolUse(tool) / ToolResult"),
    "webSearch": (TYPED, "ToolUse(web_search) / ToolResult, then WebSearch (query, action, results)"),
    "imageView": (TYPED, "ImageView"),
    "collabAgentToolCall": (TYPED, "SubAgent (started and completed)"),
    "subAgentActivity": (TYPED, "SubAgent"),
    "enteredReviewMode": (TYPED, "ReviewMode(entered=True)"),
    "exitedReviewMode": (TYPED, "ReviewMode(entered=False) with the review text"),
    "contextCompaction": (TYPED, "Compaction"),
    "userMessage": (DROPPED, "our own prompt"),
    "hookPrompt": (DROPPED, "hook output codex feeds the model"),
    "functionCallOutput": _U,
    "sleep": _U,
    "imageGeneration": _U,
}

_BEGIN = "<!-- coverage:begin (generated by python -m agent_fleet.codex._coverage; do not edit) -->"
_END = "<!-- coverage:end -->"
DOC: Final = Path(__file__).resolve().parents[3] / "docs" / "codex-protocol-notes.md"


def schema_names(schema_dir: Path) -> dict[str, list[str]]:
    """Notification methods, server request methods and item types of a generated schema."""

    def methods(file: str) -> list[str]:
        data = json.loads((schema_dir / file).read_text(encoding="utf-8"))
        return [v["properties"]["method"]["enum"][0] for v in data["oneOf"]]

    v2 = json.loads((schema_dir / "codex_app_server_protocol.v2.schemas.json").read_text(encoding="utf-8"))
    items = [v["properties"]["type"]["enum"][0] for v in v2["definitions"]["ThreadItem"]["oneOf"]]
    return {
        "notifications": methods("ServerNotification.json"),
        "server requests": methods("ServerRequest.json"),
        "item types": items,
    }


def generate_schema(codex: str | Path, out: Path) -> dict[str, list[str]]:
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--experimental", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return schema_names(out)


def _table(title: str, names: list[str], table: Mapping[str, tuple[str, str]]) -> list[str]:
    lines = [f"### {title} ({len(names)})", "", "| name | agent-fleet | what it does |", "|---|---|---|"]
    lines += [f"| `{n}` | {table[n][0]} | {table[n][1]} |" for n in names]
    return [*lines, ""]


def render(names: Mapping[str, list[str]], version: str) -> str:
    """The generated coverage section (between its markers) for the schema ``names``."""
    tables = {"notifications": NOTIFICATIONS, "server requests": SERVER_REQUESTS, "item types": ITEM_TYPES}
    lines = [
        _BEGIN,
        "",
        f"Generated from `codex app-server generate-json-schema --experimental` ({version}).",
        "",
    ]
    for title, table in tables.items():
        lines += _table(title.capitalize(), sorted(names[title]), table)
    return "\n".join([*lines, _END])


def unclassified(names: Mapping[str, list[str]]) -> dict[str, list[str]]:
    tables = {"notifications": NOTIFICATIONS, "server requests": SERVER_REQUESTS, "item types": ITEM_TYPES}
    return {k: missing for k, v in names.items() if (missing := [n for n in v if n not in tables[k]])}


def splice(doc: str, section: str) -> str:
    """``doc`` with its coverage section replaced by ``section`` (appended when it has none)."""
    if _BEGIN in doc and _END in doc:
        head, rest = doc.split(_BEGIN, 1)
        return head + section + rest.split(_END, 1)[1]
    return doc.rstrip("\n") + "\n\n## Protocol coverage\n\n" + section + "\n"


def main(argv: list[str] | None = None) -> int:
    from agent_fleet._codex_binary import codex_version, find_codex

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only check that the docs are current")
    parser.add_argument("--codex", help="the codex binary (default: the pinned one)")
    args = parser.parse_args(argv)
    codex = find_codex(args.codex)
    with tempfile.TemporaryDirectory() as tmp:
        names = generate_schema(codex, Path(tmp))
    missing = unclassified(names)
    if missing:
        print(f"not classified in agent_fleet/codex/_coverage.py: {missing}", file=sys.stderr)
        return 1
    doc = DOC.read_text(encoding="utf-8")
    updated = splice(doc, render(names, f"codex {codex_version(codex)}"))
    if args.check:
        if updated != doc:
            print(f"{DOC} is stale: run python -m agent_fleet.codex._coverage", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
