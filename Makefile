# Two commands for a newcomer: `make run` and `make test`; `make check` is the quick one for daily work.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: lock run check test test-main test-live test-services prod-smoke fuzz install install-test browser-deps sandbox-deps demo token clean bench bench-install bench-smoke

# The runtime from the lock: every package pinned, each file checked against its sha256 (pip-compile
# writes requirements.lock from requirements.txt; tests/test_lock.py keeps the two in step).
$(VENV)/.installed: requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements.lock
	touch $@

$(VENV)/.installed-test: requirements-test.txt requirements-security.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-test.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-security.txt
	touch $@

install: $(VENV)/.installed

# Rewrites requirements.lock from requirements.txt (options in pyproject.toml's [tool.pip-tools]),
# after a change to requirements.txt.
lock: install-test
	$(VENV)/bin/pip-compile requirements.txt

install-test: $(VENV)/.installed-test

# The browser tests (tests/browser) drive Debian's Chromium through Playwright; Playwright's own
# browser download is not used. Installed only when missing (needs root, as in CI).
CHROMIUM ?= /usr/bin/chromium
browser-deps:
	@test -x $(CHROMIUM) || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

# Stdio tool servers run inside Debian's bubblewrap when it works on this host (agents/tools/sandbox.py);
# installed when missing and apt is there to install it (needs root); without it, see docs/tool-sources.md.
sandbox-deps:
	@command -v bwrap >/dev/null || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && apt-get install -y -qq bubblewrap) || echo "bubblewrap not installed: stdio tool servers run without it"

demo: install
	DJANGO_DEBUG=1 $(PY) manage.py migrate --noinput
	DJANGO_DEBUG=1 $(PY) manage.py load_demo

# The venv's programs come first on PATH, so an mcp_stdio source can start `mcp-server-time`.
# No receipt signing key set: receipts are signed with a demo key made once in var/receipt-signing-key.pem
# (the log says so). Production sets WARRANT_RECEIPT_SIGNING_KEY_FILE (manage.py receipt_keys generate).
# The demo's one stdio program is allowed (an empty WARRANT_MCP_STDIO_COMMANDS allows none).
run: demo sandbox-deps
	@echo; echo "Warrant on http://127.0.0.1:$(PORT)/"; \
	echo "  the workbench (admin): http://127.0.0.1:$(PORT)/admin/   the API docs: http://127.0.0.1:$(PORT)/api/v1/docs/"; \
	echo "  a first call, from another terminal in this directory:"; \
	echo '    OP=$$(make -s token USER=operator)'; \
	echo '    curl -s -H "Authorization: Token $$OP" http://127.0.0.1:$(PORT)/api/v1/agents/'; echo
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" WARRANT_MCP_STDIO_COMMANDS="$${WARRANT_MCP_STDIO_COMMANDS-mcp-server-time}" \
		DJANGO_DEBUG=1 $(PY) manage.py runserver 127.0.0.1:$(PORT)

# Issues a NEW API token for USER and prints its key (only the digest is kept), e.g.
# `make -s token USER=operator`. A missing or unknown USER fails with the reason on stderr. USER
# must come from the command line: the environment's USER is the login name, not a Warrant user.
token: install
	@$(if $(filter command line,$(origin USER)),,echo 'name the user: make -s token USER=<username>' >&2; exit 2;) \
	DJANGO_DEBUG=1 $(PY) manage.py issue_token "$(USER)"

# The durability suite: real PostgreSQL (the machine's), its own Redis server on this port, and
# real Celery worker processes. `make test` runs it beside the fuzz and the benchmarks' smoke run.
PG_URL ?= postgres://postgres@127.0.0.1:5432/warrant
TEST_REDIS_PORT ?= 6399
# pytest-xdist processes for the main suite (auto: one per CPU); each has its own test database.
PYTEST_WORKERS ?= auto
# Where the parts that `make test` runs side by side write their output.
TEST_LOGS ?= var/test-logs

# Lint, the schema and the unit and API tests, in parallel: what a change needs before it is pushed.
# Left for `make test`: tests marked slow (they start Django, a venv, npm or a live server of their
# own) and the browser tests, as well as the durability suite, the fuzz and the benchmarks' smoke run.
# ruff and the schema check run in the background beside the tests (their output in TEST_LOGS,
# printed at the end, with each one's exit status); any of the three failing fails the target.
check: install-test
	@mkdir -p $(TEST_LOGS)
	@$(PY) -m ruff check . > $(TEST_LOGS)/ruff.log 2>&1 & lint=$$!; \
	DJANGO_DEBUG=1 $(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null > $(TEST_LOGS)/schema.log 2>&1 & schema=$$!; \
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not slow and not browser" --ignore=tests/browser; t=$$?; \
	wait $$lint; l=$$?; wait $$schema; c=$$?; \
	echo; echo "=== ruff"; cat $(TEST_LOGS)/ruff.log; echo "=== schema check"; cat $(TEST_LOGS)/schema.log; \
	echo; echo "ruff: exit $$l   schema check: exit $$c   pytest: exit $$t"; \
	[ $$l -eq 0 ] && [ $$c -eq 0 ] && [ $$t -eq 0 ]

# Everything: lint, the schema, the whole main suite in parallel, then the parts with servers of
# their own side by side. Any part failing fails the target.
test: install-test browser-deps sandbox-deps
	$(PY) -m ruff check .
	DJANGO_DEBUG=1 $(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null
	$(MAKE) --no-print-directory test-main
	$(MAKE) --no-print-directory test-live

test-main: install-test
	$(PY) -m pytest -n $(PYTEST_WORKERS)

# The benchmarks' smoke run, the durability suite, the fuzz and the production smoke share nothing
# (their own databases, Redis ports and servers), so they run at the same time. Each one's output
# goes to its log in TEST_LOGS and is printed when all four have ended; the target fails if any of
# them failed.
test-live: install-test bench-install
	@mkdir -p $(TEST_LOGS)
	@echo "bench-smoke, test-services, fuzz and prod-smoke side by side (output in $(TEST_LOGS)/)"
	@$(MAKE) --no-print-directory bench-smoke > $(TEST_LOGS)/bench-smoke.log 2>&1 & bench=$$!; \
	$(MAKE) --no-print-directory test-services > $(TEST_LOGS)/test-services.log 2>&1 & services=$$!; \
	$(MAKE) --no-print-directory fuzz > $(TEST_LOGS)/fuzz.log 2>&1 & fuzz=$$!; \
	$(MAKE) --no-print-directory prod-smoke > $(TEST_LOGS)/prod-smoke.log 2>&1 & prod=$$!; \
	wait $$bench; b=$$?; wait $$services; s=$$?; wait $$fuzz; f=$$?; wait $$prod; p=$$?; \
	for part in bench-smoke test-services fuzz prod-smoke; do echo; echo "=== $$part ($(TEST_LOGS)/$$part.log)"; cat $(TEST_LOGS)/$$part.log; done; \
	echo; echo "bench-smoke: exit $$b   test-services: exit $$s   fuzz: exit $$f   prod-smoke: exit $$p"; \
	[ $$b -eq 0 ] && [ $$s -eq 0 ] && [ $$f -eq 0 ] && [ $$p -eq 0 ]

# Its scenarios mostly wait (for a lease to lapse, a reconciler to pass, a worker to start), so it runs in
# more pytest-xdist processes than there are CPUs: each has its own Redis on TEST_REDIS_PORT + N, slow
# service on TEST_SLOW_SERVICE_PORT + N and test database (tests/services/conftest.py).
SERVICES_WORKERS ?= 4
test-services: install-test
	DATABASE_URL=$(PG_URL) CELERY_BROKER_URL=redis://127.0.0.1:$(TEST_REDIS_PORT)/0 $(PY) -m pytest tests/services -n $(SERVICES_WORKERS) --dist worksteal

# Warrant as the README's "Production" section deploys it: tests/prod/smoke.py runs that section's
# commands as written (DEBUG off, a generated secret key) against its own database PROD_SMOKE_DB on
# PG_URL's server (dropped and made again), its own redis-server on PROD_SMOKE_REDIS_PORT and gunicorn
# on PROD_SMOKE_PORT, with two Celery workers and beat; then a governed run with an approval by a second
# user, /readyz and /metrics, and the admin and the API docs in Chromium. Prints each phase's time;
# screenshots in var/prod-smoke/. Part of `make test`.
PROD_SMOKE_DB ?= warrant_prod_smoke
PROD_SMOKE_REDIS_PORT ?= 6398
PROD_SMOKE_PORT ?= 8098
prod-smoke: install-test browser-deps
	$(PY) tests/prod/smoke.py --pg-url $(PG_URL) --database $(PROD_SMOKE_DB) \
		--redis-port $(PROD_SMOKE_REDIS_PORT) --port $(PROD_SMOKE_PORT)

# Schemathesis against a live server: the operator (with a peer for object-level authorization) and
# the governance admin at once, each against its own gunicorn on loopback over a copy of a throwaway
# SQLite database. Per persona, examples and coverage for at most FUZZ_COVERAGE_SECONDS (45), then
# fuzzing (FUZZ_MAX_EXAMPLES, 10 cases an operation) and stateful (FUZZ_STATEFUL_EXAMPLES, 30) once,
# with no time budget (FUZZ_OPERATOR_SECONDS, FUZZ_ADMIN_SECONDS give one). 3 min 10 s at load 4-6 on
# two cores (docs/testing.md). Reports land in var/fuzz-results/ (latest: var/fuzz-results/latest).
# Part of `make test`.
fuzz: install-test
	$(PY) tests/fuzz/run_schemathesis.py

# Benchmarks (bench/): Warrant beside LangGraph, Pydantic AI and the floor of its own stack. They get
# a venv of their own (the project's requirements plus bench/requirements.txt) and write
# bench/RESULTS.md. Scenarios 3 and 4 create and drop databases warrant_bench_* on PG_URL's server
# and start their own redis-server on BENCH_REDIS_PORT (and the next port), gunicorn on BENCH_API_PORT.
BENCH_VENV := .venv-bench
BENCH_PY := $(BENCH_VENV)/bin/python
BENCH_REDIS_PORT ?= 6396
BENCH_API_PORT ?= 8096

$(BENCH_VENV)/.installed: bench/requirements.txt requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet -r bench/requirements.txt
	touch $@

bench-install: $(BENCH_VENV)/.installed

bench: bench-install
	$(BENCH_PY) -m bench.run --pg-url $(PG_URL) --redis-port $(BENCH_REDIS_PORT) --api-port $(BENCH_API_PORT)

# Every scenario once with tiny N, so the benchmarks cannot rot (part of `make test`).
bench-smoke: install-test bench-install
	WARRANT_BENCH_SMOKE=1 BENCH_PG_URL=$(PG_URL) BENCH_REDIS_PORT=$(BENCH_REDIS_PORT) BENCH_API_PORT=$(BENCH_API_PORT) \
		$(PY) -m pytest tests/bench

clean:
	rm -rf $(VENV) $(BENCH_VENV) var .pytest_cache
