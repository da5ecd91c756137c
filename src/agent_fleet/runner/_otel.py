"""OpenTelemetry: a batch's spans and metrics, made from the same event stream as the transcript.

Spans (names and the attributes they carry)::

    agent_fleet.batch        provider, jobs, tasks; at the end the outcome counts
      agent_fleet.task       task.id, provider, model, status, error code, follow-ups, tokens, session id
        agent_fleet.turn     number, model, status, tokens (input / cached / output)
          agent_fleet.tool       tool.name, command, exit code, status (one per tool call)
          agent_fleet.approval   what was asked, decision, rule (one per approval decision)
        agent_fleet.gate     command, passed, exit code

Span times are the events' own times, so the spans line up with the transcript and the report's
timeline. A task span whose session was seen before (a retry or a resume of the same session; or the
one named by ``resumed_from``) carries a link to the earlier task span; a task run again after it
finished (a retry on another node) gets a new task span linked to the attempt before (``retry_of``).

Metrics: ``agent_fleet.tokens`` (counter; ``kind``, ``model``, ``provider``), ``agent_fleet.tasks``
(counter; ``status``, ``provider``) and ``agent_fleet.task.duration`` (histogram, seconds).

Only ``opentelemetry-api`` is needed: without an SDK (the ``otel`` extra, configured by the standard
``OTEL_*`` variables or by the application) every call is a no-op.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode

from agent_fleet.errors import UsageError
from agent_fleet.events import Error, Result, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.runner._record import command_text
from agent_fleet.runner._types import TaskEvent

__all__ = ["OTEL_EXTRA_HINT", "SCOPE", "BatchTelemetry", "ExportSetup", "export_from_environment"]

SCOPE: Final = "agent_fleet"
_OK_STATUSES: Final = frozenset({"succeeded"})


def _ns(epoch: float) -> int:
    return int(epoch * 1e9)


class BatchTelemetry:
    """One batch's spans and metrics. ``task(id)`` gives an event observer per task; ``end`` closes.

    ``tracer_provider`` / ``meter_provider``: injected in tests; the global ones otherwise."""

    def __init__(
        self,
        *,
        provider: str,
        jobs: int,
        tasks: int,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        start_time: float | None = None,
    ) -> None:
        self.provider = provider
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.tokens = meter.create_counter("agent_fleet.tokens", unit="{token}", description="tokens used")
        self.outcomes = meter.create_counter("agent_fleet.tasks", unit="{task}", description="tasks ended")
        self.durations = meter.create_histogram(
            "agent_fleet.task.duration", unit="s", description="task time"
        )
        self.span = self.tracer.start_span(
            "agent_fleet.batch",
            attributes={
                "agent_fleet.provider": provider,
                "agent_fleet.jobs": jobs,
                "agent_fleet.tasks": tasks,
            },
            start_time=_ns(start_time) if start_time is not None else None,
        )
        self.sessions: dict[str, SpanContext] = {}

    def task(self, task_id: str, *, resumed_from: str | None = None) -> Callable[[TaskEvent], None]:
        """An observer for the events of task ``task_id`` (call it with every event, in order)."""
        return _TaskSpans(self, task_id, resumed_from).observe

    def end(self, summary: Mapping[str, Any] | None = None, *, end_time: float | None = None) -> None:
        """End the batch span; ``summary`` (the summary document) adds the outcome counts."""
        if summary is not None:
            for status, n in (summary.get("counts") or {}).items():
                self.span.set_attribute(f"agent_fleet.tasks.{status}", n)
            if summary.get("stopped"):
                self.span.set_attribute("agent_fleet.stopped", str(summary["stopped"]))
                self.span.set_status(Status(StatusCode.ERROR, str(summary["stopped"])))
        self.span.end(end_time=_ns(end_time) if end_time is not None else None)


@dataclass(slots=True)
class _TaskSpans:
    batch: BatchTelemetry
    task_id: str
    resumed_from: str | None
    task: Span | None = None
    turn: Span | None = None
    gate: Span | None = None
    turns: int = 0
    provider: str | None = None
    model: str | None = None
    session_id: str | None = None
    usage: TokenUsage | None = None
    open: dict[str, Span] = field(default_factory=dict)
    declined: Span | None = None
    finished: bool = False
    attempts: int = 1

    def _child(self, parent: Span | None, name: str, at: float, attributes: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.batch.tracer.start_span(name, context=context, attributes=attributes, start_time=_ns(at))

    def observe(self, task_event: TaskEvent) -> None:
        event, at = task_event.event, task_event.time
        if self.task is None:
            self._start(at)
        if task_event.source == "review":
            return
        match event:
            case System(subtype="runner.started", data=data):
                if self.finished:  # a retry (the ray backend runs a task again on another node)
                    self._retry(at)
                self.provider = data.get("provider") or self.batch.provider
                self.model = data.get("model")
                if self.provider:
                    self._set_all("agent_fleet.provider", self.provider)
                if self.model:
                    self._set_all("agent_fleet.model", self.model)
                self._turn_start(at)
            case System(subtype="session") | System(subtype="init"):
                model = event.data.get("model")
                if isinstance(model, str) and model:
                    self.model = model
                    self._set_all("agent_fleet.model", model)
            case System(subtype="runner.followup"):
                self._turn_start(at)
            case ToolUse(synthetic=False):
                attributes: dict[str, Any] = {
                    "agent_fleet.tool.name": event.name,
                    "agent_fleet.tool.id": event.id,
                }
                if event.name == "shell":
                    attributes["agent_fleet.command"] = command_text(event.input.get("command"))
                self.open[event.id] = self._child(self.turn or self.task, "agent_fleet.tool", at, attributes)
            case ToolUse(synthetic=True, name="approval"):
                attributes = {"agent_fleet.approval.kind": str(event.input.get("kind") or "")}
                if "command" in event.input:
                    attributes["agent_fleet.command"] = command_text(event.input.get("command"))
                self.open[event.id] = self._child(
                    self.turn or self.task, "agent_fleet.approval", at, attributes
                )
            case ToolResult():
                span = self.open.pop(event.id, None)
                if span is None:
                    return
                if event.status is not None:
                    key = "agent_fleet.decision" if event.synthetic else "agent_fleet.tool.status"
                    span.set_attribute(key, event.status)
                if event.exit_code is not None:
                    span.set_attribute("agent_fleet.exit_code", event.exit_code)
                if event.is_error:
                    span.set_status(Status(StatusCode.ERROR))
                if event.synthetic and event.is_error:
                    self.declined = span  # ended by the approval_denied notice naming the rule
                else:
                    span.end(end_time=_ns(at))
            case System(subtype="approval_denied", data=data):
                if self.declined is not None:
                    self.declined.set_attribute("agent_fleet.rule", str(data.get("rule") or ""))
                    self.declined.set_attribute("agent_fleet.reason", str(data.get("reason") or ""))
                    self.declined.end(end_time=_ns(at))
                    self.declined = None
            case TokenUsage():
                self.usage = event
            case Result():
                self.session_id = self.session_id or event.session_id
                self._link_session()
                self._turn_end(at, None)
            case Error():
                self._turn_end(at, f"{event.code}: {event.message}")
            case System(subtype="runner.gate_started", data=data):
                attributes = {"agent_fleet.gate.command": str(data.get("command") or "")}
                self.gate = self._child(self.task, "agent_fleet.gate", at, attributes)
            case System(subtype="runner.gate", data=data):
                if self.gate is not None:
                    passed = bool(data.get("passed"))
                    self.gate.set_attribute("agent_fleet.gate.passed", passed)
                    codes = [
                        c.get("exit_code") for c in data.get("checks") or [] if c.get("exit_code") is not None
                    ]
                    if codes:
                        self.gate.set_attribute("agent_fleet.exit_code", int(codes[-1]))
                    if not passed:
                        self.gate.set_status(Status(StatusCode.ERROR, str(data.get("summary") or "")))
                    self.gate.end(end_time=_ns(at))
                    self.gate = None
            case System(subtype="runner.finished", data=data):
                self._finish(at, data)
            case _:
                pass

    def _start(self, at: float) -> None:
        attributes = {"agent_fleet.task.id": self.task_id, "agent_fleet.provider": self.batch.provider}
        links = []
        if self.resumed_from is not None and self.resumed_from in self.batch.sessions:
            links.append(
                Link(self.batch.sessions[self.resumed_from], {"agent_fleet.relation": "resumed_from"})
            )
        self.task = self._child(self.batch.span, "agent_fleet.task", at, attributes)
        for link in links:
            self.task.add_link(link.context, link.attributes)

    def _retry(self, at: float) -> None:
        assert self.task is not None
        previous = self.task.get_span_context()
        self.attempts += 1
        self.finished, self.usage, self.session_id = False, None, None
        attributes = {
            "agent_fleet.task.id": self.task_id,
            "agent_fleet.provider": self.batch.provider,
            "agent_fleet.attempt": self.attempts,
        }
        self.task = self._child(self.batch.span, "agent_fleet.task", at, attributes)
        self.task.add_link(previous, {"agent_fleet.relation": "retry_of"})

    def _set_all(self, key: str, value: Any) -> None:
        for span in (self.task, self.turn):
            if span is not None:
                span.set_attribute(key, value)

    def _turn_start(self, at: float) -> None:
        if self.turn is not None:
            return
        self.turns += 1
        attributes: dict[str, Any] = {"agent_fleet.turn.number": self.turns}
        if self.model:
            attributes["agent_fleet.model"] = self.model
        self.turn = self._child(self.task, "agent_fleet.turn", at, attributes)

    def _turn_end(self, at: float, error: str | None) -> None:
        if self.turn is None:
            return
        if self.usage is not None:
            self.turn.set_attribute("agent_fleet.tokens.input", self.usage.input_tokens)
            self.turn.set_attribute("agent_fleet.tokens.cached_input", self.usage.cached_input_tokens)
            self.turn.set_attribute("agent_fleet.tokens.output", self.usage.output_tokens)
        if error is not None:
            self.turn.set_status(Status(StatusCode.ERROR, error))
        self.turn.end(end_time=_ns(at))
        self.turn = None

    def _link_session(self) -> None:
        if self.session_id is None or self.task is None:
            return
        self.task.set_attribute("agent_fleet.session_id", self.session_id)
        earlier = self.batch.sessions.get(self.session_id)
        own = self.task.get_span_context()
        if earlier is not None and earlier.span_id != own.span_id:
            self.task.add_link(earlier, {"agent_fleet.relation": "same_session"})
        self.batch.sessions[self.session_id] = own

    def _finish(self, at: float, data: Mapping[str, Any]) -> None:
        for span in [*self.open.values(), *(s for s in (self.declined, self.gate) if s is not None)]:
            span.end(end_time=_ns(at))
        self.open.clear()
        self.declined = self.gate = None
        self._turn_end(at, None)
        if self.task is None or self.finished:
            return
        self.finished = True
        status = str(data.get("status"))
        if self.session_id is None and isinstance(data.get("session_id"), str):
            self.session_id = data["session_id"]
            self._link_session()
        tokens = data.get("tokens")
        self.task.set_attribute("agent_fleet.status", status)
        self.task.set_attribute("agent_fleet.followups", int(data.get("followups") or 0))
        if isinstance(tokens, int):
            self.task.set_attribute("agent_fleet.tokens.total", tokens)
        if data.get("error_code"):
            self.task.set_attribute("agent_fleet.error_code", str(data["error_code"]))
        if status not in _OK_STATUSES:
            self.task.set_status(Status(StatusCode.ERROR, str(data.get("reason") or status)))
        self.task.end(end_time=_ns(at))
        labels = {"provider": self.provider or self.batch.provider}
        self.batch.outcomes.add(1, {**labels, "status": status})
        duration = data.get("duration")
        if isinstance(duration, int | float):
            self.batch.durations.record(float(duration), {**labels, "status": status})
        if self.usage is not None:
            model = {"model": self.model or ""}
            for kind, value in (
                ("input", self.usage.input_tokens),
                ("cached_input", self.usage.cached_input_tokens),
                ("output", self.usage.output_tokens),
                ("reasoning_output", self.usage.reasoning_output_tokens),
            ):
                self.batch.tokens.add(value, {**labels, **model, "kind": kind})


@dataclass(slots=True)
class ExportSetup:
    """SDK providers built from the ``OTEL_*`` environment; ``install()`` makes them global, ``shutdown()``
    flushes what is still buffered (call it before the process exits)."""

    tracer_provider: Any
    meter_provider: Any

    def install(self) -> None:
        trace.set_tracer_provider(self.tracer_provider)
        metrics.set_meter_provider(self.meter_provider)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


_EXPORT_VARS: Final = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
)
OTEL_EXTRA_HINT: Final = "pip install 'agent-fleet[otel]'"


def export_from_environment(environ: Mapping[str, str] | None = None) -> ExportSetup | None:
    """Exporters as the standard ``OTEL_*`` variables ask, or None when they ask for none.

    Honoured: ``OTEL_SDK_DISABLED``; ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``otlp``, the
    default when an ``OTEL_EXPORTER_OTLP_*ENDPOINT`` is set; ``console``; ``none``); and, read by the SDK
    itself, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_*`` (endpoint,
    headers, timeout; OTLP over HTTP/protobuf) and ``OTEL_METRIC_EXPORT_INTERVAL``. Raises ``UsageError``
    when export is asked for but the SDK (the ``otel`` extra) is missing or a value is unknown.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(env.get(name) for name in _EXPORT_VARS):
        return None
    endpoint_set = any(env.get(n) for n in _EXPORT_VARS[:3])
    default = "otlp" if endpoint_set else "none"
    kinds = {
        "traces": env.get("OTEL_TRACES_EXPORTER", default).strip().lower() or default,
        "metrics": env.get("OTEL_METRICS_EXPORTER", default).strip().lower() or default,
    }
    for signal, kind in kinds.items():
        if kind not in ("otlp", "console", "none"):
            raise UsageError(
                f"OTEL_{signal.upper()}_EXPORTER={kind!r}: agent-fleet supports otlp, console, none"
            )
    protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip().lower()
    if protocol != "http/protobuf" and "otlp" in kinds.values():
        raise UsageError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: agent-fleet exports OTLP over http/protobuf"
        )
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            MetricExporter,
            MetricReader,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

        if "otlp" in kinds.values():
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise UsageError(
            f"OTEL_* asks for telemetry export, but {exc.name} is missing: {OTEL_EXTRA_HINT}"
        ) from exc
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "agent-fleet"})
    tracer_provider = TracerProvider(resource=resource)
    span_exporter: SpanExporter | None = None
    if kinds["traces"] == "otlp":
        span_exporter = OTLPSpanExporter()
    elif kinds["traces"] == "console":
        span_exporter = ConsoleSpanExporter()
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    metric_exporter: MetricExporter | None = None
    if kinds["metrics"] == "otlp":
        metric_exporter = OTLPMetricExporter()
    elif kinds["metrics"] == "console":
        metric_exporter = ConsoleMetricExporter()
    readers: list[MetricReader] = (
        [PeriodicExportingMetricReader(metric_exporter)] if metric_exporter is not None else []
    )
    return ExportSetup(tracer_provider, MeterProvider(resource=resource, metric_readers=readers))
