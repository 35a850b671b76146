"""Policy drafts: a change of a policy is proposed, checked against the golden sets of the agents it
governs, and only then put in force.

An edit (a new policy, a change, a deletion) is saved as a PolicyDraft holding every value the
policy would have. Activating it runs the gate: the golden set of every agent the policy governs,
before and after, with the draft in place of the policy (evals.gating). It is put in force only
when the set passes at the threshold, through the same services as any policy write, so the
PolicyVersion history and the governance stamp are written as ever; that history row names the
draft and the gate's eval run. A failed gate leaves the policy as it was and the draft with the
report: each case that changed, before and after.

The emergency path puts a draft in force without a passing set. It takes two governance admins:
one asks for it with a stated reason (draft_request_emergency), a different one, neither the one
who asked nor the draft's author, confirms it (draft_confirm_emergency), so no one person can lift
the gate alone. Only the platform (user None: load_demo, bootstrap) activates in one step
(draft_activate_emergency). Who asked and who confirmed are recorded on the draft and in the
history row, and both are named in the policy's mark (Policy.emergency_reason), which runs freeze
with it, so the receipt of every run it governs says so. The next activation that passes its gate
clears the mark.

The gate is run by the evals app, which sits above this one (it runs the harness): evals registers
it here when it loads (register_gate). Without a registered gate nothing activates but through the
emergency path: the platform fails closed.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.db import transaction
from django.utils import timezone

from core import stamp as governance_stamp
from core.api_errors import Conflict, DomainError, Forbidden
from core.four_eyes import check_fresh, check_second_admin, is_fresh, name as _name
from core.permissions import is_governance_admin
from governance import services
from governance.engine import PolicySpec
from governance.models import Policy, PolicyDraft, PolicyVersion
from governance.selectors import policy_spec, policy_values

S = PolicyDraft.State
OPEN = (S.DRAFT, S.GATE_FAILED, S.GATE_PASSED)
MIN_REASON_CHARS = 10


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    eval_run_id: str | None
    report: dict = field(default_factory=dict)


class GateFailed(Conflict):
    """The golden set does not pass with the draft in place: the details carry the cases that changed."""

    code = "gate_failed"


class DraftClosed(Conflict):
    code = "draft_closed"


class InvalidDraft(DomainError):
    code = "invalid"


class EmergencyPending(Conflict):
    code = "emergency_pending"


class NoEmergencyRequest(Conflict):
    code = "no_emergency_request"


Gate = Callable[..., GateVerdict]
_gate: list[Gate] = []


def register_gate(gate: Gate) -> None:
    """Called by evals when it loads: gate(policy=, proposed=, user=, purpose=) -> GateVerdict."""
    _gate[:] = [gate]


def run_gate(*, policy: Policy | None, proposed: PolicySpec | None, user=None, purpose: str = "gate") -> GateVerdict:
    """The golden sets of the agents `policy` (as in force) and `proposed` govern, with `proposed`
    in place of `policy` (None: the policy deleted). Also the Policy Lab's trial of an unsaved draft."""
    if not _gate:
        return GateVerdict(passed=False, eval_run_id=None,
                           report={"error": "no gate is registered (the evals app is not installed)"})
    return _gate[0](policy=policy, proposed=proposed, user=user, purpose=purpose)


def _checked(policy: Policy | None, values: dict) -> dict:
    """Every value the policy would have with `values` applied, validated as a save would be; raises
    ValidationError as the services do. Nothing is written."""
    candidate = Policy.objects.get(pk=policy.pk) if policy is not None else Policy(name=values.get("name", ""))
    agents = services._apply(candidate, values)
    services._validate(candidate, agents)
    candidate.full_clean(exclude=["agents"])
    checked = policy_values(candidate)
    if agents is not None:
        checked["agents"] = sorted(a.slug for a in agents)
    return checked


def draft_propose(*, policy: Policy | None = None, values: dict | None = None, delete: bool = False,
                  user=None) -> PolicyDraft:
    """Save a proposed change as a draft (validated now, in force only once activated)."""
    if delete:
        if policy is None:
            raise InvalidDraft("a deletion needs the policy it deletes")
        return PolicyDraft.objects.create(policy=policy, policy_name=policy.name, action=PolicyVersion.Action.DELETE,
                                          base_version=policy.version, values=None, created_by=user)
    checked = _checked(policy, values or {})
    return PolicyDraft.objects.create(
        policy=policy, policy_name=checked["name"],
        action=PolicyVersion.Action.UPDATE if policy is not None else PolicyVersion.Action.CREATE,
        base_version=policy.version if policy is not None else None, values=checked, created_by=user)


def proposed_spec(*, policy: Policy | None, values: dict | None) -> PolicySpec | None:
    """The engine's view of the policy as the draft would leave it (None for a deletion). A policy not
    created yet has id 0, which no row has."""
    if values is None:
        return None
    candidate = Policy(name=values["name"])
    services._apply(candidate, {k: v for k, v in values.items() if k != "agents"})
    spec = policy_spec(candidate, agent_slugs=list(values.get("agents") or []))
    return replace(spec, id=policy.pk if policy is not None else 0,
                   version=policy.version + 1 if policy is not None else 1)


def draft_trial(*, policy: Policy | None, values: dict, delete: bool = False, user=None) -> GateVerdict:
    """The Policy Lab: the gate of a draft not saved (validated as a save would be); changes nothing."""
    proposed = None if delete else proposed_spec(policy=policy, values=_checked(policy, values))
    return run_gate(policy=policy, proposed=proposed, user=user, purpose="lab")


def draft_gate(*, draft: PolicyDraft, user=None) -> PolicyDraft:
    """Run the draft's gate and record its verdict on the draft; activates nothing."""
    _check_open(draft)
    verdict = run_gate(policy=draft.policy, proposed=proposed_spec(policy=draft.policy, values=draft.values),
                       user=user)
    _record(draft, verdict)
    return draft


def draft_activate(*, draft: PolicyDraft, user=None) -> Policy | None:
    """Put the draft in force when its gate passes now (it is run again: other policies may have
    changed since it was last run). Returns the policy (None for a deletion); raises GateFailed with
    the report when the gate refuses it."""
    _check_open(draft)
    stamp = governance_stamp.current()
    verdict = run_gate(policy=draft.policy, proposed=proposed_spec(policy=draft.policy, values=draft.values),
                       user=user)
    _record(draft, verdict)
    if not verdict.passed:
        raise GateFailed(
            f"the golden set does not pass with this draft in place ({_rate(verdict.report)}); the policy is "
            f"unchanged. Fix the draft, or ask for an emergency activation with a stated reason (another "
            f"governance admin confirms it).",
            details={"draft": draft.pk, "eval_run": verdict.eval_run_id, "report": verdict.report})
    return _apply(draft, verdict=verdict, user=user, emergency_reason="", stamp=stamp)


def _stated(reason: str) -> str:
    reason = (reason or "").strip()
    if len(reason) < MIN_REASON_CHARS:
        raise InvalidDraft(f"an emergency activation needs a stated reason (at least {MIN_REASON_CHARS} characters)",
                           details={"emergency_reason": ["state why this cannot wait for a passing golden set"]})
    return reason


@transaction.atomic
def draft_request_emergency(*, draft: PolicyDraft, reason: str, user) -> PolicyDraft:
    """A governance admin asks for the draft to be put in force without a passing golden set, for a
    stated reason. Nothing is in force yet: another governance admin confirms it."""
    reason = _stated(reason)
    if not is_governance_admin(user):
        raise Forbidden("only a governance admin may ask for an emergency activation", details={"draft": draft.pk})
    draft = PolicyDraft.objects.select_for_update(of=("self",)).select_related("emergency_requested_by").get(pk=draft.pk)
    _check_open(draft)
    if is_fresh(draft.emergency_requested_at):
        # The reason another admin is about to confirm is not rewritten under them.
        raise EmergencyPending(
            f"an emergency activation of draft {draft.pk} was already asked for by {_name(draft.emergency_requested_by)}; "
            f"another governance admin confirms it (confirm_emergency)",
            details={"draft": draft.pk, "emergency_requested_by": _name(draft.emergency_requested_by)})
    draft.emergency_reason, draft.emergency_requested_by, draft.emergency_requested_at = reason, user, timezone.now()
    draft.save(update_fields=["emergency_reason", "emergency_requested_by", "emergency_requested_at"])
    return draft


def draft_confirm_emergency(*, draft: PolicyDraft, user) -> Policy | None:
    """A second governance admin confirms the emergency asked for on the draft: in force whatever the
    golden set says, with the asked reason. Refused to the one who asked and to the draft's author.
    The gate is still run, so the record says what it would have refused."""
    _check_open(draft)
    _check_confirmer(draft, user)
    verdict = run_gate(policy=draft.policy, proposed=proposed_spec(policy=draft.policy, values=draft.values),
                       user=user)
    _record(draft, verdict)
    return _apply(draft, verdict=verdict, user=user, emergency_reason=draft.emergency_reason, stamp=None)


def draft_activate_emergency(*, draft: PolicyDraft, reason: str) -> Policy | None:
    """The platform's emergency path (load_demo, bootstrap: no person acts, so there is none to
    confirm): in force in one step, the reason recorded."""
    reason = _stated(reason)
    _check_open(draft)
    verdict = run_gate(policy=draft.policy, proposed=proposed_spec(policy=draft.policy, values=draft.values))
    _record(draft, verdict)
    return _apply(draft, verdict=verdict, user=None, emergency_reason=reason, stamp=None)


def _check_confirmer(draft: PolicyDraft, user) -> None:
    if draft.emergency_requested_at is None:
        raise NoEmergencyRequest(
            f"no emergency activation of draft {draft.pk} was asked for: ask with a stated reason (emergency_reason)",
            details={"draft": draft.pk})
    asked_by = draft.emergency_requested_by
    check_fresh(draft.emergency_requested_at, what=f"the emergency activation of draft {draft.pk}",
                details={"draft": draft.pk, "emergency_requested_by": _name(asked_by)})
    check_second_admin(user, what="an emergency activation",
                       parties=[(asked_by, "asked for it"), (draft.created_by, "made the draft")],
                       details={"draft": draft.pk, "emergency_requested_by": _name(asked_by),
                                "created_by": _name(draft.created_by)})


def draft_discard(*, draft: PolicyDraft, user=None) -> PolicyDraft:
    _check_open(draft)
    PolicyDraft.objects.filter(pk=draft.pk).update(state=S.DISCARDED)
    draft.state = S.DISCARDED
    return draft


def _check_open(draft: PolicyDraft) -> None:
    if draft.state not in OPEN:
        raise DraftClosed(f"draft {draft.pk} is {draft.state}: only an open draft may be checked or activated",
                          details={"draft": draft.pk, "state": draft.state})
    if draft.action != PolicyVersion.Action.CREATE:
        current = Policy.objects.filter(pk=draft.policy_id).values_list("version", flat=True).first()
        if current != draft.base_version:
            PolicyDraft.objects.filter(pk=draft.pk).update(state=S.STALE)
            draft.state = S.STALE
            raise DraftClosed(
                f"the policy changed since draft {draft.pk} was made (version {draft.base_version}, now "
                f"{current if current is not None else 'deleted'}): make a new draft from the policy in force",
                details={"draft": draft.pk, "state": S.STALE})


def _record(draft: PolicyDraft, verdict: GateVerdict) -> None:
    draft.state = S.GATE_PASSED if verdict.passed else S.GATE_FAILED
    draft.gate_eval_run_id, draft.gate_report = verdict.eval_run_id, verdict.report
    PolicyDraft.objects.filter(pk=draft.pk, state__in=OPEN).update(
        state=draft.state, gate_eval_run_id=draft.gate_eval_run_id, gate_report=draft.gate_report)


def _rate(report: dict) -> str:
    if "passed" in report and report.get("total"):
        return f"{report['passed']}/{report['total']} cases pass, threshold {report.get('threshold', 1.0):g}"
    return report.get("error", "no verdict")


@transaction.atomic
def _apply(draft: PolicyDraft, *, verdict: GateVerdict, user, emergency_reason: str, stamp: str | None) -> Policy | None:
    draft = PolicyDraft.objects.select_for_update(of=("self",)).select_related("created_by", "emergency_requested_by").get(
        pk=draft.pk)
    _check_open(draft)
    # An emergency by a person is a confirmation: checked again under the row's lock, with what was asked.
    confirmed = bool(emergency_reason) and user is not None
    if confirmed:
        _check_confirmer(draft, user)
        emergency_reason = draft.emergency_reason
    if stamp is not None and governance_stamp.current() != stamp:
        # What the gate ran against is no longer what is in force: its verdict proves nothing now.
        raise Conflict("governance changed while the golden set ran; activate the draft again",
                       details={"draft": draft.pk})
    values = dict(draft.values or {})
    last_version = PolicyVersion.objects.order_by("-id").values_list("id", flat=True).first() or 0
    if draft.action == PolicyVersion.Action.DELETE:
        services.policy_delete(policy=draft.policy, user=user)
        policy = None
    elif draft.action == PolicyVersion.Action.CREATE:
        policy = services.policy_create(values=values, user=user)
    else:
        policy = services.policy_update(policy=draft.policy, values=values, user=user)
    if policy is not None:
        # A gated activation clears an earlier emergency's mark; an emergency sets it, naming the two
        # admins, since runs freeze the mark and their receipts carry it.
        mark = emergency_reason and (
            f"{emergency_reason} (asked by {_name(draft.emergency_requested_by)}, confirmed by {_name(user)})"
            if confirmed else emergency_reason)
        Policy.objects.filter(pk=policy.pk).update(emergency_reason=mark)
        policy.emergency_reason = mark
    # The history row this activation wrote, if it changed anything (an edit to the values in force writes none).
    PolicyVersion.objects.filter(id__gt=last_version, policy_name=draft.policy_name).update(
        draft=draft, eval_run_id=verdict.eval_run_id, emergency_reason=emergency_reason,
        emergency_requested_by=draft.emergency_requested_by if confirmed else None)
    draft.state = S.EMERGENCY if emergency_reason else S.ACTIVE
    draft.emergency_reason, draft.activated_by, draft.activated_at = emergency_reason, user, timezone.now()
    draft.policy = policy  # none after a deletion (the row is gone; the draft keeps its name)
    draft.save(update_fields=["state", "emergency_reason", "activated_by", "activated_at", "policy"])
    return policy


def emergency_marks(snapshot: dict, skills_used=()) -> list[dict]:
    """What a run froze in force without a passing golden set (its policies; the skills it used): its
    receipt names each, with why."""
    marks = [{"policy": p["name"], "id": p["id"], "version": p["version"], "reason": p["emergency"]}
             for p in snapshot.get("policies", []) if p.get("emergency")]
    return marks + [{"skill": s["name"], "version": s["version"], "reason": s["emergency"]}
                    for s in snapshot.get("skills", []) if s.get("emergency") and s["name"] in skills_used]


def propose_and_activate(*, policy: Policy | None = None, values: dict | None = None, delete: bool = False,
                         user=None) -> tuple[PolicyDraft, Policy | None]:
    """What a direct write of the API does now: the edit as a draft, activated when its gate passes.
    Raises GateFailed (the draft is kept, with its report) when it does not."""
    draft = draft_propose(policy=policy, values=values, delete=delete, user=user)
    return draft, draft_activate(draft=draft, user=user)
