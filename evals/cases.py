"""Changes of golden cases: each one a version (who, when, and every value after it), and the
recording of a case against the live data.

A golden case is part of what every policy and skill change is checked against, so a change of it
is kept as a change of governance is: GoldenCaseVersion, one row per change (made, edited,
recorded, deleted), with the case's values after it. The API, the workbench and the demo loader
write cases through here. A person's change that could loosen the gate (an edit, a deletion, a
recording) is first a proposal (evals.proposals) and reaches here only when a second governance
admin approves it: its version names both (changed_by the approver, proposed_by the proposer).

Recording runs the case once with every read-only tool answering live (evals.sandbox), under the
policies and skills in force, and keeps what each tool answered as the case's recordings, from
then on the data the case runs against. It is refused, and nothing is kept, when the case does not
pass against the live data (a recording must not turn a green case red: the gate would then refuse
every change), when the case has no snapshot, or when a read cannot be kept (evals.recordings.kept).
"""

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.api_errors import Conflict
from core.proposals import person
from evals.expectations import failures
from evals.models import GoldenCase, GoldenCaseVersion
from evals.recordings import kept
from evals.runner import evaluate

A = GoldenCaseVersion.Action
VALUES = ("description", "input", "roles", "decision", "expected_status", "awaiting_tool", "stop_reason", "error",
          "tools_called", "tools_not_called", "output_contains", "output_excludes", "policies_fired", "enabled",
          "recordings")


class RecordingRefused(Conflict):
    code = "recording_refused"


def case_values(case: GoldenCase) -> dict:
    recorded_by = case.recorded_by.username if case.recorded_by_id else None
    return {"agent": case.agent.slug, "name": case.name, **{f: getattr(case, f) for f in VALUES},
            "recorded_at": case.recorded_at.isoformat() if case.recorded_at else None, "recorded_by": recorded_by}


def versioned(case: GoldenCase, *, action: str, user=None, note: str = "", proposed_by=None) -> GoldenCaseVersion:
    """Write the version of a change just saved (a change after the first raises the case's version)."""
    if action not in (A.CREATE, A.DELETE):
        GoldenCase.objects.filter(pk=case.pk).update(version=F("version") + 1)
        case.refresh_from_db(fields=["version"])
    return GoldenCaseVersion.objects.create(
        case=case if action != A.DELETE else None, agent_slug=case.agent.slug, case_name=case.name,
        version=case.version, action=action, values=case_values(case), note=note[:300], changed_by=person(user),
        proposed_by=person(proposed_by))


def case_changed(case: GoldenCase, before: dict | None, *, user=None, proposed_by=None) -> GoldenCaseVersion | None:
    """After a save through the API or the workbench: a version, when a value changed (`before`: the
    case's values before the save, None for a new case)."""
    if before is None:
        return versioned(case, action=A.CREATE, user=user)
    if case_values(case) == before:
        return None
    return versioned(case, action=A.UPDATE, user=user, proposed_by=proposed_by)


def case_delete(case: GoldenCase, *, user=None, proposed_by=None, note: str = "") -> None:
    with transaction.atomic():
        versioned(case, action=A.DELETE, user=user, proposed_by=proposed_by, note=note)
        case.delete()


def recording_of(case: GoldenCase) -> list[dict]:
    """Run `case` against the live data: what its read-only tools answered, to keep as its recordings.
    Raises RecordingRefused saying why nothing may be kept. Writes nothing."""
    expected, actual, outcome, _ = evaluate(case, record=True)
    details = {"case": case.pk, "name": case.name}
    if outcome is None:
        raise RecordingRefused(f"{case.name}: {actual['message']}", details=details)
    recordings, refused = kept(outcome.reads)
    if refused:
        raise RecordingRefused(f"{case.name}: {len(refused)} read-only call(s) cannot be recorded; nothing was kept",
                               details=details | {"refused": refused})
    if found := failures(expected, actual):
        raise RecordingRefused(
            f"{case.name} does not pass against the live data, so its recording would fail it; nothing was kept "
            "(change the case's expectations first, if the data changed for good)",
            details=details | {"failures": found})
    return recordings


def keep_recording(case: GoldenCase, recordings: list[dict], *, version: int, user=None, via: str = "",
                   proposed_by=None, recorded_by=None) -> GoldenCase:
    """Make `recordings` the case's, if it is still at `version`; a new version."""
    with transaction.atomic():
        locked = GoldenCase.objects.select_for_update().select_related("agent").get(pk=case.pk)
        if locked.version != version:
            raise Conflict(f"{case.name} changed while it was recorded; record it again",
                           details={"case": case.pk, "name": case.name})
        before = len(locked.recordings)
        locked.recordings, locked.recorded_at = recordings, timezone.now()
        locked.recorded_by = person(recorded_by if recorded_by is not None else user)
        locked.save(update_fields=["recordings", "recorded_at", "recorded_by", "updated_at"])
        versioned(locked, action=A.RECORD, user=user, proposed_by=proposed_by,
                  note=f"{len(recordings)} read-only call(s) recorded against the live data (had {before})"
                       + (f", by {via}" if via else ""))
    return locked


def record_case(case: GoldenCase, *, user=None, via: str = "") -> GoldenCase:
    """The platform's recording of `case` (no person: load_demo, a shell), kept at once; a person's
    goes through evals.proposals.propose_record. Raises RecordingRefused saying why nothing was kept."""
    if person(user) is not None:
        raise Conflict("a person's recording is a proposal: evals.proposals.propose_record")
    return keep_recording(case, recording_of(case), version=case.version, via=via)

