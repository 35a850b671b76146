"""Settings, all from the environment (12-factor).

With nothing set, Warrant runs on the embedded default: a SQLite file, Celery tasks executed
in-process (no broker) and the scripted model. DATABASE_URL and CELERY_BROKER_URL move it to
PostgreSQL and Redis.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        # A production deployment without its own key must not start with a known one.
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when DJANGO_DEBUG is off")
    SECRET_KEY = "warrant-insecure-development-key"

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h.strip()]
if not ALLOWED_HOSTS:
    if not DEBUG:
        # Without it Django would answer for any Host header (cache poisoning, password-reset links).
        raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS is required when DJANGO_DEBUG is off")
    ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "governance",
    "agents",
    "skills",
    "runs",
    "review",
    "evals",
    "django_celery_beat",
    "triggers",
]

MIDDLEWARE = [
    # First: the request's id (X-Request-ID, kept when well formed, else made) for its log lines and its answer.
    "warrant.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files straight after the security headers and the HTTPS redirect, before sessions:
    # a stylesheet needs no session, cookie or database (whitenoise's documented place).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: it turns a login refused for a lockout into its answer.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "governance.auth.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "warrant.urls"
WSGI_APPLICATION = "warrant.wsgi.application"
ASGI_APPLICATION = "warrant.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATA_DIR = Path(os.environ.get("WARRANT_DATA_DIR", BASE_DIR / "var"))
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if not DATABASE_URL:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{DATA_DIR / 'warrant.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        conn_health_checks=True,  # a kept connection the server dropped is replaced, not used
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers and the web process share the file; wait for the write lock instead of failing.
    # WAL: a commit is one append and one fsync of the log (not a rollback journal's several),
    # and readers never block the writer. mmap: pages are read from the OS cache through a memory
    # map instead of one read() call each (a chain verification reads every receipt's page).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE",
         "init_command": "PRAGMA journal_mode=WAL; PRAGMA mmap_size=1073741824;"}
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if env_bool("WARRANT_TEST_FAST_HASHER", False):
    # Tests create users by the hundred; a deliberately slow hash is pointless there.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# --- Web hardening ---------------------------------------------------------------------------
# Login throttling: after AXES_FAILURE_LIMIT failed logins for one username from one address,
# that pair is locked out for the cool-off (the admin's "Access attempts" lists and resets them).
AXES_FAILURE_LIMIT = int(os.environ.get("WARRANT_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("WARRANT_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no banner on every manage.py command (`make token` parses its output)
AXES_CLIENT_IP_CALLABLE = "governance.auth.client_ip"
# Behind a proxy that sets it, the header holding the client's address (e.g. HTTP_X_REAL_IP).
# Never name a header the client itself can set: it would pick the address it is counted under.
WARRANT_CLIENT_IP_HEADER = os.environ.get("WARRANT_CLIENT_IP_HEADER", "")

# Rows keyed by a digest of the cookie: reading django_session gives no one a way in (core.sessions).
SESSION_ENGINE = "core.sessions"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    # Production: cookies only over TLS, HSTS, and plain HTTP redirected (turn that off only
    # when a proxy in front already does it: DJANGO_SECURE_SSL_REDIRECT=0).
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    # Load balancers probe health, and Prometheus scrapes, over plain HTTP inside the network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", True)
    if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# Content security policy (django-csp): our own scripts only, nothing loaded from elsewhere, no
# framing. Inline scripts need the per-request nonce (`nonce="{{ request.csp_nonce }}"`); inline
# styles are allowed (the admin and the API viewer use them). Images: our own and data: URIs only,
# so a markdown image in model output cannot make a browser call out either.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# `manage.py collectstatic --noinput` fills it; the web process serves it through whitenoise.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", DATA_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production: content-hashed names (cached for a year by browsers, a new name on every change)
    # and gzip copies made once at collectstatic. Debug: plain names found in the apps, no
    # collectstatic needed (whitenoise then looks them up through the finders).
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage" if DEBUG
                    else "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Fixed at import (pytest-django turns DEBUG off later, and whitenoise would then read it).
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# Sign-in for everyone, staff or not (the admin's own login takes staff only); axes throttles it too.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "account"
LOGOUT_REDIRECT_URL = "landing"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Keys stored as digests, expiring, revocable (governance.tokens); DRF's own Token model is not used.
        "governance.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "DEFAULT_FILTER_BACKENDS": ["core.filters.StrictFilterBackend"],
    # JSON in: form and multipart bodies cannot say null or carry lists, so they are refused (415).
    # Nesting is bounded (core.parsers): a deep body is a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["core.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_SCHEMA_CLASS": "warrant.schema.WarrantAutoSchema",
    "DEFAULT_THROTTLE_RATES": {
        "run_create": os.environ.get("WARRANT_THROTTLE_RUN_CREATE", "60/min"),
        "approval_decide": os.environ.get("WARRANT_THROTTLE_APPROVAL_DECIDE", "120/min"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Warrant API",
    "DESCRIPTION": "Governed agent runs: start runs, decide approvals, read and verify receipts, manage policies.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",  # assets served from this server, never a CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "warrant.schema.document_errors"],
    # Tool sources and triggers both name a choice "kind": each enum gets its own name.
    "ENUM_NAME_OVERRIDES": {"TriggerKindEnum": "triggers.models.Trigger.Kind",
                            "ToolSourceKindEnum": "agents.models.ToolSource.Kind"},
}

# Bodies larger than this are refused before a view sees them.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("WARRANT_MAX_REQUEST_BYTES", str(256 * 1024)))

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["WARRANT_CACHE_URL"]}
        if os.environ.get("WARRANT_CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Celery: warrant/celery_config.py (the broker, delivery, time limits, beat) ----------
from warrant.celery_config import *  # noqa: E402,F403

# --- Mail and approval notices: warrant/mail_config.py (SMTP, the public URL, the webhook) ----
from warrant.mail_config import *  # noqa: E402,F403

# --- Warrant ----------------------------------------------------------------------------
WARRANT = {
    # How long one task keeps advancing a run before it re-enqueues itself.
    "TIME_SLICE_SECONDS": float(os.environ.get("WARRANT_TIME_SLICE_SECONDS", "5")),
    # A claimed run is owned for this long; its worker's heartbeat renews it while a step runs (runs.lease),
    # so it can be short: a run whose worker died is taken up again within about lease + heartbeat + reconcile.
    "LEASE_SECONDS": float(os.environ.get("WARRANT_LEASE_SECONDS", "15")),
    # How often the heartbeat renews the lease (and the claim on a side effect in flight); 0: a third of the lease.
    "HEARTBEAT_SECONDS": float(os.environ.get("WARRANT_HEARTBEAT_SECONDS", "5")),
    # How often each Celery worker runs the reconciler itself, beside beat (runs.ticker); 0: only beat.
    "WORKER_RECONCILE_SECONDS": float(os.environ.get("WARRANT_WORKER_RECONCILE_SECONDS", "5")),
    "MAX_DELIVERIES": int(os.environ.get("WARRANT_MAX_DELIVERIES", "5")),
    # A run queued this long without being claimed is assumed to have lost its message.
    "QUEUED_GRACE_SECONDS": int(os.environ.get("WARRANT_QUEUED_GRACE_SECONDS", "60")),
    # Without a broker (no beat), how often the web process runs the reconciler (runs.ticker); 0: never.
    "EMBEDDED_RECONCILE_SECONDS": float(os.environ.get("WARRANT_EMBEDDED_RECONCILE_SECONDS", "5")),
    "DEFAULT_APPROVAL_TTL_SECONDS": int(os.environ.get("WARRANT_APPROVAL_TTL_SECONDS", str(72 * 3600))),
    "TOOL_RESULT_MAX_CHARS": int(os.environ.get("WARRANT_TOOL_RESULT_MAX_CHARS", "20000")),
    # How much of one tool result the model is shown (fenced as data); the rest is cut, and says so.
    "TOOL_RESULT_CONTEXT_CHARS": int(os.environ.get("WARRANT_TOOL_RESULT_CONTEXT_CHARS", "12000")),
    # Approval requests one run may raise; past it, calls that need one are refused.
    "MAX_APPROVAL_REQUESTS_PER_RUN": int(os.environ.get("WARRANT_MAX_APPROVAL_REQUESTS_PER_RUN", "5")),
    # What is redacted from run traces and logs: api_keys, card_numbers, emails (governance.redaction).
    "REDACT": [k.strip() for k in os.environ.get("WARRANT_REDACT", "api_keys,card_numbers,emails").split(",")
               if k.strip()],
    # Who approves side effects of a run whose input or tool results read like injected orders.
    "TAINT_APPROVER_ROLE": os.environ.get("WARRANT_TAINT_APPROVER_ROLE", "secops"),
    "COMPLIANCE_ROLE": os.environ.get("WARRANT_COMPLIANCE_ROLE", "compliance"),
    "GOVERNANCE_ADMIN_ROLE": os.environ.get("WARRANT_GOVERNANCE_ADMIN_ROLE", "governance-admins"),
    # How long what one governance admin asked for (an emergency activation) waits for a second one to confirm.
    "SECOND_ADMIN_WINDOW_HOURS": float(os.environ.get("WARRANT_SECOND_ADMIN_WINDOW_HOURS", "24")),
    # How long a proposal to mark a tool source or built-in tool trusted waits for a second governance admin.
    "TRUST_PROPOSAL_HOURS": float(os.environ.get("WARRANT_TRUST_PROPOSAL_HOURS",
                                                 os.environ.get("WARRANT_SECOND_ADMIN_WINDOW_HOURS", "24"))),
    # Model calls (agents.routing): backoff between retries, and the most one profile may take
    # (attempts and waits together) before the next fallback. Keep it under the task time limit.
    "MODEL_RETRY_BASE_SECONDS": float(os.environ.get("WARRANT_MODEL_RETRY_BASE_SECONDS", "0.5")),
    "MODEL_RETRY_MAX_SECONDS": float(os.environ.get("WARRANT_MODEL_RETRY_MAX_SECONDS", "8")),
    "MODEL_RETRY_BUDGET_SECONDS": float(os.environ.get("WARRANT_MODEL_RETRY_BUDGET_SECONDS", "30")),
    # The circuit breaker (agents.breaker): this many failed attempts in a row open it, for this long.
    "MODEL_BREAKER_FAILURES": int(os.environ.get("WARRANT_MODEL_BREAKER_FAILURES", "5")),
    "MODEL_BREAKER_COOLDOWN_SECONDS": float(os.environ.get("WARRANT_MODEL_BREAKER_COOLDOWN_SECONDS", "30")),
    # Hosts model profiles may reach (comma-separated); empty allows any public host. Set it in production.
    "MODEL_ALLOWED_HOSTS": tuple(h.strip() for h in os.environ.get("WARRANT_MODEL_ALLOWED_HOSTS", "").split(",") if h.strip()),
    # Hosts that MCP-over-HTTP and OpenAPI tool sources may be reached on (empty: any host).
    "TOOL_ALLOWED_HOSTS": tuple(h.strip() for h in os.environ.get("WARRANT_TOOL_ALLOWED_HOSTS", "").split(",") if h.strip()),
    # Programs an mcp_stdio tool source may start (comma-separated); empty = none at all.
    "MCP_STDIO_COMMANDS": [c.strip() for c in os.environ.get("WARRANT_MCP_STDIO_COMMANDS", "").split(",") if c.strip()],
    # How a stdio tool server is confined (agents/tools/sandbox.py): auto (bubblewrap when it works
    # here, else an unprivileged user), bwrap (required: fail closed without it), user.
    "MCP_STDIO_SANDBOX": os.environ.get("WARRANT_MCP_STDIO_SANDBOX", "auto"),
    "MCP_STDIO_CPU_SECONDS": int(os.environ.get("WARRANT_MCP_STDIO_CPU_SECONDS", "300")),
    "MCP_STDIO_MEMORY_MB": int(os.environ.get("WARRANT_MCP_STDIO_MEMORY_MB", "2048")),
    "MCP_STDIO_MAX_SECONDS": int(os.environ.get("WARRANT_MCP_STDIO_MAX_SECONDS", "3600")),
    # Under bubblewrap: paths a server may read besides the system's and Python's, and programs whose
    # servers keep the network (every other one gets none).
    "MCP_STDIO_PATHS": [c.strip() for c in os.environ.get("WARRANT_MCP_STDIO_PATHS", "").split(",") if c.strip()],
    "MCP_STDIO_NETWORK": [c.strip() for c in os.environ.get("WARRANT_MCP_STDIO_NETWORK", "").split(",") if c.strip()],
    # Environment variables a model profile's api_key_env, a tool source's auth_env or env_passthrough
    # may name (names, or prefixes ending in *); empty = none.
    "SECRET_ENV_ALLOWED": [c.strip() for c in os.environ.get("WARRANT_SECRET_ENV_ALLOWED", "").split(",") if c.strip()],
    # Loopback, private and link-local networks any outbound host may resolve to (core/egress.py);
    # under debug, loopback, so that a model server on localhost works.
    "EGRESS_PRIVATE_NETWORKS": [c.strip() for c in os.environ.get(
        "WARRANT_EGRESS_PRIVATE_NETWORKS", "127.0.0.0/8,::1/128" if DEBUG else "").split(",") if c.strip()],
    # Model backends besides the built-in ones, as name=module.Class (entry points in the group
    # warrant.backends are found too). A profile names a backend; it never gives a dotted path.
    "MODEL_BACKENDS": dict(pair.strip().split("=", 1) for pair in os.environ.get("WARRANT_MODEL_BACKENDS", "").split(",")
                           if "=" in pair),
    # MCP sessions kept open between calls (agents/tools/mcp_pool.py); 0 = a new session for every call.
    "MCP_SESSION_IDLE_SECONDS": float(os.environ.get("WARRANT_MCP_SESSION_IDLE_SECONDS", "300")),
    "MCP_MAX_SESSIONS": int(os.environ.get("WARRANT_MCP_MAX_SESSIONS", "32")),
    # Dotted-path prefixes a python tool source may import (comma-separated); empty = none at all.
    # API tokens expire this many days after they are issued; 0 = never (not advised).
    "TOKEN_TTL_DAYS": int(os.environ.get("WARRANT_TOKEN_TTL_DAYS", "90")),
    "PYTHON_TOOL_MODULES": [c.strip() for c in os.environ.get("WARRANT_PYTHON_TOOL_MODULES", "").split(",") if c.strip()],
}

# --- Receipts: the signing key and the witness (runs/signing.py, runs/witness.py) --------------
# The Ed25519 key that signs receipts and checkpoints: a PEM file, or the key itself (PEM or base64
# of its raw 32 bytes). Never in the database. Debug mode without either makes a demo key in var/.
WARRANT_RECEIPT_SIGNING_KEY_FILE = os.environ.get("WARRANT_RECEIPT_SIGNING_KEY_FILE", "")
WARRANT_RECEIPT_SIGNING_KEY = os.environ.get("WARRANT_RECEIPT_SIGNING_KEY", "")
# Only a development server (DJANGO_DEBUG) may make itself a demo key when none is set.
WARRANT_RECEIPT_DEMO_KEY = DEBUG
# keys.json with the public keys retired by rotation: receipts they signed still verify.
WARRANT_RECEIPT_PUBLIC_KEYS_FILE = os.environ.get("WARRANT_RECEIPT_PUBLIC_KEYS_FILE",
                                                  str(DATA_DIR / "receipt-public-keys.json"))
# The chain's head goes to the witness after a seal, at most this often (0: after every seal); seals in
# between share the next checkpoint, and the reconciler sends a head no later seal did.
WARRANT_WITNESS_INTERVAL_SECONDS = float(os.environ.get("WARRANT_WITNESS_INTERVAL_SECONDS", "1"))
# Append-only JSON lines of signed checkpoints; "" turns the file sink off.
WARRANT_WITNESS_FILE = os.environ.get("WARRANT_WITNESS_FILE", str(DATA_DIR / "witness.jsonl"))
# An HTTP endpoint that receives each checkpoint as a JSON POST; its host must be listed below.
WARRANT_WITNESS_URL = os.environ.get("WARRANT_WITNESS_URL", "")
WARRANT_WITNESS_ALLOWED_HOSTS = tuple(
    h.strip() for h in os.environ.get("WARRANT_WITNESS_ALLOWED_HOSTS", "").split(",") if h.strip())

# /metrics (warrant.metrics): a bearer token, and/or client addresses or networks allowed without one.
# With neither set, /metrics answers 404.
WARRANT_METRICS_TOKEN = os.environ.get("WARRANT_METRICS_TOKEN", "")
WARRANT_METRICS_ALLOWED_IPS = tuple(
    a.strip() for a in os.environ.get("WARRANT_METRICS_ALLOWED_IPS", "").split(",") if a.strip())

# One line per event: JSON, or plain text under DEBUG (make run); WARRANT_LOG_FORMAT=json|console chooses.
# Request id, run id, user and trace ids on every line; secrets redacted (warrant.logs).
from warrant.logs import logging_config  # noqa: E402

LOGGING = logging_config(DEBUG)
