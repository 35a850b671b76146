"""Who set up whose account: the workbench's record (Django's admin log) of accounts a person created,
or whose roles they changed. A second person made by the first is not a second person: no one
decides a run whose caller set up their account, and no one confirms what was asked or written by
someone who set up theirs (core.four_eyes)."""

def account_set_up_by(*, user, by_user_id: int) -> bool:
    """Whether `by_user_id` created `user`'s account, or changed its roles, in the workbench
    (Django's admin log). A superuser who makes an account, or puts one in the approver role,
    would otherwise approve their own runs through it."""
    return str(user.pk) in accounts_set_up_by(by_user_id)


def accounts_set_up_by(by_user_id: int) -> set[str]:
    """The ids (as the admin log keeps them, strings) of every account `by_user_id` set up, as
    account_set_up_by means it: read once for a caller when many people are checked against them."""
    from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType

    # Followed through every account set up that way: a puppet the caller made can make the next
    # one, which the caller never touched.
    accounts = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(get_user_model()), action_flag__in=(ADDITION, CHANGE))
    found: set[str] = set()
    reached = frontier = {str(by_user_id)}
    while frontier:
        set_up = {object_id for object_id, flag, message in accounts.filter(user_id__in=frontier)
                  .values_list("object_id", "action_flag", "change_message")
                  if flag == ADDITION or "groups" in message.lower()}
        found |= set_up
        frontier = set_up - reached
        reached |= frontier
    return found
