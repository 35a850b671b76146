"""The database itself refuses to change or remove evidence rows, on SQLite as on PostgreSQL.

PostgreSQL's triggers refuse UPDATE, DELETE and TRUNCATE; SQLite has no TRUNCATE, and its
triggers refuse UPDATE and DELETE. Migrations runs 0002, 0009 and 0012 created them. A later
migration that makes SQLite rebuild one of these tables drops its triggers, and must end with
`migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop)` (see
core.triggers; tests/test_triggers.py fails for one that does not). Someone with the database
file or a superuser login can still drop them: that is what the signatures and the witness are
for.
"""

from core import triggers

TABLES = ("runs_receipt", "runs_runevent", "runs_receiptcheckpoint", "runs_approvaldecision")

# Dropping the set leaves the function in place: migrations runs 0002 and 0009 made some of its
# PostgreSQL triggers without this set, and rolling back a later one must not take it from them.
TRIGGERS = triggers.append_only(TABLES, function="warrant_refuse_change", drop_function=False)


def create_triggers(apps, schema_editor) -> None:
    """A migration's RunPython operation: create (or re-create) the append-only triggers."""
    TRIGGERS.create(schema_editor.connection)


def drop_triggers(apps, schema_editor) -> None:
    TRIGGERS.drop(schema_editor.connection)


def sqlite_create(cursor, tables: tuple[str, ...] = TABLES) -> None:
    """`tables`: a migration names the tables that exist at its point in history."""
    for trigger in TRIGGERS.sqlite:
        if trigger.table in tables:
            cursor.execute(trigger.create)


def sqlite_drop(cursor, tables: tuple[str, ...] = TABLES) -> None:
    for trigger in TRIGGERS.sqlite:
        if trigger.table in tables:
            cursor.execute(f"DROP TRIGGER IF EXISTS {trigger.name}")


def missing(connection) -> list[str]:
    """The append-only triggers this database should have and does not (names as in the schema)."""
    return TRIGGERS.missing(connection)
