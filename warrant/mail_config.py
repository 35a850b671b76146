"""Mail and approval-notice settings, kept out of warrant/settings.py (at its size limit), which
star-imports them, so they are Django settings like the rest. All from the environment.

Approval notices (runs/notify.py) go through Django's mail backend: SMTP as configured here, or
under DJANGO_DEBUG (make run) the console, so the demo prints its mail instead of failing to reach
a server on localhost.
"""

import os


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in {"1", "true", "yes", "on"}


EMAIL_BACKEND = os.environ.get("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
                               if _env_bool("DJANGO_DEBUG") else "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("DJANGO_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("DJANGO_EMAIL_USE_TLS")
EMAIL_USE_SSL = _env_bool("DJANGO_EMAIL_USE_SSL")
# A mail server that does not answer holds the worker or request sending a notice this long at most.
EMAIL_TIMEOUT = float(os.environ.get("DJANGO_EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "warrant@localhost")

# The address people reach Warrant at: the links in notices are absolute.
WARRANT_PUBLIC_URL = os.environ.get("WARRANT_PUBLIC_URL", "http://127.0.0.1:8000")
# The longest lead of an expiry reminder; the lead is 10% of a request's time to live, at most this.
WARRANT_NOTIFY_REMIND_SECONDS = float(os.environ.get("WARRANT_NOTIFY_REMIND_SECONDS", "3600"))
# The notice webhook (runs/notify_webhook.py): none without a URL; nothing is sent without a secret.
WARRANT_NOTIFY_WEBHOOK_URL = os.environ.get("WARRANT_NOTIFY_WEBHOOK_URL", "")
WARRANT_NOTIFY_WEBHOOK_SECRET = os.environ.get("WARRANT_NOTIFY_WEBHOOK_SECRET", "")
WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS = tuple(
    h.strip() for h in os.environ.get("WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip())
WARRANT_NOTIFY_WEBHOOK_TIMEOUT = float(os.environ.get("WARRANT_NOTIFY_WEBHOOK_TIMEOUT", "5"))
