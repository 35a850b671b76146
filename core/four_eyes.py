"""The four-eyes rule: what would loosen Warrant's hold on a run takes two governance admins.

One admin proposes (asks for an emergency activation, marks a source trusted, changes a golden case)
and a different one, who took no part in it, confirms. `check_second_admin` is the one check every
such confirmation makes; the platform itself (no user: load_demo, bootstrap) is not a person and does
not go through it. Where another role holds the thing, the confirmers are widened for it: a sampling
rule's loosening is confirmed by a second compliance member or governance admin (review.rules).
"""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core.accounts import accounts_set_up_by
from core.api_errors import Conflict, Forbidden
from core.permissions import is_governance_admin


class SecondAdminRequired(Forbidden):
    """The confirmation came from someone who already took part in what it confirms."""

    code = "second_admin_required"


class RequestExpired(Conflict):
    """What the second admin would confirm was asked for longer ago than the window allows."""

    code = "request_expired"


def name(user) -> str:
    return user.get_username() if user is not None else "the platform"


def check_second_admin(user, *, what: str, parties: list[tuple[object, str]], details: dict | None = None,
                       may_confirm=is_governance_admin, confirmer: str = "governance admin") -> None:
    """Refuse `user` as the confirmer of `what` unless a governance admin who is none of `parties`
    ((user or None, what they did), such as (asker, "asked for it")). The refusal names each party.
    `may_confirm` and `confirmer` widen who confirms where another role holds the thing (a sampling
    rule: compliance too), and name them in the refusals."""
    details = details or {}
    if not may_confirm(user):
        raise Forbidden(f"only a {confirmer} may confirm {what}", details=details)
    taken = [(party, did) for party, did in parties if party is not None]
    said = " and ".join(f"{name(party)} {did}" for party, did in taken)
    if any(party.pk == user.pk for party, _ in taken):
        raise SecondAdminRequired(
            f"{what} needs a second {confirmer}: {said}; another {confirmer} must confirm it",
            details=details)
    # An account a party created, or put in its roles, in the workbench is that party's second pair of eyes.
    if any(str(user.pk) in accounts_set_up_by(party.pk) for party, _ in taken):
        raise SecondAdminRequired(
            f"{what} needs a second {confirmer}: {said}, and {name(user)}'s account was set up (made, or "
            f"its roles changed) by one of them; a {confirmer} they did not set up must confirm it",
            details=details)


def check_fresh(asked_at, *, what: str, details: dict | None = None) -> None:
    """Refuse to confirm what was asked for WARRANT["SECOND_ADMIN_WINDOW_HOURS"] or more ago: a request
    left lying is not a standing licence for whoever comes by later; it is asked for again."""
    if asked_at is not None and not is_fresh(asked_at):
        hours = settings.WARRANT["SECOND_ADMIN_WINDOW_HOURS"]
        raise RequestExpired(f"{what} was asked for {hours:g} hours ago or more and can no longer be confirmed; "
                             f"ask for it again", details=details or {})


def is_fresh(asked_at, *, now=None) -> bool:
    """Whether a request made at `asked_at` may still be confirmed: until the window's end, not at it,
    the rule a trust proposal's expires_at follows too (agents.trust_models.TrustProposal.state)."""
    window = timedelta(hours=settings.WARRANT["SECOND_ADMIN_WINDOW_HOURS"])
    return asked_at is not None and (now or timezone.now()) < asked_at + window
