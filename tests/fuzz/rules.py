"""What the fuzz's hooks may drop: refusals of schema-valid data that no schema can state.

Pure data and one pure function, shared by the hooks (tests/fuzz/hooks.py, which run inside
Schemathesis) and readable on their own: each rule names the service that enforces it.
"""

from __future__ import annotations

import re

# Where the hooks log each failure they drop, and why (one JSON line each); the runner sets it per pass.
DROPS_ENV = "WARRANT_FUZZ_DROPS"

# Refusals of schema-valid data that depend on other stored objects or on rules across fields:
# field of the error details -> what every message for it must look like. A positive_data_acceptance
# failure (ST202) whose 400 names only these is dropped by the `filter_failure` hook, and
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
    # The name is quoted as Python's repr quotes it: in double quotes when it holds a single quote.
    "service_account": r"""^('.*'|".*") is not a service account$""",
    # governance.drafts: a deletion names its policy and carries no values; an emergency states its reason.
    "delete": r"^a deletion names the policy it deletes$",
    "values": r"^(a deletion carries no values|the values the policy would have)$",
    "emergency_reason": r"^state why this cannot wait for a passing golden set$",
    # A second governance admin confirms the emergency another asked for, with no reason of their own
    # (governance.drafts_api for a policy draft, skills.api for a skill's emergency activation).
    "confirm_emergency": r"^(confirm the reason asked for, or ask with a reason; not both"
                         r"|one governance admin asks \(emergency_reason\) and another confirms: not both at once)$",
    # governance.engine.validate: what each policy type needs besides its own fields.
    "non_field_errors": r"^(an? [a-z_ ]+ needs |an output formatter's content must contain \{answer\}$|invalid regex: "
                        # governance.engine.approval_routing_problems: quorum and escalation together.
                        r"|escalation needs both |escalate_to_role must differ |escalate_after_seconds \(\d+\) must be "
                        r"less than )",
}
# Rules whose message may stand under any field: an evidence bundle is chosen by its period alone
# (runs/receipts_api.py), whichever other filter of the export the schema offers is sent with it.
ANY_FIELD_RULE = r"^A bundle holds every receipt of its period: "


def only_business_rules(details) -> bool:
    """Whether a 400's error details name only the rules above, every message of every field."""
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


# A review record's fields depend on its kind (review.records._validate), which a schema cannot say, so a
# generated record almost never has the ones its kind needs. The desk's pass makes each positive case obey
# them before it is sent (tests/fuzz/hooks.py, map_case), keeping what was generated where it fits: a
# finding has a severity and a note, a follow-up a note and no severity, and only a follow-up follows a
# record (the latest when none is named) or resolves one.
REVIEW_RECORDS = "/api/v1/review/items/{item_id}/records/"


def fit_review_record(body: dict) -> dict:
    """`body` (a positive case's, generated from the schema) made to obey the rules across its fields."""
    kind = body.get("record_kind")
    if kind == "finding":
        body.setdefault("severity", "low")
    else:
        body.pop("severity", None)
    if kind != "sign_off" and not str(body.get("note", "")).strip():
        body["note"] = f"Seen by the fuzz.{body.get('note', '')}"
    if kind != "follow_up":
        body.pop("follows", None)
        body.pop("resolves", None)
    else:
        body.pop("follows", None)  # a generated id names no record of this review; the latest is followed
    return body
