"""OpenTelemetry: on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.

setup() is called once per process before it serves (warrant/wsgi.py before the WSGI application
loads its middleware; warrant/celery.py when a worker starts). With neither variable set, or
OTEL_SDK_DISABLED=true, it returns at once: the SDK is not imported, no span is made, and the hooks
of core.telemetry return at their first line.

When on: a TracerProvider with the service's resource (OTEL_SERVICE_NAME, default "warrant";
OTEL_RESOURCE_ATTRIBUTES are merged by the SDK), a batch processor exporting OTLP/HTTP protobuf
(the exporter reads OTEL_EXPORTER_OTLP_* itself: endpoint, headers, timeout), Django, Celery and
httpx instrumented, and core.telemetry enabled with the tracer the run spans use. Sampling is the
SDK's OTEL_TRACES_SAMPLER (parentbased_always_on by default).
"""

import logging
import os
import threading

from core import telemetry as hooks

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_provider = None


def wanted() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup() -> bool:
    """Configure tracing for this process if asked for; True when it is on. Safe to call twice."""
    global _provider
    if not wanted():
        return False
    with _lock:
        if _provider is not None:
            return True
        _provider = _configure()
    return True


def _configure():
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", "warrant")})
    provider = TracerProvider(resource=resource, id_generator=run_id_generator())
    # The batch processor re-creates its export thread in a forked child (gunicorn, Celery prefork).
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # Health probes and scrapes would be most of the spans and say nothing.
    excluded = os.environ.get("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "healthz,readyz,metrics,static/")
    DjangoInstrumentor().instrument(tracer_provider=provider, excluded_urls=excluded)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    enable_hooks(provider)
    logger.info("tracing on: OTLP/HTTP to %s", os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    return provider


def enable_hooks(provider) -> None:
    """core.telemetry's spans through this provider; a run's later slices sampled as its root was."""
    hooks.enable(provider.get_tracer("warrant", schema_url="https://opentelemetry.io/schemas/1.37.0"),
                 root_sampled=lambda trace_id: provider.sampler.should_sample(None, trace_id, "invoke_agent")
                 .decision.is_sampled())


def run_id_generator():
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class RunIdGenerator(RandomIdGenerator):
        """Random ids, except for a run's root span: its trace id is the run's id and its span id
        the one core.telemetry derives from it, so that every later slice finds it."""

        def generate_trace_id(self) -> int:
            forced = hooks.forced_ids.get()
            return forced[0] if forced else super().generate_trace_id()

        def generate_span_id(self) -> int:
            forced = hooks.forced_ids.get()
            return forced[1] if forced else super().generate_span_id()

    return RunIdGenerator()


def flush(timeout_millis: int = 5000) -> bool:
    """Export what is buffered now (a test, or a process about to exit)."""
    return bool(_provider.force_flush(timeout_millis)) if _provider is not None else True
