#!/usr/bin/env python3
"""Schemathesis against a live Warrant: the real schema, a real gunicorn, two personas.

    .venv/bin/python tests/fuzz/run_schemathesis.py        (or just tests/fuzz/run_schemathesis.py)

1. A fresh SQLite database in a temporary directory (DATABASE_URL), migrated, with the demo
   loaded, a second operator `operator2` (role operators), API tokens for operator,
   operator2 and admin, and one tool source of each kind (TOOL_SOURCES). The server may start
   only `true` for an mcp_stdio source and import only tests.tools.pyfuncs for a python one
   (WARRANT_MCP_STDIO_COMMANDS, WARRANT_PYTHON_TOOL_MODULES), whatever the fuzzer sends.
2. `gunicorn warrant.wsgi` on a free loopback port with DJANGO_DEBUG=0 and throttles raised.
3. `schemathesis run http://127.0.0.1:<port>/api/v1/schema/` (the live schema, loaded with the
   persona's token), twice:
     - as `operator`, with `operator2` as its WFC peer, so the `object_level_authorization` check
       replays the operator's reads as operator2;
     - as governance admin `admin` (after the operator pass: the admin pass rewrites policies,
       roles and grants).
   All 14 checks (`[checks] enabled = true`), every phase (examples, coverage, fuzzing, stateful), at most
   `--max-examples` cases per operation per round and a time budget per pass.
4. tests/fuzz/peer_isolation.py between the two passes: operator2 gets 404 on operator's runs,
   events, receipts, verifications, cancels and approval decisions (writes included, which
   Schemathesis does not replay as a peer).
5. Reports (JUnit XML, JSON, NDJSON events, server logs) in the results directory
   (default a new var/fuzz-results/<time>-<pid>/, linked as var/fuzz-results/latest), counts
   printed, server stopped.

Exit status 0 only when no pass found a failure of any check, no pass errored, the server
answered no request with a 5xx and the peer isolation check passed.

Schemathesis is told only what it cannot know from the schema (SCHEMATHESIS_CONFIG and the
hooks below), each for a stated reason:
  - no NUL bytes in strings (Django refuses them in every text field, by design);
  - the names of demo objects (agent, tools, roles, model profile, a SKILL.md) for body fields
    that must name an existing object, and of the tool sources for their paths; negative cases
    still get schema-violating values;
  - fresh Idempotency-Keys (`before_call`): the generator repeats short strings, and the same key
    with another body is a 422 by contract;
  - a 400 refusing schema-valid data only for such cross-object or cross-field rules ("no role
    named 'x'", "a playbook needs content", a SKILL.md syntax error) is dropped (`filter_failure`,
    BUSINESS_RULES) and counted; any other refusal stays a failure;
  - DELETE skills/{name}/ retires the skill by design, so use_after_free is off for reading and
    editing it.
Gunicorn's request-line limit is lifted so that long generated query strings reach Django
instead of gunicorn's own HTML 414 page.
"""

from __future__ import annotations

import argparse
import json
import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PASSWORD = "warrant-demo"
HOOKS_FLAG = "WARRANT_FUZZ_HOOKS"
DROPS_FLAG = "WARRANT_FUZZ_DROPS"  # where the hooks log each failure they drop, and why

# Failure code -> the Schemathesis check that reports it.
CHECK_OF_CODE = {
    "ST101": "not_a_server_error", "ST102": "not_a_server_error", "ST103": "status_code_conformance",
    "ST104": "content_type_conformance", "ST105": "content_type_conformance", "ST106": "content_type_conformance",
    "ST107": "response_headers_conformance", "ST108": "response_schema_conformance",
    "ST109": "response_schema_conformance", "ST110": "response_schema_conformance",
    "ST111": "response_schema_conformance", "ST112": "max_response_time", "ST201": "negative_data_rejection",
    "ST202": "positive_data_acceptance", "ST203": "missing_required_header", "ST204": "unsupported_method",
    "ST205": "allow_header_conformance", "ST301": "use_after_free", "ST302": "ensure_resource_availability",
    "ST401": "ignored_auth", "ST402": "object_level_authorization",
}

SCHEMATHESIS_CONFIG = """\
[auth.wfc]
path = "{wfc}"
user = "{user}"
{peers}

# Every check. (Not `--checks all` on the command line: that is an override layer above the
# per-operation settings below, and would switch use_after_free back on for retired skills.)
[checks]
enabled = true

[generation]
# Django refuses NUL in every text field ("Null characters are not allowed") and PostgreSQL
# cannot store it; a JSON schema has no way to say so.
allow-x00 = false

# Names of objects that must exist: the schema can only say "a string". Positive cases use
# these demo objects; negative cases still get schema-violating values.
[dictionaries.agents]
values = ["crm-assistant"]

[dictionaries.tools]
values = {tools}

[dictionaries.roles]
values = ["secops", "operators"]

[dictionaries.profiles]
values = ["scripted"]

[dictionaries.skill_sources]
values = [{new_skill}]

[dictionaries.incident_summary]
values = [{incident_summary}]

[parameters]
"body.agent" = {{ dictionary = "agents" }}
"body.agents[*]" = {{ dictionary = "agents" }}
"body.tool" = {{ dictionary = "tools" }}
"body.tools[*]" = {{ dictionary = "tools" }}
"body.target_tools[*]" = {{ dictionary = "tools" }}
"body.role" = {{ dictionary = "roles" }}
"body.approver_role" = {{ dictionary = "roles" }}
"body.model_profile" = {{ dictionary = "profiles" }}
"body.backend" = {{ dictionary = "profiles" }}
"body.source" = {{ dictionary = "skill_sources" }}

[dictionaries.tool_sources]
values = {tool_sources}

# A tool source is read, changed and synced by name: name the ones the database holds.
[[operations]]
include-name = "GET /api/v1/tool-sources/{{name}}/"
parameters = {{ "path.name" = {{ dictionary = "tool_sources" }} }}

[[operations]]
include-name = "PATCH /api/v1/tool-sources/{{name}}/"
parameters = {{ "path.name" = {{ dictionary = "tool_sources" }} }}

[[operations]]
include-name = "POST /api/v1/tool-sources/{{name}}/sync/"
parameters = {{ "path.name" = {{ dictionary = "tool_sources" }} }}

# A skill cannot be renamed: a new SKILL.md for a skill must carry that skill's name.
[[operations]]
include-name = "PATCH /api/v1/skills/{{name}}/"
parameters = {{ "path.name" = "incident-summary", "body.source" = {{ dictionary = "incident_summary" }} }}

# A pass authenticates with one token: revoking it (DELETE tokens/{{public_id}}/, which lists and
# finds it) would turn the rest of the pass, and the peer isolation after it, into 401s.
# Revocation is tested in tests/api/test_token_auth.py.
[[operations]]
include-name = "DELETE /api/v1/tokens/{{public_id}}/"
enabled = false

# DELETE retires a skill by design (skills/api.py: "status becomes retired ... while the row
# (and the versions receipts name) stays readable"): reading it afterwards is not a use after free.
[[operations]]
include-name = "GET /api/v1/skills/{{name}}/"
checks.use_after_free.enabled = false

# ... and so is editing it: a retired skill's row is still there to PATCH (a DELETE, then an empty PATCH -> 200
# found by the stateful phase on 2026-12-02).
[[operations]]
include-name = "PATCH /api/v1/skills/{{name}}/"
checks.use_after_free.enabled = false
"""


# Refusals of schema-valid data that depend on other stored objects or on rules across fields:
# field of the error details -> what every message for it must look like. A positive_data_acceptance
# failure (ST202) whose 400 names only these is dropped by the `filter_failure` hook below, and
# counted as "dropped". Any other message - a length, a range, a pattern, "Unknown field." - keeps
# the failure: those are constraints the schema could state and does not.
BUSINESS_RULES = {
    # evals: a golden case's expectations must fit its expected status; its roles must exist; a profile must exist.
    "awaiting_tool": r"^only for expected status awaiting_approval$",
    "stop_reason": r"^only for expected status stopped$",
    "error": r"^only for expected status failed$",
    "decision": r"^a case that decides cannot end parked$",
    "roles": r"^no role named ",
    "profile": r"^unknown model profile ",
    # review.figures.period_from: a period of whole days, in order, at most 366 of them.
    "created_after": r"^(The period ends before it starts\.|A period is at most 366 days\.|The period runs off the calendar\.)$",
    "created_before": r"^(The period ends before it starts\.|A period is at most 366 days\.|The period runs off the calendar\.)$",
    "agent": r"^(unknown agent |no agent named |agent .* has no published version$)",
    "agents": r"^unknown agents: ",
    "role": r"^(no role named |Object with name=.* does not exist\.$)",
    # governance.roles: an approver role needs an active member (a role the fuzz itself just made has none).
    # A tool that requires approval must name who approves it (agents.services.tool_update).
    "approver_role": r"^(no role named |Object with name=.* does not exist\.$|the role .* has no active members"
                     r"|A tool that requires approval names the role that approves it\.$"
                     r"|the role .* has \d+ active members, fewer than the quorum )",
    # governance.selectors.routing_staff_problems: the role a request escalates to must be able to
    # meet the quorum too.
    "escalate_to_role": r"^(no role named |the role .* has no active members|the role .* has \d+ active members, "
                        r"fewer than the quorum )",
    "tool": r"^Object with name=.* does not exist\.$",
    # runs.standing: a standing approval's pattern must be able to match a valid call, and lasts 30 days at most.
    "arguments": r'^(must be \{"equals"|"in" (takes|lists) |the tool (takes no such|requires this) argument'
                 r"|the tool's schema refuses )",
    "expires_at": r"^(Must be in the future\.$|At most \d+ days from now\.$)",
    # review: a sampling rule's 'tool' trigger names its tools (review.models.SamplingRule.clean).
    "tools": r"^(Unknown tool: |the 'tool' trigger needs at least one tool name$)",
    # review.records: what a review record needs besides its schema, and who may be assigned a review.
    "severity": r"^(a finding has a severity: |only a finding has a severity$)",
    "note": r"^a finding or follow-up says what was found or done in its note$",
    "follows": r"^(only a follow-up follows a record$|a follow-up follows a finding or follow-up of the same review$)",
    "resolves": r"^only a follow-up resolves a finding$",
    "assignee": r"^(no user named |the reviewer's account is not active$|reviewers are members of the |the run's own "
                r"caller may not review it$|someone who decided an approval inside the run may not review it$)",
    # agents.services: an agent's budget role must exist, and it caps only tools it has.
    "budget_role": r"^no role named ",
    "tool_caps": r"^Caps only tools the agent has; ",
    "model_profile": r"^Unknown model profile: ",
    "fallbacks": r"^(Unknown model profile: |A profile may not fall back to itself\.$|Fallbacks form a cycle )",
    # agents.backends: a backend is a registered name (none of the fuzzer's made-up names is).
    "backend": r"^Not a registered model backend: ",
    # Issue 24: key variables only from WARRANT_SECRET_ENV_ALLOWED (empty on this server: none), URLs
    # only where core/egress.py lets them go. Rules of the deployment, not of the schema.
    "api_key_env": r"^[A-Z_][A-Z0-9_]* is not among the variables this deployment lets ",
    "env_passthrough": r"^[A-Z_][A-Z0-9_]* is not among the variables this deployment lets ",
    "base_url": r"^(This deployment does not let (model profiles|tool sources) reach it: |The \w+ backend needs the "
                r"server's base URL)",
    # agents.profile_options: what one backend takes, and what a profile's extra_body may not set or hold.
    "temperature": r"^The anthropic backend takes 0 to ",
    "extra_body": r"^(Is \d+ bytes as JSON|Has \d+ keys|May not set |May not hold a secret|Nests deeper than )",
    "output_schema": r"^Not a valid JSON Schema: ",
    # SKILL.md is a document with its own grammar (skills/parser.py); a skill keeps its name.
    "source": r"^(SKILL\.md |front matter|the SKILL\.md names )",
    # agents.sources.tool_source_check: what each kind of tool source needs besides its own fields.
    "command": r"^(An mcp_stdio source needs its command|Only an mcp_stdio source has a command\.$|.* is not among the "
               r"programs this deployment allows)",
    "url": r"^(An mcp_http source needs its endpoint URL\.$|This deployment does not let tool sources reach it: )",
    "document": r"^An openapi source needs its document",
    "path": r"^(A python source needs the dotted path|.* is outside the modules this deployment allows)",
    "auth_env": r"^(Give both the header and the environment variable|[A-Z_][A-Z0-9_]* is not among the variables "
                r"this deployment lets )",
    # triggers.services.trigger_problem: a trigger's template compiles, its schedule is one valid cron or interval
    # in a known time zone, its payload schema is a JSON schema, it runs as a service account.
    "input_template": r"^(template: |the input template is empty$)",
    "schedule": r"^(unknown time zone |a schedule has a cron expression or an interval, one of them$|the interval is at "
                r"least one second$|cron|only a schedule trigger has a cron expression or an interval$)",
    "payload_schema": r"^not a JSON schema: ",
    "service_account": r"^'.*' is not a service account$",
    # governance.drafts: a deletion names its policy and carries no values; an emergency states its reason.
    "delete": r"^a deletion names the policy it deletes$",
    "values": r"^(a deletion carries no values|the values the policy would have)$",
    "emergency_reason": r"^state why this cannot wait for a passing golden set$",
    # A second governance admin confirms the emergency another asked for, with no reason of their own.
    "confirm_emergency": r"^confirm the reason asked for, or ask with a reason; not both$",
    # governance.engine.validate: what each policy type needs besides its own fields.
    "non_field_errors": r"^(an? [a-z_ ]+ needs |an output formatter's content must contain \{answer\}$|invalid regex: "
                        # governance.engine.approval_routing_problems: quorum and escalation together.
                        r"|escalation needs both |escalate_to_role must differ |escalate_after_seconds \(\d+\) must be "
                        r"less than )",
}
# Rules whose message may stand under any field: an evidence bundle is chosen by its period alone
# (runs/receipts_api.py), whichever other filter of the export the schema offers is sent with it.
ANY_FIELD_RULE = r"^A bundle holds every receipt of its period: "


# --- the Schemathesis hooks (this file is also the SCHEMATHESIS_HOOKS module) ------------

if __name__ != "__main__" and os.environ.get(HOOKS_FLAG) == "1":
    import jsonschema
    import schemathesis

    _sent_keys: set[str] = set()
    _sent_lock = threading.Lock()

    def _fresh(key):
        """The key itself the first time; a schema-valid key never sent before after that."""
        if not isinstance(key, str) or not 1 <= len(key) <= 128:
            return key  # out-of-contract keys stay as generated: their refusal is what is tested
        with _sent_lock:
            if key in _sent_keys:
                key = f"{key[:95]}-{uuid.uuid4().hex}"
            _sent_keys.add(key)
        return key

    @schemathesis.hook
    def before_call(context, case, kwargs):
        # Keys belong to the user and outlive the request: a key Schemathesis happens to draw
        # twice would turn the second request into a 422 ("used with a different request").
        if case.headers:
            for name in list(case.headers):
                if name.lower() == "idempotency-key":
                    case.headers[name] = _fresh(case.headers[name])
        if isinstance(case.body, dict) and "idempotency_key" in case.body:
            case.body["idempotency_key"] = _fresh(case.body["idempotency_key"])

    @schemathesis.hook
    def filter_failure(context, failure, case, response):
        """Keep every failure but a 400 refusing data that was not schema-valid after all, or
        that breaks a rule no schema can state."""
        if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
            return True
        operation = f"{case.operation.method.upper()} {case.operation.path}"
        problem = _schema_violation(case)
        if problem is not None:
            _note_drop("case_violates_schema", operation, problem)
            return False
        try:
            details = response.json()["error"]["details"]
        except (ValueError, KeyError, TypeError):
            return True
        if _only_business_rules(details):
            _note_drop("business_rule", operation, json.dumps(details)[:300])
            return False
        return True

    def _note_drop(reason: str, operation: str, detail: str) -> None:
        path = os.environ.get(DROPS_FLAG)
        if path:
            with _sent_lock, open(path, "a") as out:
                out.write(json.dumps({"reason": reason, "operation": operation, "detail": detail}) + "\n")

    def _schema_violation(case) -> str | None:
        """Why a JSON body reported as schema-valid is not, by the schema itself; None if it is.

        Schemathesis' coverage phase can fall back to a loosened schema when it cannot build a
        value for the whole body, and then sends values that break a `pattern` (a slug "ýß") as
        positive cases. Re-checking the body against the declared schema with jsonschema tells
        those apart from real refusals of valid data, which stay failures.
        """
        raw = case.operation.schema.raw_schema
        operation = raw["paths"][case.operation.path][case.operation.method.lower()]
        body_schema = (operation.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
        if body_schema is None or not isinstance(case.body, (dict, list)):
            return None
        document = {**_draft4(body_schema), "components": _draft4(raw.get("components", {}))}
        error = jsonschema.exceptions.best_match(jsonschema.Draft4Validator(document).iter_errors(case.body))
        return None if error is None else f"{'/'.join(map(str, error.absolute_path))}: {error.message}"[:300]

    def _draft4(node):
        """OpenAPI 3.0's `nullable` spelled as JSON Schema draft 4 (a null type, a null in an enum)."""
        if isinstance(node, list):
            return [_draft4(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: _draft4(value) for key, value in node.items()}
        if node.pop("nullable", False):
            if "type" in node:
                node["type"] = [node["type"], "null"]
            if "enum" in node:
                node["enum"] = [*node["enum"], None]
        return node

    def _only_business_rules(details) -> bool:
        if not isinstance(details, dict) or not details:
            return False
        for field, messages in details.items():
            pattern = BUSINESS_RULES.get(field, ANY_FIELD_RULE)
            if isinstance(messages, dict):  # a list field's refusals, by item index ({"0": [...]})
                messages = [m for item in messages.values() for m in (item if isinstance(item, list) else [item])]
            messages = messages if isinstance(messages, list) else [messages]
            if not messages or not all(re.search(pattern, str(m)) or re.search(ANY_FIELD_RULE, str(m))
                                       for m in messages):
                return False
        return True


# --- the driver ---------------------------------------------------------------------------


def _reexec_in_venv() -> None:
    """Run under the project's virtualenv when started with another interpreter."""
    venv_python = REPO / ".venv" / "bin" / "python"
    try:
        import django  # noqa: F401
        import schemathesis  # noqa: F401
    except ImportError:
        if venv_python.exists() and Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
            os.execv(str(venv_python), [str(venv_python), __file__, *sys.argv[1:]])
        raise SystemExit("schemathesis is not installed: .venv/bin/pip install -r requirements-test.txt")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_env(tmp: Path) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items()
        # Nothing from the caller's Warrant/Django/Celery setup (the pytest pass sets DEBUG and a
        # fast hasher; `make test-services` sets PostgreSQL and Redis): this server is embedded.
        if not key.startswith(("DJANGO_", "WARRANT_", "DATABASE_", "CELERY_", "SCHEMATHESIS_"))
    }
    env.update({
        "DATABASE_URL": f"sqlite:///{tmp / 'warrant.sqlite3'}",
        "WARRANT_DATA_DIR": str(tmp),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "fuzz",
        "WARRANT_RECEIPT_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),  # production needs one
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        # Profiles the fuzzer creates and tests (POST model-profiles/{name}/test/) reach loopback only.
        "WARRANT_MODEL_ALLOWED_HOSTS": "127.0.0.1,localhost",
        # Production refuses loopback for admin-supplied URLs; this server's sources and profiles
        # live there (port 9 refuses), so loopback is the one private network it allows.
        "WARRANT_EGRESS_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128",
        "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback; production redirects to TLS
        "WARRANT_THROTTLE_RUN_CREATE": "100000/min",
        "WARRANT_THROTTLE_APPROVAL_DECIDE": "100000/min",
        "PYTHONUNBUFFERED": "1",
        # Tool sources start programs and import modules: keep the fuzzer's to harmless ones.
        "WARRANT_MCP_STDIO_COMMANDS": "true",
        "WARRANT_PYTHON_TOOL_MODULES": "tests.tools.pyfuncs",
    })
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args[:1])} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


PREPARE = """
import json
from django.core.management import call_command
call_command("migrate", "--noinput", verbosity=0)
call_command("load_demo", verbosity=0)
from django.contrib.auth.models import Group, User
from governance.tokens import token_issue
peer, _ = User.objects.get_or_create(username="operator2")
peer.set_password(%r)
peer.save()
peer.groups.add(Group.objects.get(name="operators"))
from agents.models import Tool
from agents.sources import tool_source_create
tokens = {name: token_issue(user=User.objects.get(username=name), via="command", issued_by="fuzz")[1]
          for name in ("operator", "operator2", "admin")}
for values in %r:
    tool_source_create(values=values)
print(json.dumps({"tokens": tokens, "tools": sorted(Tool.objects.values_list("name", flat=True))}))
"""

# One tool source of each kind, so that reads, changes and syncs of tool sources meet real rows
# (a generated name almost never names one). Each is as harmless as the server's allow-lists:
# `true` exits at once, port 9 on loopback refuses, the document has no servers to call.
TOOL_SOURCES = [
    {"name": "fuzz-py", "kind": "python", "path": "tests.tools.pyfuncs", "timeout_seconds": 5},
    {"name": "fuzz-stdio", "kind": "mcp_stdio", "command": ["true"], "timeout_seconds": 5},
    {"name": "fuzz-http", "kind": "mcp_http", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 5},
    {"name": "fuzz-doc", "kind": "openapi", "timeout_seconds": 5, "document": {
        "openapi": "3.0.3", "info": {"title": "fuzz", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9/"}],
        "paths": {"/notes/{id}": {"get": {"operationId": "read_note", "summary": "Read a note.", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]}}}}},
]


def _prepare_database(env: dict[str, str]) -> dict:
    # Migrate, the demo, the peer, the tokens and the sources in one interpreter: each start of
    # Django costs seconds.
    output = _manage(env, "shell", "-c", PREPARE % (PASSWORD, TOOL_SOURCES))
    return json.loads(output.strip().splitlines()[-1])


class Server:
    def __init__(self, env: dict[str, str], logs: Path, port: int):
        self.port = port
        self.access_log = logs / "gunicorn-access.log"
        self.error_log = logs / "gunicorn-error.log"
        self.output = open(logs / "server-output.log", "w")  # Django's log (tracebacks of 500s)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "warrant.wsgi", "-b", f"127.0.0.1:{port}",
             "--workers", "2", "--timeout", "120", "--graceful-timeout", "5",
             # Long generated query strings must reach Django, not stop at gunicorn's HTML 414.
             "--limit-request-line", "0",
             "--access-logfile", str(self.access_log), "--error-logfile", str(self.error_log),
             # Method, path, status, and whose token: requests per persona are counted from it.
             "--access-logformat", '%(m)s %(U)s %(s)s "%({authorization}i)s"'],
            cwd=REPO, env=env, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"gunicorn exited with {self.process.returncode}; see {self.error_log}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"gunicorn did not answer /healthz within {timeout:.0f}s")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait()
        self.output.close()


def _schemathesis(*, base: str, persona: str, tokens: dict[str, str], peers: list[str], tools: list[str],
                  tmp: Path, results: Path, args: argparse.Namespace) -> dict:
    wfc = tmp / f"auth-{persona}.json"
    names = [persona, *[peer for peer in peers if peer != persona]]
    wfc.write_text(json.dumps({"auth": [
        {"name": name, "fixedHeaders": [{"name": "Authorization", "value": f"Token {tokens[name]}"}]}
        for name in names
    ]}))
    config = tmp / f"schemathesis-{persona}.toml"
    incident_summary = (REPO / "skills" / "library" / "incident-summary" / "SKILL.md").read_text()
    new_skill = incident_summary.replace("name: incident-summary", "name: fuzz-new-skill", 1)
    config.write_text(SCHEMATHESIS_CONFIG.format(
        wfc=wfc, user=persona, peers=f"peers = {json.dumps(peers)}" if len(peers) > 1 else "",
        tools=json.dumps(tools), tool_sources=json.dumps([source["name"] for source in TOOL_SOURCES]), new_skill=json.dumps(new_skill), incident_summary=json.dumps(incident_summary)))
    report_dir = results / persona
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
        "run", f"{base}/api/v1/schema/",
        # The schema itself needs a logged-in user.
        "--header", f"Authorization: Token {tokens[persona]}",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(args.max_examples),
        "--max-time", str(args.operator_time if persona == "operator" else args.admin_time),
        "--workers", str(args.workers),
        "--request-timeout", "60",
        "--generation-database", "none",
        "--report", "junit,json,ndjson",
        "--report-dir", str(report_dir),
        "--report-junit-path", str(report_dir / "junit.xml"),
        "--report-json-path", str(report_dir / "report.json"),
        "--report-ndjson-path", str(report_dir / "events.ndjson"),
        "--no-color",
    ]
    if args.seed is not None:
        command += ["--seed", str(args.seed)]
    report_dir.mkdir(parents=True, exist_ok=True)
    drops = report_dir / "dropped.jsonl"
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(Path(__file__).resolve()), HOOKS_FLAG: "1", DROPS_FLAG: str(drops)}
    print(f"\n=== schemathesis as {persona}" + (f" (peers: {', '.join(peers)})" if len(peers) > 1 else "")
          + f": budget {command[command.index('--max-time') + 1]}s, all checks"
          + " (use_after_free off for GET and PATCH skills/{name}/ only) ===", flush=True)
    started = time.monotonic()
    with open(report_dir.parent / f"schemathesis-{persona}.log", "w") as log:
        process = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        assert process.stdout is not None
        try:
            for line in process.stdout:
                log.write(line)
                if args.verbose:
                    sys.stdout.write(line)
            process.wait()
        finally:
            if process.poll() is None:  # interrupted: take Schemathesis down with us
                process.kill()
                process.wait()
    summary = _read_report(report_dir / "report.json")
    summary["dropped_by_reason"] = _drops_by_reason(drops)
    summary.update(persona=persona, exit_code=process.returncode, seconds=time.monotonic() - started,
                   log=str(report_dir.parent / f"schemathesis-{persona}.log"))
    return summary


def _drops_by_reason(path: Path) -> Counter:
    try:
        return Counter(json.loads(line)["reason"] for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return Counter()


def _read_report(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"missing_report": True}
    operations = document.get("operations") or {}
    cases = document.get("test_cases") or {}
    return {
        "operations_tested": operations.get("tested", 0),
        "operations_selected": operations.get("selected", 0),
        "operations_errored": operations.get("errored", 0),
        "test_cases": cases.get("generated", 0),
        "unique_failures": cases.get("unique_failures", 0),
        "dropped": document.get("filtered") or 0,
        "failures": [
            {"code": item["code"], "title": item["title"], "check": CHECK_OF_CODE.get(item["code"], item["type"]),
             "count": item["count"], "operations": item["operations"]}
            for item in document.get("failures", [])
        ],
        "errors": document.get("errors", []),
        "phases": {name: phase["status"] for name, phase in (document.get("phases") or {}).items()},
        "seed": document.get("seed"),
        "complete": document.get("complete"),
        "warnings": {name: items for name, items in (document.get("warnings") or {}).items() if items},
    }


def _print_pass(summary: dict) -> None:
    print(f"--- {summary['persona']}: exit {summary['exit_code']}, {summary['seconds']:.0f}s, seed {summary.get('seed')}")
    if summary.get("missing_report"):
        print(f"    no JSON report was written; see {summary['log']}")
        return
    print(f"    operations tested: {summary['operations_tested']}/{summary['operations_selected']}"
          f" (errored: {summary['operations_errored']})")
    print(f"    test cases: {summary['test_cases']}, unique failures: {summary['unique_failures']},"
          f" dropped: {summary['dropped']} ({_reasons(summary.get('dropped_by_reason'))})")
    print(f"    phases: {', '.join(f'{name} {status}' for name, status in summary['phases'].items())}")
    if not summary["failures"]:
        print("    failures by check: none")
    for failure in summary["failures"]:
        print(f"    FAIL {failure['code']} {failure['title']} [{failure['check']}]: {failure['count']}"
              f" in {', '.join(failure['operations'])}")
    for error in summary["errors"]:
        print(f"    ERROR {error['title']}: {error['count']}")
    for name, items in summary["warnings"].items():
        if isinstance(items, list):
            print(f"    warning {name}: {len(items)} operation(s)")


def _reasons(counts: Counter | None) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted((counts or {}).items())) or "none"


def _server_census(server: Server, tokens: dict[str, str]) -> tuple[Counter, list[str]]:
    """Requests per persona and every 5xx the server answered, from gunicorn's access log."""
    personas = {f"Token {key}": name for name, key in tokens.items()}
    per_persona: Counter = Counter()
    server_errors: list[str] = []
    pattern = re.compile(r'^(\S+) (\S+) (\d{3}) "(.*)"$')
    try:
        lines = server.access_log.read_text(errors="replace").splitlines()
    except OSError:
        return per_persona, server_errors
    scrubbed = []
    for line in lines:
        match = pattern.match(line)
        if not match:
            scrubbed.append(line)
            continue
        method, path, status, authorization = match.groups()
        who = personas.get(authorization, "anonymous" if authorization == "-" else "invalid credentials")
        per_persona[who] += 1
        scrubbed.append(f"{method} {path} {status} {who}")
        if status.startswith("5"):
            server_errors.append(f"{status} {method} {path}")
    # The log keeps who sent each request, not their (throwaway) tokens.
    server.access_log.write_text("\n".join(scrubbed) + "\n")
    return per_persona, server_errors


def _results_dir(chosen: Path | str | None) -> Path:
    """A directory of this run's own, so that two runs at once never mix their logs."""
    if chosen:
        results = Path(chosen).resolve()
        results.mkdir(parents=True, exist_ok=True)
        for persona in ("operator", "admin"):  # only what an earlier run of this script wrote
            shutil.rmtree(results / persona, ignore_errors=True)
            (results / f"schemathesis-{persona}.log").unlink(missing_ok=True)
        for name in ("gunicorn-access.log", "gunicorn-error.log", "server-output.log"):  # gunicorn appends
            (results / name).unlink(missing_ok=True)
        return results
    root = REPO / "var" / "fuzz-results"
    results = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    results.mkdir(parents=True)
    runs = sorted(path for path in root.iterdir() if re.fullmatch(r"\d{8}-\d{6}-\d+", path.name))
    for old in runs[:-5]:  # keep the last five runs' reports
        shutil.rmtree(old, ignore_errors=True)
    latest = root / "latest"
    try:
        latest.unlink(missing_ok=True)
        latest.symlink_to(results.name)
    except OSError:
        pass  # a link is a convenience; the path is printed anyway
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The run `make test` makes: every operation, both personas and the peer isolation check, with
    # fewer generated cases per operation than a long run would (FUZZ_MAX_EXAMPLES=50 and budgets of
    # 600 s, say). Every pass has run all 57 operations through the coverage phase, which is not cut
    # by --max-examples, well inside these budgets; they stop a pass that would go on much longer.
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "10")),
                        help="test cases per operation per fuzzing round (default 10)")
    parser.add_argument("--operator-time", type=int, default=int(os.environ.get("FUZZ_OPERATOR_SECONDS", "120")),
                        help="time budget of the operator pass in seconds (default 120)")
    parser.add_argument("--admin-time", type=int, default=int(os.environ.get("FUZZ_ADMIN_SECONDS", "100")),
                        help="time budget of the admin pass in seconds (default 100)")
    # One worker: with two threads, CPython 3.11's AST builder (used while Schemathesis generates)
    # now and then raised "SystemError: AST constructor recursion depth mismatch" (CPython
    # gh-106905, a thread-state bug), an error of the tool and not of the API.
    parser.add_argument("--workers", type=int, default=int(os.environ.get("FUZZ_WORKERS", "1")))
    parser.add_argument("--seed", type=int, default=int(os.environ["FUZZ_SEED"]) if os.environ.get("FUZZ_SEED") else None)
    parser.add_argument("--results-dir", type=Path, default=os.environ.get("FUZZ_RESULTS_DIR"),
                        help="where the reports go (default: a new var/fuzz-results/<time>-<pid>/, linked"
                             " from var/fuzz-results/latest)")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary database directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="stream Schemathesis' output")
    args = parser.parse_args(argv)

    started = time.monotonic()
    results = _results_dir(args.results_dir)
    tmp = Path(tempfile.mkdtemp(prefix="warrant-fuzz-"))
    env = _server_env(tmp)
    print(f"database and config: {tmp}\nresults: {results}", flush=True)
    prepared = _prepare_database(env)
    tokens, tools = prepared["tokens"], prepared["tools"]
    print(f"demo loaded, operator2 created, tokens for {', '.join(tokens)} ({time.monotonic() - started:.0f}s)")

    port = _free_port()
    server = Server(env, results, port)
    base = f"http://127.0.0.1:{port}"
    passes: list[dict] = []
    peer_failures: list[str] = []
    peer_checks = 0
    try:
        server.wait_ready()
        print(f"gunicorn serving on {base}", flush=True)
        passes.append(_schemathesis(base=base, persona="operator", tokens=tokens, peers=["operator", "operator2"],
                                    tools=tools, tmp=tmp, results=results, args=args))
        _print_pass(passes[-1])

        sys.path.insert(0, str(HERE))
        import peer_isolation

        try:
            report = peer_isolation.check(f"{base}/api/v1", tokens["operator"], tokens["operator2"])
            peer_checks, peer_failures = report.checks, report.failures
        except Exception as exc:  # the companion could not even set up its objects
            peer_failures = [f"peer isolation could not run: {exc!r}"]
        print(f"\n=== peer isolation (operator's objects, operator2's token): {peer_checks} checks,"
              f" {len(peer_failures)} failures ===")
        for failure in peer_failures:
            print(f"    FAIL {failure}")

        passes.append(_schemathesis(base=base, persona="admin", tokens=tokens, peers=["admin"],
                                    tools=tools, tmp=tmp, results=results, args=args))
        _print_pass(passes[-1])
    finally:
        server.stop()
        if not args.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    per_persona, server_errors = _server_census(server, tokens)
    print("\n=== summary ===")
    print("requests served: " + ", ".join(f"{name} {count}" for name, count in per_persona.most_common()))
    print("operations tested: " + ", ".join(f"{p['persona']} {p.get('operations_tested', 0)}" for p in passes))
    print("test cases: " + ", ".join(f"{p['persona']} {p.get('test_cases', 0)}" for p in passes))
    by_check: Counter = Counter()
    for summary in passes:
        for failure in summary.get("failures", []):
            by_check[f"{failure['code']} {failure['check']}"] += failure["count"]
    print("failures by check: " + (", ".join(f"{name} {count}" for name, count in sorted(by_check.items()))
                                   or "none"))
    print(f"5xx answered by the server: {len(server_errors)}")
    for line in sorted(set(server_errors))[:20]:
        print(f"    {line}")
    if server_errors:
        print(f"    tracebacks: {results / 'server-output.log'}")
    print(f"peer isolation failures: {len(peer_failures)}")
    print(f"reports: {results}")
    print(f"total time: {time.monotonic() - started:.0f}s")

    ok = (
        all(p.get("exit_code") == 0 and not p.get("missing_report") and not p.get("failures") and not p.get("errors")
            for p in passes)
        and len(passes) == 2
        and not server_errors
        and not peer_failures
    )
    print("RESULT: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    _reexec_in_venv()
    # A SIGTERM (a timeout, `kill`) unwinds like Ctrl-C, so the server and Schemathesis are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(main())
