import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "warrant.settings")
# Tracing (only when OTEL_EXPORTER_OTLP_ENDPOINT is set): before the application loads its middleware,
# which the Django instrumentation adds to.
from warrant import telemetry  # noqa: E402

telemetry.setup()
application = get_wsgi_application()

# Without a broker there is no beat: the web process reconciles (runs.ticker).
from runs.ticker import start_embedded_reconciler  # noqa: E402  (needs the application's settings)

start_embedded_reconciler()
