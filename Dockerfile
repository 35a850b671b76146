# syntax=docker/dockerfile:1
# Warrant's production image: one image for the web process (the default command, gunicorn), the
# Celery workers and beat, and the one-off migrate + warrant_bootstrap step (see compose.yaml).
# Not built on the project's own machines, which have no Docker engine: docs/operations.md#containers
# says what was checked instead. The Python minor version is the one requirements.lock was compiled for.
ARG PYTHON_VERSION=3.11

# --- builder: the runtime's packages from the lock, every file checked against its sha256 -------
FROM python:${PYTHON_VERSION}-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
# Wheels only: nothing is compiled, so the slim image needs no compiler (psycopg[binary], google-re2,
# pyicu-wheels and cryptography ship their libraries inside their wheels).
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --only-binary=:all: -r /tmp/requirements.lock

# --- runtime: the venv, the code, the static files; no compiler, no pip cache, not root ----------
FROM python:${PYTHON_VERSION}-slim AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    WARRANT_DATA_DIR=/var/lib/warrant \
    DJANGO_STATIC_ROOT=/app/static \
    WEB_CONCURRENCY=2
# A system user with no shell and no home of its own; it owns only the data directory (a volume:
# the witness file, the public key file). The code and the static files stay root's, read-only to it.
RUN useradd --system --uid 10001 --user-group --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin warrant \
    && install -d -o warrant -g warrant -m 0750 /var/lib/warrant
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
COPY LICENSE manage.py ./
COPY warrant/ warrant/
COPY core/ core/
COPY governance/ governance/
COPY agents/ agents/
COPY skills/ skills/
COPY runs/ runs/
COPY review/ review/
COPY evals/ evals/
COPY triggers/ triggers/
COPY warrant_verify/ warrant_verify/
COPY templates/ templates/
# collectstatic at build time: content-hashed, compressed copies in /app/static, served by whitenoise.
# The settings refuse to load with debug off and no secret key or host list; these two are for this
# step alone and are not kept in the image (the web process gets its own from the environment).
RUN DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost WARRANT_DATA_DIR=/tmp/collectstatic \
        python manage.py collectstatic --noinput \
    && rm -rf /tmp/collectstatic \
    && python -m compileall -q /app
USER warrant
EXPOSE 8000
# Liveness: /healthz (exempt from the HTTPS redirect), asked with a Host header the settings accept.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; hosts = [h.strip().lstrip('.') for h in os.environ.get('DJANGO_ALLOWED_HOSTS', '').split(',') if h.strip() not in ('', '*')]; urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/healthz', headers={'Host': (hosts or ['localhost'])[0]}), timeout=4)"]
# The web process: WEB_CONCURRENCY gunicorn workers (gunicorn reads it; GUNICORN_CMD_ARGS adds options);
# no control socket (gunicorn 25+ makes one under $HOME, which this user has not: the orchestrator restarts).
# Workers and beat run the same image with their own command (compose.yaml).
CMD ["gunicorn", "warrant.wsgi", "--bind", "0.0.0.0:8000", "--worker-tmp-dir", "/dev/shm", "--no-control-socket"]
