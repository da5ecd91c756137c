"""OpenTelemetry spans and metrics of a batch, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions
from agent_fleet.errors import UsageError
from agent_fleet.events import Error, Result, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.runner import GateConfig, Task, TaskEvent, run_task
from agent_fleet.runner._otel import BatchTelemetry, export_from_environment
from agent_fleet.testing import ScriptedModelServer

from .scripted import ScriptedAgent, run

T0 = 1_800_000_000.0


def _runner(subtype: str, **data: Any) -> System:
    return System(subtype=f"runner.{subtype}", data=data)


def _task_events(task_id: str, session: str, *, fail: bool) -> list[tuple[float, str, Any]]:
    events: list[tuple[float, str, Any]] = [
        (0.0, "runner", _runner("started", prompt="p", provider="codex", model=None)),
        (0.1, "agent", System(subtype="session", data={"model": "gpt-5.5"})),
        (1.0, "agent", ToolUse(id="c1", name="shell", input={"command": "/bin/bash -lc 'make'"})),
        (
            1.0,
            "agent",
            ToolUse(id="a1", name="approval", input={"kind": "command", "command": "make"}, synthetic=True),
        ),
        (1.0, "agent", ToolResult(id="a1", status="acceptForSession", synthetic=True)),
        (2.0, "agent", ToolResult(id="c1", output="ok", exit_code=0, status="completed")),
        (2.5, "agent", ToolUse(id="c2", name="shell", input={"command": "git push --force"})),
        (
            2.5,
            "agent",
            ToolUse(
                id="a2",
                name="approval",
                input={"kind": "command", "command": "git push --force"},
                synthetic=True,
            ),
        ),
        (2.5, "agent", ToolResult(id="a2", status="decline", is_error=True, synthetic=True)),
        (2.5, "agent", System(subtype="approval_denied", data={"rule": "git-force-push", "reason": "no"})),
        (2.6, "agent", ToolResult(id="c2", status="declined", is_error=True)),
        (2.7, "agent", ToolUse(id="p1", name="apply_patch", input={"changes": []})),
        (2.8, "agent", ToolResult(id="p1", status="completed")),
        (3.0, "agent", TokenUsage(input_tokens=100, cached_input_tokens=40, output_tokens=7)),
        (3.0, "agent", Result(session_id=session, text="done")),
        (3.0, "runner", _runner("gate_started", command="pytest")),
        (
            4.0,
            "runner",
            _runner("gate", passed=not fail, summary="s", checks=[{"exit_code": 1 if fail else 0}]),
        ),
        (
            4.0,
            "review",
            ToolUse(id="r1", name="shell", input={"command": "cat x"}),
        ),  # a review session's: no span
    ]
    if fail:
        events += [
            (4.0, "runner", _runner("followup", number=1, prompt="again")),
            (5.0, "agent", Error(code="turn_failed", message="boom")),
        ]
    status = "failed" if fail else "succeeded"
    events.append(
        (6.0, "runner", _runner("finished", status=status, followups=int(fail), tokens=107, duration=6.0))
    )
    return events


def _run(
    telemetry: BatchTelemetry,
    task_id: str,
    session: str,
    *,
    fail: bool,
    offset: float = 0.0,
    observe: Callable[[TaskEvent], None] | None = None,
) -> None:
    observe = observe or telemetry.task(task_id)
    for at, source, event in _task_events(task_id, session, fail=fail):
        observe(TaskEvent(task_id=task_id, source=source, event=event, time=T0 + offset + at))  # type: ignore[arg-type]


def _setup() -> tuple[BatchTelemetry, InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    telemetry = BatchTelemetry(
        provider="codex",
        jobs=2,
        tasks=2,
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        start_time=T0,
    )
    return telemetry, exporter, reader


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_span_tree_and_attributes() -> None:
    telemetry, exporter, _ = _setup()
    _run(telemetry, "good", "s-good", fail=False)
    _run(telemetry, "bad", "s-bad", fail=True)
    telemetry.end({"counts": {"succeeded": 1, "failed": 1}}, end_time=T0 + 7)
    spans = list(exporter.get_finished_spans())
    (batch,) = [s for s in spans if s.name == "agent_fleet.batch"]
    assert batch.parent is None and batch.attributes is not None
    assert (
        batch.attributes["agent_fleet.tasks.failed"] == 1
        and batch.attributes["agent_fleet.provider"] == "codex"
    )
    tasks = {s.attributes["agent_fleet.task.id"]: s for s in _children(spans, batch) if s.attributes}
    assert set(tasks) == {"good", "bad"} and all(s.name == "agent_fleet.task" for s in tasks.values())

    good = tasks["good"]
    assert good.attributes is not None
    assert (
        good.attributes["agent_fleet.status"] == "succeeded"
        and good.attributes["agent_fleet.model"] == "gpt-5.5"
    )
    assert (
        good.attributes["agent_fleet.session_id"] == "s-good"
        and good.attributes["agent_fleet.tokens.total"] == 107
    )
    assert good.status.status_code == StatusCode.UNSET
    assert good.start_time == int(T0 * 1e9) and good.end_time == int((T0 + 6.0) * 1e9)
    assert sorted(s.name for s in _children(spans, good)) == ["agent_fleet.gate", "agent_fleet.turn"]
    (turn,) = [s for s in _children(spans, good) if s.name == "agent_fleet.turn"]
    assert turn.attributes is not None and turn.attributes["agent_fleet.tokens.input"] == 100
    assert (
        turn.attributes["agent_fleet.tokens.cached_input"] == 40
        and turn.attributes["agent_fleet.model"] == "gpt-5.5"
    )
    under_turn = _children(spans, turn)
    # One span per tool call (two commands, one patch) and per approval (two); none for the review's.
    assert sorted(s.name for s in under_turn) == ["agent_fleet.approval"] * 2 + ["agent_fleet.tool"] * 3
    tools = {
        s.attributes["agent_fleet.tool.id"]: s
        for s in under_turn
        if s.attributes and s.name == "agent_fleet.tool"
    }
    assert tools["c1"].attributes is not None and tools["c1"].attributes["agent_fleet.exit_code"] == 0
    assert tools["c1"].attributes["agent_fleet.command"] == "make"
    assert tools["c2"].status.status_code == StatusCode.ERROR
    approvals = [s.attributes for s in under_turn if s.name == "agent_fleet.approval" and s.attributes]
    assert {a["agent_fleet.decision"] for a in approvals} == {"acceptForSession", "decline"}
    declined = next(a for a in approvals if a["agent_fleet.decision"] == "decline")
    assert (
        declined["agent_fleet.rule"] == "git-force-push"
        and declined["agent_fleet.command"] == "git push --force"
    )
    (gate,) = [s for s in _children(spans, good) if s.name == "agent_fleet.gate"]
    assert gate.attributes is not None and gate.attributes["agent_fleet.gate.passed"] is True
    assert gate.attributes["agent_fleet.exit_code"] == 0

    bad = tasks["bad"]
    assert bad.status.status_code == StatusCode.ERROR
    turns = sorted(
        (s for s in _children(spans, bad) if s.name == "agent_fleet.turn"), key=lambda s: s.start_time or 0
    )
    assert [s.attributes["agent_fleet.turn.number"] for s in turns if s.attributes] == [1, 2]
    assert turns[1].status.status_code == StatusCode.ERROR and "turn_failed" in (
        turns[1].status.description or ""
    )
    assert all(s.end_time is not None for s in spans)


def test_the_same_session_links_task_spans() -> None:
    telemetry, exporter, _ = _setup()
    _run(telemetry, "first", "s-1", fail=True)
    _run(telemetry, "retry", "s-1", fail=False, offset=10)
    telemetry.end()
    spans = {
        s.attributes["agent_fleet.task.id"]: s
        for s in exporter.get_finished_spans()
        if s.name == "agent_fleet.task" and s.attributes
    }
    assert not spans["first"].links
    (link,) = spans["retry"].links
    assert spans["first"].context is not None and link.context.span_id == spans["first"].context.span_id
    assert link.attributes is not None and link.attributes["agent_fleet.relation"] == "same_session"


def test_metrics_count_tokens_and_outcomes() -> None:
    telemetry, _, reader = _setup()
    _run(telemetry, "good", "s-good", fail=False)
    _run(telemetry, "bad", "s-bad", fail=True)
    telemetry.end()
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    tokens = {(p.attributes["kind"], p.attributes["model"]): p.value for p in points["agent_fleet.tokens"]}
    assert tokens[("input", "gpt-5.5")] == 200 and tokens[("cached_input", "gpt-5.5")] == 80
    assert tokens[("output", "gpt-5.5")] == 14
    outcomes = {p.attributes["status"]: p.value for p in points["agent_fleet.tasks"]}
    assert outcomes == {"succeeded": 1, "failed": 1}
    assert sum(p.count for p in points["agent_fleet.task.duration"]) == 2


def test_without_an_sdk_everything_is_a_no_op() -> None:
    telemetry = BatchTelemetry(provider="codex", jobs=1, tasks=1)
    assert not telemetry.span.is_recording()
    _run(telemetry, "t", "s", fail=True)
    telemetry.end({"counts": {"failed": 1}, "stopped": "x"})


class _Collector(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_otlp_export_follows_the_standard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Collector.received = []
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "fleet-under-test")
        setup = export_from_environment()
        assert setup is not None
        telemetry = BatchTelemetry(
            provider="codex",
            jobs=1,
            tasks=1,
            tracer_provider=setup.tracer_provider,
            meter_provider=setup.meter_provider,
        )
        _run(telemetry, "t", "s", fail=False)
        telemetry.end()
        setup.shutdown()  # flushes spans and metrics
    finally:
        server.shutdown()
        server.server_close()
    by_path = {path: (kind, body) for path, kind, body in _Collector.received}
    assert set(by_path) == {"/v1/traces", "/v1/metrics"}
    kind, traces = by_path["/v1/traces"]
    assert kind == "application/x-protobuf"
    assert (
        b"agent_fleet.task" in traces and b"agent_fleet.approval" in traces and b"fleet-under-test" in traces
    )
    assert b"agent_fleet.tokens" in by_path["/v1/metrics"][1]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, None),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, "setup"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "supports otlp, console, none"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"),
    ],
)
def test_export_environment_choices(env: dict[str, str], expected: str | None) -> None:
    if expected is None:
        assert export_from_environment(env) is None
    elif expected == "setup":
        setup = export_from_environment(env)
        assert setup is not None
        setup.shutdown()
    else:
        with pytest.raises(UsageError, match=expected):
            export_from_environment(env)


def test_a_retried_task_gets_a_new_span_linked_to_the_failed_attempt() -> None:
    telemetry, exporter, _ = _setup()
    observe = telemetry.task("t")  # one observer per task, as the batch keeps it
    _run(telemetry, "t", "s-a", fail=True, observe=observe)
    _run(telemetry, "t", "s-b", fail=False, offset=10, observe=observe)  # run again after it finished
    telemetry.end()
    spans = [s for s in exporter.get_finished_spans() if s.name == "agent_fleet.task"]
    first, second = sorted(spans, key=lambda s: s.start_time or 0)
    assert first.attributes is not None and first.attributes["agent_fleet.status"] == "failed"
    assert second.attributes is not None and second.attributes["agent_fleet.attempt"] == 2
    assert second.attributes["agent_fleet.status"] == "succeeded"
    (link,) = second.links
    assert first.context is not None and link.context.span_id == first.context.span_id
    assert link.attributes is not None and link.attributes["agent_fleet.relation"] == "retry_of"


@pytest.mark.e2e
async def test_spans_from_a_real_task_stream(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent({"o": [[run("echo traced"), run("git reset --hard")]]})
    events: list[TaskEvent] = []
    spec = Spec(prompt="[task:o] trace me", cwd=repo, sandbox="workspace-write")
    result = await run_task(
        Task(id="o", spec=spec, gate=GateConfig(command="true")),
        options=codex_options,
        on_event=events.append,
    )
    assert result.status == "succeeded", result.reason
    telemetry, exporter, _ = _setup()
    observe = telemetry.task("o")
    for event in events:
        observe(event)
    telemetry.end()
    spans = list(exporter.get_finished_spans())
    names = sorted(s.name for s in spans)
    assert names == sorted(
        ["agent_fleet.batch", "agent_fleet.task", "agent_fleet.turn", "agent_fleet.gate"]
        + ["agent_fleet.tool"] * 2
        + ["agent_fleet.approval"] * 2
    )
    (task,) = [s for s in spans if s.name == "agent_fleet.task"]
    assert task.attributes is not None and task.attributes["agent_fleet.model"] == "gpt-5.5"
    assert task.attributes["agent_fleet.session_id"] == result.session_id
    tools = {
        s.attributes["agent_fleet.command"]: s.attributes
        for s in spans
        if s.name == "agent_fleet.tool" and s.attributes
    }
    assert tools["echo traced"]["agent_fleet.exit_code"] == 0
    assert tools["git reset --hard"]["agent_fleet.tool.status"] == "declined"
    rules = [
        s.attributes.get("agent_fleet.rule")
        for s in spans
        if s.name == "agent_fleet.approval" and s.attributes
    ]
    assert sorted(r for r in rules if r) == ["git-reset-hard"]
