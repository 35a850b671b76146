"""Who decides a request and how many of them: the quorum and escalation a request is created with.

Read from the park (governance.gate.NeedsApproval, from the asking policy as the run froze it),
so a policy edited after the run started does not change who decides its calls. An escalation
role that no longer exists when the call parks is dropped: the request stays with its first
role and still expires as a denial, which fails closed.
"""

from datetime import timedelta

from django.contrib.auth.models import Group


def request_routing(park, now) -> dict:
    """The ApprovalRequest columns for `park`'s quorum and escalation, created at `now`."""
    quorum = max(1, int(getattr(park, "quorum", 1) or 1))
    role_name, delay = getattr(park, "escalate_to_role", None), getattr(park, "escalate_after_seconds", None)
    role = Group.objects.filter(name=role_name).first() if role_name and delay is not None else None
    return {"quorum": quorum, "escalate_to_role": role,
            "escalate_at": now + timedelta(seconds=delay) if role is not None else None}
