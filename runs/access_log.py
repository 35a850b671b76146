"""Every look at a receipt is itself recorded: who, when, what, through which door."""

from collections.abc import Iterable

from runs.models import Receipt, ReceiptAccess


def receipt_access_record(*, user, action: str, receipts: Iterable[Receipt] = (), channel: str,
                          format: str = "", query: str = "", count: int | None = None) -> ReceiptAccess:
    """`count` without `receipts` records a selection too large to list id by id (an evidence
    bundle: a contiguous piece of the chain, which `query` names by its seq range)."""
    ids = [str(r.id) for r in receipts]
    return ReceiptAccess.objects.create(
        user=user, username=user.get_username(), action=action, channel=channel, format=format,
        receipt_ids=ids, count=len(ids) if count is None else count, query=query[:1000],
    )
