"""Which sealed runs a compliance reviewer looks at, decided when the receipt is sealed.

Every enabled rule for the run's agent (or for every agent) is evaluated on the facts the
receipt sealed and the run's row, in the run's final transaction: each trigger the rule names
that the run meets is a reason, and so is the percentage's draw, sha256(seed ":" run id) read as a
number in [0, 1): the same run and rule always draw the same, so anyone holding the rules can
check that nothing sampled was left out and nothing was added. A sampled run gets one ReviewItem
with every reason (rule, trigger, detail). One query reads the rules, kept under the governance stamp.
"""

import hashlib
import json
import logging
from decimal import Decimal

from django.db import DatabaseError, transaction
from django.db.models import Q

from core import stamp as governance_stamp
from review.models import ReviewItem, SamplingRule, Trigger
from runs.model_answer import model_answer
from runs.states import ErrorCode, RunStatus, StopReason

logger = logging.getLogger(__name__)
_SPAN = 2**64
REFUSED_CODES = frozenset({"not_permitted", "unknown_tool", "invalid_arguments", "denied", "expired",
                           "approval_limit"})


def draw(seed: str, run_id: str) -> int:
    """The run's draw for a rule: the first 64 bits of sha256(seed ":" run id)."""
    return int(hashlib.sha256(f"{seed}:{run_id}".encode()).hexdigest()[:16], 16)


def drawn(seed: str, run_id: str, percentage) -> bool:
    """draw / 2**64 < percentage / 100, in integers (no float decides a sample)."""
    hundredths = int((Decimal(str(percentage)) * 100).to_integral_value())
    return draw(seed, run_id) * 10_000 < hundredths * _SPAN


def facts(run, body: dict) -> dict[str, str]:
    """Trigger -> what the run showed of it, for every trigger the run meets (the tool trigger aside)."""
    found: dict[str, str] = {}
    approvals = body.get("approvals") or []
    denied = [a["tool"] or "budget" for a in approvals if a.get("decision") == "denied"]
    expired = [a["tool"] or "budget" for a in approvals if a.get("decision") == "expired"]
    if denied:
        found[Trigger.DENIAL] = "denied: " + ", ".join(denied)
    if expired:
        found[Trigger.EXPIRY] = "expired: " + ", ".join(expired)
    refused = [c["name"] for c in body.get("tool_calls") or [] if c.get("code") in REFUSED_CODES]
    if run.refused_count or refused:
        kinds = ", ".join(run.refused_kinds or []) or ", ".join(refused)
        found[Trigger.REFUSAL] = f"{max(run.refused_count, len(refused))} refused ({kinds})"
    if body.get("tainted"):
        found[Trigger.TAINT] = run.taint_reason or "tainted"
    answer = model_answer(run)
    if answer["fell_back"]:
        found[Trigger.FALLBACK] = (f"{answer['fallback_calls']} call(s) answered by "
                                   f"{', '.join(answer['fallback_profiles'])}, not {answer['requested_profile']}")
    if body.get("error") == ErrorCode.POLICY_ERROR:
        found[Trigger.POLICY_ERROR] = run.error_message or "policy_error"
    if body.get("status") == RunStatus.STOPPED and body.get("stop_reason") in StopReason.__members__.values():
        found[Trigger.BUDGET_STOP] = f"stopped: {body['stop_reason']}"
    if body.get("status") == RunStatus.BLOCKED:
        found[Trigger.BLOCKED] = "blocked"
    if body.get("status") == RunStatus.FAILED:
        found[Trigger.FAILED] = f"failed: {body.get('error') or 'error'}"
    return found


def reasons_for(run, body: dict, rules) -> list[dict]:
    """Why each rule samples this run ([] when none does). Pure: the rules are given."""
    run_id = str(run.id)
    met = facts(run, body)
    called = {c.get("name") for c in body.get("tool_calls") or []}
    reasons = []
    for rule in rules:
        base = {"rule": rule.name, "rule_id": rule.pk}
        for trigger in rule.always:
            if trigger == Trigger.TOOL:
                hit = sorted(called & set(rule.tools))
                if hit:
                    reasons.append(base | {"reason": "tool", "detail": "called " + ", ".join(hit)})
            elif trigger in met:
                reasons.append(base | {"reason": trigger, "detail": met[trigger]})
        if rule.percentage and drawn(rule.seed, run_id, rule.percentage):
            value = draw(rule.seed, run_id) / _SPAN
            reasons.append(base | {"reason": "percentage",
                                   "detail": f"draw {value:.6f} < {Decimal(rule.percentage) / 100:.4f}"})
    return reasons


# The enabled rules for an agent, kept while the governance stamp holds (a write to the rules moves
# it: core.stamp), as the frozen governance is: a seal reads the stamp, not the rules, most times.
_RULES = governance_stamp.Kept(limit=1_000)


def rules_for(run) -> list[SamplingRule]:
    return _RULES.get_or_load(run.agent_id, lambda: list(
        SamplingRule.objects.filter(Q(agent__isnull=True) | Q(agent_id=run.agent_id), enabled=True)
        .order_by("name", "id")))


def sample_sealed(*, run, receipt, body: dict, **_) -> ReviewItem | None:
    """The receipt_sealed receiver: evaluate the rules and write the run's ReviewItem if any samples it.

    A run no rule samples costs one statement (the rules), made before the receipt chain's lock is
    taken (runs.receipts sends the hook first). The item is written in a savepoint of the run's
    final transaction, before its receipt is inserted (the foreign key is checked at the commit): a failure there is logged and never keeps the run from ending, and
    `manage.py review_check` finds the run missing from the queue (review.completeness)."""
    try:
        reasons = reasons_for(run, body, rules_for(run))
    except (KeyError, TypeError, ValueError):
        logger.exception("sampling run %s for review failed; the run ended regardless", run.id)
        return None
    if not reasons:
        return None
    try:
        with transaction.atomic():
            return ReviewItem.objects.create(run=run, receipt=receipt, reasons=reasons)
    except DatabaseError:
        logger.exception("writing the review item of run %s failed; the run ended regardless", run.id)
        return None


def resample(run) -> ReviewItem | None:
    """Evaluate today's rules on an already sealed run that has no review item (a failed hook, or
    a rule added afterwards that an auditor wants applied to past runs)."""
    receipt = run.receipt
    if ReviewItem.objects.filter(run=run).exists():
        return None
    return sample_sealed(run=run, receipt=receipt, body=json.loads(receipt.body))
