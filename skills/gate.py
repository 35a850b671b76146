"""The golden gate for a change of which skills are in force, and the ways past a failing set.

Two changes move what constrains runs: activating a skill puts its contract in force, and taking an
active skill out of force (retiring it, sending it back to draft, giving it new text, which starts
as a draft) removes that contract. Both are run through the golden sets first: with the skill active,
or on the world without it. A failing set stops the change; the emergency path past it takes two
governance admins: one asks with a stated reason (the request is bound to the text in force and,
for a removal, to what the change would leave), a different one, neither the asker nor the text's
author, confirms the same change (core.four_eyes). Nothing is in force, or out of it, until then.
The platform's own change (manage.py import_skills: no person) goes through the same gate, and past a
failing set in one step with a stated reason, the mark saying how it was given (platform_removal).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core.api_errors import Conflict, Forbidden
from core.four_eyes import check_fresh, check_second_admin, is_fresh, name
from core.permissions import is_governance_admin
from skills.models import Skill

ACTIVATE = ""  # the action an activation's request is bound to; a removal's names what it leaves
MIN_REASON_CHARS = 10

# The gate: registered by evals when it loads (it runs the golden sets, above this app).
# gate(spec=, user=, removal=) -> a verdict with passed, eval_run_id and report. Without one, a person's
# change is refused unless it states an emergency reason: the platform fails closed.
_activation_gate: list = []


class EmergencyPending(Conflict):
    code = "emergency_pending"


class NoEmergencyRequest(Conflict):
    code = "no_emergency_request"


class SkillGateFailed(Conflict):
    """The golden set does not pass with the change: the details carry the cases that changed."""

    code = "gate_failed"


def register_activation_gate(gate) -> None:
    _activation_gate[:] = [gate]


def run_gate(*, spec: dict, user, removal: bool = False):
    """The gate's verdict on `spec` made active, or (removal) on the world without it (None: no gate)."""
    if not _activation_gate:
        return None
    return _activation_gate[0](spec=spec, user=user, **({"removal": True} if removal else {}))


def removal_action(*, to: str, new_sha256: str | None) -> str:
    """What a removal's emergency request is bound to besides the text in force: the status the change
    leaves the skill in and, when it gives new text, that text's sha256."""
    return to if new_sha256 is None else f"{to} {new_sha256}"


def describe(action: str) -> dict:
    """A request's action as the API shows it."""
    if action == ACTIVATE:
        return {"change": "activate", "to": Skill.Status.ACTIVE, "new_sha256": None}
    to, _, new = action.partition(" ")
    return {"change": "take_out_of_force", "to": to, "new_sha256": new or None}


def gate_failed(skill_name: str, verdict, *, removal: bool = False) -> SkillGateFailed:
    report = verdict.report if verdict else {"error": "no gate is registered (the evals app is not installed)"}
    details = {"eval_run": verdict.eval_run_id if verdict else None, "report": report}
    emergency = (f"ask for an emergency {'removal' if removal else 'activation'} with a stated reason "
                 f"(emergency_reason, at least {MIN_REASON_CHARS} characters) that another governance admin "
                 f"confirms (confirm_emergency, with the same change).")
    if removal:
        return SkillGateFailed(
            f"the golden set does not pass without skill {skill_name!r} in force (its contract constrains the "
            f"cases); it stays active. Keep it, or {emergency}", details=details | {"removal": True})
    return SkillGateFailed(f"the golden set does not pass with skill {skill_name!r} active; it is not activated. "
                           f"Fix the skill, or {emergency}", details=details)


@transaction.atomic
def ask_emergency(*, skill: Skill, reason: str, user, action: str) -> Skill:
    """Record one governance admin's request to make the change `action` names past a failing set.
    Nothing changes in force: another governance admin confirms it (confirm_asked)."""
    skill = Skill.objects.select_for_update(of=("self",)).select_related("emergency_requested_by").get(pk=skill.pk)
    if is_fresh(skill.emergency_requested_at) and skill.emergency_request_sha256 == skill.sha256:
        # The reason another admin is about to confirm is not rewritten under them.
        raise EmergencyPending(
            f"an emergency change of skill {skill.name!r} was already asked for by "
            f"{name(skill.emergency_requested_by)}; another governance admin confirms it (confirm_emergency)",
            details={"skill": skill.name, "emergency_requested_by": name(skill.emergency_requested_by)}
            | describe(skill.emergency_request_action))
    skill.emergency_request_reason, skill.emergency_request_sha256 = reason, skill.sha256
    skill.emergency_request_action = action
    skill.emergency_requested_by, skill.emergency_requested_at = user, timezone.now()
    skill.save(update_fields=["emergency_request_reason", "emergency_request_sha256", "emergency_request_action",
                              "emergency_requested_by", "emergency_requested_at", "updated_at"])
    return skill


def confirm_asked(*, skill: Skill, user, action: str, verdict_of) -> tuple[str | None, str]:
    """A second governance admin, neither the one who asked nor the text's author, confirms the
    emergency asked for on this very change: (the eval run id, the mark naming both). The gate still
    runs, so the record says what it would have refused."""
    what = "an emergency activation" if action == ACTIVATE else "an emergency removal"
    details = {"skill": skill.name}
    if (skill.emergency_requested_at is None or skill.emergency_request_sha256 != skill.sha256
            or skill.emergency_request_action != action):
        raise NoEmergencyRequest(f"no {what[3:]} of skill {skill.name!r} (this text, this change) was asked for: "
                                 f"ask with a stated reason (emergency_reason)", details=details | describe(action))
    asked_by = skill.emergency_requested_by
    details["emergency_requested_by"] = name(asked_by)
    check_fresh(skill.emergency_requested_at, what=f"{what[3:]} of skill {skill.name!r}", details=details)
    check_second_admin(user, what=what, parties=[(asked_by, "asked for it"), (skill.author, "wrote the text")],
                       details=details | {"author": name(skill.author)})
    verdict = verdict_of()
    mark = f"{skill.emergency_request_reason} (asked by {name(asked_by)}, confirmed by {name(user)})"
    return (verdict.eval_run_id if verdict else None), mark


def through_gate(*, skill: Skill, user, action: str, verdict_of, failed, emergency_reason: str = "",
                 confirm_emergency: bool = False):
    """A person's change of what is in force through the gate: ((eval run id, mark), who asked) to make
    it, or None when the set failed and an emergency was asked for instead (recorded; nothing made).
    `verdict_of()` runs the gate; `failed(verdict)` is the refusal when it fails and no reason is given."""
    if confirm_emergency:
        return confirm_asked(skill=skill, user=user, action=action, verdict_of=verdict_of), skill.emergency_requested_by
    verdict = verdict_of()
    if verdict is not None and verdict.passed:
        return (verdict.eval_run_id, ""), None
    reason = (emergency_reason or "").strip()
    if len(reason) < MIN_REASON_CHARS:
        raise failed(verdict)
    if not is_governance_admin(user):
        raise Forbidden("only a governance admin may ask for an emergency change of a skill",
                        details={"skill": skill.name})
    ask_emergency(skill=skill, reason=reason, user=user, action=action)
    return None


def platform_removal(*, skill: Skill, reason: str = "", via: str) -> tuple[str | None, str]:
    """The platform's change that takes `skill`'s version in force out of force (import_skills' new text):
    (the eval run id, the mark) for its history row. The gate runs on the world without the version; past
    a failing set only with a stated reason, in one step, as the platform's emergency for a policy draft
    (governance.drafts.draft_activate_emergency): no person asks, so none confirms. The mark is the reason
    and `via`, how it was given (the command, the OS user). SkillGateFailed (details: the eval run and its
    report) otherwise, and nothing changes."""
    verdict = run_gate(spec=skill.spec(), user=None, removal=True)
    if verdict is not None and verdict.passed:
        return verdict.eval_run_id, ""
    reason = (reason or "").strip()
    if len(reason) < MIN_REASON_CHARS:
        raise gate_failed(skill.name, verdict, removal=True)
    return (verdict.eval_run_id if verdict else None), f"{reason} ({via})"
