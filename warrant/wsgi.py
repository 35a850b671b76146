import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "warrant.settings")
application = get_wsgi_application()

# Without a broker there is no beat: the web process reconciles (runs.ticker).
from runs.ticker import start_embedded_reconciler  # noqa: E402  (needs the application's settings)

start_embedded_reconciler()
