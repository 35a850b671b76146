"""What the receipt tests share: finished runs of the demo (their receipts), and tampering as someone
with raw database access would do it."""

from django.contrib.auth.models import User
from django.db import connection

from runs import append_only, services
from runs.models import Receipt


def tamper(sql: str, params: list) -> None:
    """What someone with raw database access could do: switch the append-only triggers off (on
    PostgreSQL a superuser's session setting; on SQLite drop them), write, and put them back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(sql, params)
            cursor.execute("SET LOCAL session_replication_role = origin")
        else:
            append_only.sqlite_drop(cursor)
            cursor.execute(sql, params)
            append_only.sqlite_create(cursor)


def finished_runs(count: int) -> list[Receipt]:
    """`count` runs of the demo's crm-assistant, each finished and sealed: every receipt so far, oldest first."""
    operator = User.objects.get(username="operator")
    for i in range(count):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=f"List all accounts. ({i})", caller=operator)
        services.run_advance(run_id=run.id)
    return list(Receipt.objects.order_by("seq"))
