"""The API's role matrix: every operation x every persona -> the status it must answer.

`MATRIX` below is the review document. Each row is one operation (HTTP method and the route
as the URL conf spells it, relative to /api/v1/, with `{kwarg}` for its parameters); each
column is a persona. Every cell is a test case that sends a valid request, against real
objects, as that persona (real `Authorization: Token ...` headers, the way integrators call),
so the status is the permission outcome and nothing else:

    200/201/204  allowed (the write really happens; the transaction is rolled back afterwards)
    401          anonymous: no credentials (with our error body and `WWW-Authenticate: Token`)
    403          known object or endpoint, but the persona's roles forbid the operation
    404          the object is invisible to the persona (someone else's run, receipt, approval)

The cells are tested in test_role_matrix_cells.py, the objects they act on are built in
role_matrix_world.py. A new route, or a new method on an existing route, without a reviewed row
fails `test_every_route_and_method_has_a_reviewed_row`; a row whose route is gone fails
`test_every_row_names_an_existing_route` (both in test_role_matrix_routes.py).

Personas (the demo of docs/design.md):
    anonymous   no credentials at all
    operator    role `operators` (may start runs); the caller of every run the cells act on
    approver    role `secops` (approves send_email / delete_account)
    compliance  role `compliance` (reads every run and receipt)
    admin       role `governance-admins` AND a superuser
    outsider    logged in, in no role
"""

from datetime import timedelta

from django.utils import timezone

API = "/api/v1/"

PERSONAS = ("anonymous", "operator", "approver", "compliance", "admin", "outsider")

# ---------------------------------------------------------------------------------------
# THE MATRIX (review this table, not the code that tests it)
# ---------------------------------------------------------------------------------------
#                                                   anon  oper  appr  comp  admin outs
MATRIX: dict[tuple[str, str], tuple[int, int, int, int, int, int]] = {
    # --- runs: the operator starts and owns runs; compliance (and superusers) read them all.
    ("GET", "runs/"):                               (401,  200,  200,  200,  200,  200),  # each sees only what they may (outsider: empty)
    ("POST", "runs/"):                              (401,  201,  403,  403,  201,  403),  # runs.add_run; a superuser holds every permission
    ("GET", "runs/{run_id}/"):                      (401,  200,  404,  200,  200,  404),
    ("GET", "runs/{run_id}/events/"):               (401,  200,  404,  200,  200,  404),
    ("POST", "runs/{run_id}/cancel/"):              (401,  200,  404,  403,  403,  404),  # only the caller; who can read it (compliance, superuser) gets 403
    # --- approvals: members of the approver role (secops), never the run's caller, superusers not exempt.
    ("GET", "approvals/"):                          (401,  200,  200,  200,  200,  200),  # filtered to the persona's roles (compliance/superuser: all)
    ("GET", "approvals/{approval_id}/"):            (401,  404,  200,  200,  200,  404),  # one request and its decisions; same visibility as the list
    ("POST", "approvals/{approval_id}/approve/"):   (401,  404,  200,  403,  403,  404),  # operator: not in secops, request invisible
    ("POST", "approvals/{approval_id}/deny/"):      (401,  404,  200,  403,  403,  404),  # compliance/admin see it, may not decide it
    # --- standing approvals: granted by members of the role a policy asks (superusers not exempt); revoked by
    # the granter, the role's members or a superuser; seen by the role's members and compliance.
    ("GET", "standing-approvals/"):                 (401,  200,  200,  200,  200,  200),  # filtered (operator/outsider: empty)
    ("POST", "standing-approvals/"):                (401,  403,  201,  403,  403,  403),
    ("GET", "standing-approvals/{standing_id}/"):   (401,  404,  200,  200,  200,  404),
    ("POST", "standing-approvals/{standing_id}/revoke/"): (401, 404, 200, 403, 200, 404),  # compliance reads it, may not revoke
    # --- receipts: read-only; compliance reads all, an owner reads their own.
    ("GET", "receipts/"):                           (401,  200,  200,  200,  200,  200),  # filtered (approver/outsider: empty)
    ("GET", "receipts/export/"):                    (401,  200,  200,  200,  200,  200),  # filtered (approver/outsider: empty file)
    ("GET", "receipts/{receipt_id}/"):              (401,  200,  404,  200,  200,  404),
    ("GET", "receipts/{receipt_id}/verify/"):       (401,  200,  404,  200,  200,  404),
    ("GET", "receipts/keys/"):                      (401,  200,  200,  200,  200,  200),  # public keys: anyone logged in
    # --- policies: anyone with a role reads; governance admins write and dry-run.
    ("GET", "policies/"):                           (401,  200,  200,  200,  200,  403),
    ("POST", "policies/"):                          (401,  403,  403,  403,  201,  403),
    ("POST", "policies/evaluate/"):                 (401,  403,  403,  403,  200,  403),
    ("GET", "policies/{policy_id}/"):               (401,  200,  200,  200,  200,  403),
    ("PATCH", "policies/{policy_id}/"):             (401,  403,  403,  403,  200,  403),
    ("DELETE", "policies/{policy_id}/"):            (401,  403,  403,  403,  204,  403),
    ("GET", "policies/{policy_id}/history/"):       (401,  200,  200,  200,  200,  403),
    # --- policy drafts (governance.drafts): read as policies are; proposed, gated, activated by governance admins
    ("GET", "policies/drafts/"):                    (401,  200,  200,  200,  200,  403),
    ("POST", "policies/drafts/"):                   (401,  403,  403,  403,  201,  403),
    ("GET", "policies/drafts/{draft_id}/"):         (401,  200,  200,  200,  200,  403),
    ("POST", "policies/drafts/{draft_id}/gate/"):   (401,  403,  403,  403,  200,  403),  # the golden set, before and after
    ("POST", "policies/drafts/{draft_id}/activate/"): (401, 403,  403,  403,  200,  403),  # in force when the gate passes
    ("POST", "policies/drafts/{draft_id}/discard/"): (401,  403,  403,  403,  200,  403),
    ("POST", "policies/evaluate/golden/"):          (401,  403,  403,  403,  200,  403),  # the Lab's trial: nothing saved
    # --- roles and tool grants
    ("GET", "roles/"):                              (401,  200,  200,  200,  200,  403),
    ("POST", "roles/"):                             (401,  403,  403,  403,  201,  403),
    ("GET", "roles/{name}/"):                       (401,  200,  200,  200,  200,  403),
    ("DELETE", "roles/{name}/"):                    (401,  403,  403,  403,  204,  403),
    ("GET", "grants/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "grants/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "grants/{grant_id}/"):                  (401,  200,  200,  200,  200,  403),
    ("DELETE", "grants/{grant_id}/"):               (401,  403,  403,  403,  204,  403),
    # --- agents (by slug) and their published versions
    ("GET", "agents/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "agents/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "agents/{slug}/"):                      (401,  200,  200,  200,  200,  403),
    ("PATCH", "agents/{slug}/"):                    (401,  403,  403,  403,  200,  403),
    ("POST", "agents/{slug}/publish/"):             (401,  403,  403,  403,  201,  403),
    ("GET", "agents/{slug}/versions/"):             (401,  200,  200,  200,  200,  403),
    ("GET", "agents/{slug}/versions/{version}/"):   (401,  200,  200,  200,  200,  403),
    # --- model profiles (by name)
    ("GET", "model-profiles/"):                     (401,  200,  200,  200,  200,  403),
    ("POST", "model-profiles/"):                    (401,  403,  403,  403,  201,  403),
    ("GET", "model-profiles/{name}/"):              (401,  200,  200,  200,  200,  403),
    ("PATCH", "model-profiles/{name}/"):            (401,  403,  403,  403,  200,  403),
    ("POST", "model-profiles/{name}/test/"):        (401,  403,  403,  403,  200,  403),  # calls the model server: admins only
    # --- the tool registry (by name)
    ("GET", "tools/"):                              (401,  200,  200,  200,  200,  403),
    ("GET", "tools/{name}/"):                       (401,  200,  200,  200,  200,  403),
    ("PATCH", "tools/{name}/"):                     (401,  403,  403,  403,  200,  403),
    ("POST", "tools/{name}/approve-change/"):       (401,  403,  403,  403,  200,  403),  # re-approve a held tool
    # --- tool sources (by name): infrastructure, governance admins only, reads included
    ("GET", "tool-sources/"):                       (401,  403,  403,  403,  200,  403),
    ("POST", "tool-sources/"):                      (401,  403,  403,  403,  201,  403),
    ("GET", "tool-sources/{name}/"):                (401,  403,  403,  403,  200,  403),
    ("PATCH", "tool-sources/{name}/"):              (401,  403,  403,  403,  200,  403),
    ("POST", "tool-sources/{name}/sync/"):          (401,  403,  403,  403,  200,  403),
    # --- trust proposals: marking trusted takes a second governance admin (agents.trust)
    ("GET", "trust-proposals/"):                    (401,  403,  403,  403,  200,  403),
    ("POST", "trust-proposals/{pk}/confirm/"):      (401,  403,  403,  403,  200,  403),  # proposed by another admin
    ("POST", "trust-proposals/{pk}/refuse/"):       (401,  403,  403,  403,  200,  403),
    ("POST", "trust-proposals/{pk}/withdraw/"):     (401,  403,  403,  403,  200,  403),  # the admin's own proposal
    # --- skills (by name); DELETE retires
    ("GET", "skills/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "skills/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "skills/{name}/"):                      (401,  200,  200,  200,  200,  403),
    ("PATCH", "skills/{name}/"):                    (401,  403,  403,  403,  200,  403),
    ("DELETE", "skills/{name}/"):                   (401,  403,  403,  403,  204,  403),
    # --- API tokens: everyone their own only; another's token is 404 to all, superusers included.
    ("GET", "tokens/"):                             (401,  200,  200,  200,  200,  200),  # each lists only their own
    ("POST", "tokens/"):                            (401,  403,  403,  403,  403,  403),  # a token cannot mint tokens (session only)
    ("GET", "tokens/{public_id}/"):                 (401,  200,  404,  404,  404,  404),  # the operator's token
    ("DELETE", "tokens/{public_id}/"):              (401,  204,  404,  404,  404,  404),  # revoke: its owner only
    # --- OpenAPI: anyone logged in
    ("GET", "schema/"):                             (401,  200,  200,  200,  200,  200),
    ("GET", "docs/"):                               (401,  200,  200,  200,  200,  200),
    # --- the dashboard's figures (review/): compliance, governance admins and superusers
    ("GET", "dashboard/summary/"):                  (401,  403,  403,  200,  200,  403),
    # --- compliance review (review/): compliance, governance admins and superusers; records by the assignee only
    ("GET", "review/rules/"):                       (401,  403,  403,  200,  200,  403),
    ("POST", "review/rules/"):                      (401,  403,  403,  201,  201,  403),
    ("GET", "review/rules/{rule_id}/"):             (401,  403,  403,  200,  200,  403),
    ("PATCH", "review/rules/{rule_id}/"):           (401,  403,  403,  200,  200,  403),
    ("DELETE", "review/rules/{rule_id}/"):          (401,  403,  403,  202,  202,  403),  # a proposal a second person approves
    ("GET", "review/rule-proposals/"):              (401,  403,  403,  200,  200,  403),
    ("GET", "review/rule-proposals/{proposal_id}/"): (401, 403,  403,  200,  200,  403),
    ("POST", "review/rule-proposals/{proposal_id}/approve/"):  (401, 403, 403, 200, 200, 403),  # proposed by another member
    ("POST", "review/rule-proposals/{proposal_id}/refuse/"):   (401, 403, 403, 200, 200, 403),
    ("POST", "review/rule-proposals/{proposal_id}/withdraw/"): (401, 403, 403, 403, 200, 403),  # the admin's own
    ("GET", "review/queue/"):                       (401,  403,  403,  200,  200,  403),
    ("GET", "review/items/{item_id}/"):             (401,  403,  403,  200,  200,  403),
    ("POST", "review/items/{item_id}/assign/"):     (401,  403,  403,  200,  200,  403),
    ("POST", "review/items/{item_id}/records/"):    (401,  403,  403,  201,  403,  403),  # the assignee (compliance) only
    ("GET", "review/verify/"):                      (401,  403,  403,  200,  200,  403),
    # --- evals (evals/): golden cases written by governance admins; governance admins and compliance read and run them
    ("GET", "evals/cases/"):                        (401,  403,  403,  200,  200,  403),
    ("POST", "evals/cases/"):                       (401,  403,  403,  403,  201,  403),
    ("GET", "evals/cases/{case_id}/"):              (401,  403,  403,  200,  200,  403),
    ("PATCH", "evals/cases/{case_id}/"):            (401,  403,  403,  403,  202,  403),  # a proposal a second admin approves
    ("DELETE", "evals/cases/{case_id}/"):           (401,  403,  403,  403,  202,  403),  # a proposal
    ("POST", "evals/cases/{case_id}/record/"):      (401,  403,  403,  403,  202,  403),  # a proposal; 409 when the case would fail
    ("GET", "evals/case-proposals/"):               (401,  403,  403,  200,  200,  403),
    ("GET", "evals/case-proposals/{proposal_id}/"): (401,  403,  403,  200,  200,  403),
    ("POST", "evals/case-proposals/{proposal_id}/approve/"):  (401, 403, 403, 403, 200, 403),  # proposed by another admin
    ("POST", "evals/case-proposals/{proposal_id}/refuse/"):   (401, 403, 403, 403, 200, 403),
    ("POST", "evals/case-proposals/{proposal_id}/withdraw/"): (401, 403, 403, 403, 200, 403),  # the admin's own
    ("GET", "evals/cases/{case_id}/versions/"):     (401,  403,  403,  200,  200,  403),
    ("GET", "evals/runs/"):                         (401,  403,  403,  200,  200,  403),
    ("POST", "evals/runs/"):                        (401,  403,  403,  201,  201,  403),  # runs in isolation: no run, no side effect
    # --- triggers (triggers/): anyone with a role reads; governance admins write, pause, resume, rotate
    ("GET", "triggers/"):                           (401,  200,  200,  200,  200,  403),
    ("POST", "triggers/"):                          (401,  403,  403,  403,  201,  403),
    ("GET", "triggers/{name}/"):                    (401,  200,  200,  200,  200,  403),
    ("PATCH", "triggers/{name}/"):                  (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/pause/"):             (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/resume/"):            (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/rotate-secret/"):     (401,  403,  403,  403,  200,  403),
    ("GET", "triggers/{name}/fires/"):              (401,  200,  200,  200,  200,  403),
    # --- service accounts (triggers/): who the headless identities are is governance admins' alone
    ("GET", "service-accounts/"):                   (401,  403,  403,  403,  200,  403),
    ("POST", "service-accounts/"):                  (401,  403,  403,  403,  201,  403),
    ("GET", "service-accounts/{username}/"):        (401,  403,  403,  403,  200,  403),
    ("POST", "service-accounts/{username}/disable/"): (401, 403, 403,  403,  200,  403),
    ("POST", "service-accounts/{username}/enable/"): (401,  403,  403,  403,  200,  403),
    # a webhook delivery is authenticated by its HMAC signature only: a token is no credential there
    ("POST", "hooks/{trigger}/"):                   (401,  401,  401,  401,  401,  401),
    ("GET", "evals/runs/{run_id}/"):                (401,  403,  403,  200,  200,  403),
}

# Cells whose expected status above is the CORRECT one but the code answers otherwise today:
# (method, route, persona) -> reason. Each becomes xfail(strict=True), so fixing the defect
# turns the case green only after this entry is removed.
KNOWN_DEFECTS: dict[tuple[str, str, str], str] = {}

SKILL_TEXT = """---
name: {name}
description: A skill the role matrix creates.
tags: [matrix]
allowed-tools: [calculator]
---

1. Call `calculator`.
"""

# Valid bodies, so that the status is the permission outcome. Keyed like MATRIX.
BODIES = {
    ("POST", "runs/"): {"agent": "crm-assistant", "input": "List all accounts."},
    ("POST", "runs/{run_id}/cancel/"): {},
    ("POST", "approvals/{approval_id}/approve/"): {"reason": "matrix"},
    ("POST", "approvals/{approval_id}/deny/"): {"reason": "matrix"},
    ("POST", "standing-approvals/"): {"tool": "send_email", "role": "secops", "reason": "matrix",
                                      "arguments": {"to": {"equals": "dana@example.com"}, "subject": {"equals": "Hi"},
                                                    "body": {"in": ["Hello", "Hi"]}},
                                      "expires_at": (timezone.now() + timedelta(days=7)).isoformat()},
    ("POST", "standing-approvals/{standing_id}/revoke/"): {"reason": "matrix"},
    ("POST", "policies/"): {"name": "matrix-new-policy", "type": "playbook", "keywords": ["matrix"],
                            "content": "1. Call `list_accounts`."},
    ("POST", "policies/evaluate/"): {"agent": "crm-assistant", "input": "Delete the account Initech."},
    ("PATCH", "policies/{policy_id}/"): {"description": "changed by the matrix"},
    ("POST", "policies/drafts/"): {"policy": None, "values": {"name": "matrix-drafted", "type": "playbook",
                                                              "keywords": ["matrix"], "content": "1. Answer."}},
    ("POST", "policies/drafts/{draft_id}/gate/"): {},
    ("POST", "policies/drafts/{draft_id}/activate/"): {},
    ("POST", "policies/drafts/{draft_id}/discard/"): {},
    ("POST", "policies/evaluate/golden/"): {"values": {"name": "matrix-trial", "type": "playbook",
                                                       "keywords": ["matrix"], "content": "1. Answer."}},
    ("POST", "roles/"): {"name": "matrix-new-role"},
    ("POST", "grants/"): {"role": "matrix-role", "tool": "get_account"},
    ("POST", "agents/"): {"slug": "matrix-new-agent", "name": "Matrix agent", "instructions": "Answer.",
                          "model_profile": "scripted", "tools": ["calculator"]},
    ("PATCH", "agents/{slug}/"): {"description": "changed by the matrix"},
    ("POST", "agents/{slug}/publish/"): {},
    ("POST", "model-profiles/"): {"name": "matrix-new-profile", "backend": "scripted", "model": "scripted-1"},
    ("PATCH", "model-profiles/{name}/"): {"read_timeout": 30},
    ("POST", "model-profiles/{name}/test/"): {},
    ("PATCH", "tools/{name}/"): {"timeout_seconds": 5},
    ("POST", "skills/"): {"source": SKILL_TEXT.format(name="matrix-new-skill")},
    ("PATCH", "skills/{name}/"): {"status": "retired"},
    ("POST", "tools/{name}/approve-change/"): {},
    ("POST", "tool-sources/"): {"name": "matrix-new-source", "kind": "python", "path": "tests.tools.pyfuncs"},
    ("PATCH", "tool-sources/{name}/"): {"timeout_seconds": 7},
    ("POST", "tool-sources/{name}/sync/"): {},
    ("POST", "trust-proposals/{pk}/confirm/"): {},
    ("POST", "trust-proposals/{pk}/refuse/"): {},
    ("POST", "trust-proposals/{pk}/withdraw/"): {},
    ("POST", "tokens/"): {"name": "matrix"},
    ("POST", "evals/cases/"): {"agent": "crm-assistant", "name": "matrix-case", "input": "List all accounts.",
                               "roles": ["operators"], "expected_status": "succeeded"},
    ("PATCH", "evals/cases/{case_id}/"): {"description": "changed by the matrix"},
    ("POST", "evals/cases/{case_id}/record/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/approve/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/refuse/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/withdraw/"): {},
    ("POST", "evals/runs/"): {"agent": "crm-assistant"},
    ("POST", "review/rules/"): {"name": "matrix-new-rule", "percentage": 10, "always": ["denial"]},
    ("PATCH", "review/rules/{rule_id}/"): {"note": "changed by the matrix"},
    ("POST", "review/rule-proposals/{proposal_id}/approve/"): {},
    ("POST", "review/rule-proposals/{proposal_id}/refuse/"): {},
    ("POST", "review/rule-proposals/{proposal_id}/withdraw/"): {},
    ("POST", "review/items/{item_id}/assign/"): {"assignee": "compliance"},
    ("POST", "review/items/{item_id}/records/"): {"record_kind": "sign_off", "note": "matrix"},
    ("POST", "triggers/"): {"name": "matrix-new-trigger", "kind": "webhook", "agent": "crm-assistant",
                            "service_account": "matrix-bot", "input_template": "{{ payload.text }}"},
    ("PATCH", "triggers/{name}/"): {"description": "changed by the matrix"},
    ("POST", "triggers/{name}/pause/"): {},
    ("POST", "triggers/{name}/resume/"): {},
    ("POST", "triggers/{name}/rotate-secret/"): {},
    ("POST", "hooks/{trigger}/"): {"text": "unsigned"},
    ("POST", "service-accounts/"): {"username": "matrix-new-bot", "roles": ["operators"]},
    ("POST", "service-accounts/{username}/disable/"): {},
    ("POST", "service-accounts/{username}/enable/"): {},
}
# Authenticated by a signature, not a token: their 401 is a bad signature, challenged as such.
SIGNED = {("POST", "hooks/{trigger}/")}

# Error codes of our one error body, by status.
ERROR_CODES = {401: {"not_authenticated"}, 403: {"permission_denied", "forbidden"}, 404: {"not_found"}}
QUERIES = {("GET", "receipts/export/"): "?format=jsonl"}  # the export requires its format
NOT_JSON = {("GET", "schema/"), ("GET", "docs/"), ("GET", "receipts/export/")}  # YAML; HTML viewer; JSON lines
