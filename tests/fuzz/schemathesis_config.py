"""The Schemathesis configuration of one persona's pass: what it cannot know from the schema.

Each setting says why it is there:
  - no NUL bytes in strings (Django refuses them in every text field, by design);
  - the names of demo objects (agent, tools, roles, model profile, a SKILL.md) for body fields
    that must name an existing object, and of the tool sources for their paths; negative cases
    still get schema-violating values;
  - the persona's credentials (a token, or a signed-in session's cookie and CSRF token), and its
    peers' for the object_level_authorization check (a WFC auth file);
  - no revoking of the pass's own token, and no use_after_free for a retired skill, which stays
    readable and editable by design;
  - only a few cases for an operation the role matrix refuses the persona (FORBIDDEN_SECTION);
  - for the desk's passes, the review items and approvals the database holds, and what a standing
    approval must state (DESK_SECTION).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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
# Cases per operation in the fuzzing phase. Here and not on the command line, which would
# override the stateful phase's own number below as well.
max-examples = {max_examples}

# Scenarios of the stateful phase, each a chain of up to six requests where a response's ids
# feed the next request: a few seconds per ten of them.
[phases.stateful.generation]
max-examples = {stateful_examples}

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

# A pass that authenticates with one token must not revoke it (DELETE tokens/{public_id}/, which lists and
# finds it): the rest of the pass, and the peer isolation after it, would be 401s. A signed-in pass revokes
# what it issued (tests/api/test_token_auth.py tests revocation itself).
OWN_TOKEN_SECTION = """
[[operations]]
include-name = "DELETE /api/v1/tokens/{public_id}/"
enabled = false
"""

# Fuzzing cases of the desk's writes whose valid bodies the generator seldom meets (a record's fields for
# its kind): they are what the desk's passes are for, and each pass has a handful of operations.
DESK_EXAMPLES = 40

# The desk's passes (tests/fuzz/run_schemathesis.py) act on objects made for them (tests/fuzz/live_server.py):
# a generated id names none of them, and a record or a decision needs one. Reads take any of them; the
# writes one each, fixed (the coverage phase does not draw from dictionaries): records go to the first
# review item (a finding may always be written, a follow-up answers it), the first approval is approved
# and the second denied (once decided, 409).
DESK_SECTION = """
[dictionaries.review_items]
values = {review_items}

[dictionaries.approvals]
values = {approvals}

[[operations]]
include-name = "GET /api/v1/review/items/{{item_id}}/"
parameters = {{ "path.item_id" = {{ dictionary = "review_items" }} }}

[[operations]]
include-name = "POST /api/v1/review/items/{{item_id}}/records/"
parameters = {{ "path.item_id" = {review_item} }}
generation.max-examples = {desk_examples}

[[operations]]
include-name = "GET /api/v1/approvals/{{approval_id}}/"
parameters = {{ "path.approval_id" = {{ dictionary = "approvals" }} }}

[[operations]]
include-name = "POST /api/v1/approvals/{{approval_id}}/approve/"
parameters = {{ "path.approval_id" = {approve} }}

[[operations]]
include-name = "POST /api/v1/approvals/{{approval_id}}/deny/"
parameters = {{ "path.approval_id" = {deny} }}

# A standing approval's pattern must state every argument its tool requires, and no schema can say
# which those are: the demo's send_email (to, subject, body), which secops approves; and it expires
# within 30 days from now, which a schema cannot say either (a generated date is past or too far).
[[operations]]
include-name = "POST /api/v1/standing-approvals/"
parameters = {{ "body.tool" = "send_email", "body.role" = "secops", "body.expires_at" = "{expires_at}", "body.arguments" = {{ to = {{ equals = "dana@example.com" }}, subject = {{ equals = "Hi" }}, body = {{ in = ["Hello", "Hi"] }} }} }}
generation.max-examples = {desk_examples}

# A revoked token stays listed and readable, revoked (governance/tokens_api.py): reading it after its
# DELETE is not a use after free.
[[operations]]
include-name = "GET /api/v1/tokens/{{public_id}}/"
checks.use_after_free.enabled = false
"""

# Fuzzing cases for each operation the role matrix refuses the persona with 403.
FORBIDDEN_EXAMPLES = 3
# Refused operations that check the body before they can tell who may call them: a malformed body
# meets their validation, not the refusal, so they keep every phase.
# POST standing-approvals/: the role a grant stands in for is in the body (runs/standing_api.py).
VALIDATED_FIRST = {("POST", "standing-approvals/")}

# The refusal comes before the view reads the body (or a 404, a 409 for the object in the path), so
# every case the coverage and stateful phases would add meets the same 403: as the operator, 70 of its
# 71 refused operations (4,276 of the 6,149 cases of its whole coverage phase, before this cut). A few
# fuzzing cases, negative ones among them, show the refusal holds for any input; the persona allowed
# to call the operation fuzzes it in full. Matched by a pattern: the schema may name a path's
# parameter otherwise than the URL conf does (the matrix's trust-proposals/{pk}/ is {id} in the schema).
FORBIDDEN_SECTION = """
[[operations]]
include-name-regex = {pattern}
phases.coverage.enabled = false
phases.stateful.enabled = false
generation.max-examples = {examples}
"""


def few_case_operations(forbidden: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The operations refused to the persona (the role matrix's rows) that get only a few cases."""
    return [(method, route) for method, route in forbidden if (method, route) not in VALIDATED_FIRST]


def _name_pattern(method: str, route: str) -> str:
    """A regular expression for Schemathesis' name of the operation, whatever its parameters are called."""
    path = re.sub(r"\\\{[^}]*\\\}", lambda _: r"\{[^/}]+\}", re.escape(f"/api/v1/{route}"))
    return f"^{method} {path}$"


def only_pattern(operations: list[tuple[str, str]]) -> str:
    """One regular expression for Schemathesis' names of these operations (rows as the role matrix names them)."""
    return "|".join(f"({_name_pattern(method, route)})" for method, route in operations)


def write_config(*, persona: str, peers: list[str], credentials: dict[str, dict[str, str]], tools: list[str],
                 tool_sources: list[str], few_cases: list[tuple[str, str]], max_examples: int,
                 stateful_examples: int, directory: Path, desk: dict[str, list[str]] | None = None) -> Path:
    """Write the persona's WFC auth file and Schemathesis config into `directory`; the config's path.

    `credentials`: each identity's headers. `few_cases`: the operations (method, route as the role matrix
    names them) that get only a few cases. `desk`: for a desk pass, the review items and approvals the database
    holds."""
    wfc = directory / f"auth-{persona}.json"
    names = [persona, *[peer for peer in peers if peer != persona]]
    wfc.write_text(json.dumps({"auth": [
        {"name": name, "fixedHeaders": [{"name": header, "value": value}
                                        for header, value in credentials[name].items()]}
        for name in names
    ]}))
    config = directory / f"schemathesis-{persona}.toml"
    incident_summary = (REPO / "skills" / "library" / "incident-summary" / "SKILL.md").read_text()
    new_skill = incident_summary.replace("name: incident-summary", "name: fuzz-new-skill", 1)
    config.write_text(SCHEMATHESIS_CONFIG.format(
        wfc=wfc, user=persona, peers=f"peers = {json.dumps(peers)}" if len(peers) > 1 else "",
        tools=json.dumps(tools), tool_sources=json.dumps(tool_sources), new_skill=json.dumps(new_skill),
        incident_summary=json.dumps(incident_summary), max_examples=max_examples, stateful_examples=stateful_examples)
        + (OWN_TOKEN_SECTION if "Authorization" in credentials[persona] else "")
        + (DESK_SECTION.format(
            review_items=json.dumps(desk["review_items"]), approvals=json.dumps(desk["approvals"]),
            review_item=json.dumps(desk["review_items"][0]), approve=json.dumps(desk["approvals"][0]),
            deny=json.dumps(desk["approvals"][-1]), desk_examples=DESK_EXAMPLES,
            expires_at=(datetime.now(timezone.utc) + timedelta(days=7)).isoformat()) if desk else "")
        + "".join(FORBIDDEN_SECTION.format(pattern=json.dumps(_name_pattern(method, route)),
                                           examples=FORBIDDEN_EXAMPLES) for method, route in few_cases))
    return config
