import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "warrant.settings")
# Tracing (only when OTEL_EXPORTER_OTLP_ENDPOINT is set), as in wsgi.py.
from warrant import telemetry  # noqa: E402

telemetry.setup()
application = get_asgi_application()
