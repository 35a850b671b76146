"""Which model answered a run, and whether a fallback did: read from the run's own records.

Each model call's record in the run's state (the receipt's `model_calls`) names the profile that
answered it, with its backend and the model the server reported. The profile the run asked for is
the one its agent version froze (the run's snapshot). A run fell back when a call was answered by
another profile than that one; the run's API answer and the workbench's run list say so, as the
trace and the receipt always did.
"""

from runs.models import Run


def requested_profile(run: Run) -> str:
    return ((run.snapshot or {}).get("agent") or {}).get("model_profile", {}).get("name", "")


def _answered(calls: list[dict]) -> list[dict]:
    # A call no profile answered ("unavailable") has no backend: nothing answered it.
    return [c for c in calls if isinstance(c, dict) and c.get("backend")]


def model_answer(run: Run) -> dict:
    """What the run's API answer says of its model: the profile it asked for; the profile, backend
    and model of its last answered call (None before any); whether, in how many calls and with which
    profiles it fell back."""
    requested = requested_profile(run)
    calls = _answered((run.state or {}).get("model_calls") or [])
    fallbacks = [c for c in calls if requested and c.get("profile") != requested]
    last = calls[-1] if calls else None
    answered_by = {"profile": last.get("profile") or "", "backend": last["backend"],
                   "model": last.get("actual_model") or last.get("requested_model") or ""} if last else None
    return {"requested_profile": requested, "answered_by": answered_by, "fell_back": bool(fallbacks),
            "fallback_calls": len(fallbacks),
            "fallback_profiles": list(dict.fromkeys(c.get("profile") or "" for c in fallbacks))}


def label(run: Run) -> str:
    """The workbench's words: the profile that answered, and a fallback said out loud."""
    answer = model_answer(run)
    if answer["answered_by"] is None:
        return "-"
    if not answer["fell_back"]:
        return answer["answered_by"]["profile"]
    calls = answer["fallback_calls"]
    return (f"FELL BACK to {', '.join(answer['fallback_profiles'])} ({calls} call{'s' if calls != 1 else ''}; "
            f"asked {answer['requested_profile']})")
