"""A sampled trace keeps all of its run's slices, an unsampled one none: with a ratio sampler, the
slices of one run (in any process) are kept or dropped together, as its root span was."""

import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from core import telemetry
from runs.models import Run
from warrant.telemetry import enable_hooks, run_id_generator


@pytest.fixture
def exported(monkeypatch):
    monkeypatch.setattr(telemetry, "_tracer", None)
    monkeypatch.setattr(telemetry, "_root_sampled", None)
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)), id_generator=run_id_generator())
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_hooks(provider)
    yield exporter
    provider.shutdown()


def _slice(run_id, step: int) -> None:
    run = Run(id=run_id, step=step, deliveries=1, state={"phase": "start" if step == 0 else "running"},
              snapshot={"agent": {"slug": "crm-assistant", "name": "CRM assistant", "version": 1,
                                  "model_profile": {"backend": "scripted", "model": "scripted-1"}},
                        "caller": {"username": "operator"}})
    with telemetry.run_span(run):
        pass


def test_the_slices_of_a_run_are_kept_or_dropped_together(exported):
    runs = [uuid.uuid5(uuid.NAMESPACE_URL, f"run-{n}") for n in range(40)]  # the same runs every time
    for run_id in runs:
        _slice(run_id, 0)
        _slice(run_id, 3)  # resumed later, perhaps in another process: only the run's id is shared
    by_trace: dict[int, list] = {}
    for span in exported.get_finished_spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    kept = {trace_id for trace_id, spans in by_trace.items()}
    assert 0 < len(kept) < len(runs)  # the ratio dropped some runs and kept others
    for run_id in runs:
        trace_id, root_id = telemetry.run_trace_ids(run_id)
        spans = by_trace.get(trace_id, [])
        assert len(spans) in (0, 2), run_id
        if spans:
            root, resumed = sorted(spans, key=lambda s: s.attributes["warrant.run.step"])
            assert root.context.span_id == root_id and root.parent is None
            assert resumed.parent.span_id == root_id and resumed.context.trace_id == trace_id
