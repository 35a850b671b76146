"""Marking something trusted the way a deployment must: proposed by one governance admin and
confirmed by another (agents.trust). For tests whose subject is what a trusted mark does."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group


def second_governance_admin(username: str = "gov2"):
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.groups.add(Group.objects.get(name="governance-admins"))
    return user


def trust_by_two_admins(target, *, reason: str = ""):
    """Propose marking `target` (a ToolSource or built-in Tool) trusted as gov2; confirm it as the
    demo's admin. Returns the confirmed TrustProposal."""
    from agents.trust import trust_confirm, trust_propose

    proposal = trust_propose(target=target, user=second_governance_admin(), reason=reason)
    return trust_confirm(proposal=proposal, user=get_user_model().objects.get(username="admin"))
