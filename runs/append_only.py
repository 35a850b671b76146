"""The database itself refuses to change or remove evidence rows, on SQLite as on PostgreSQL.

PostgreSQL's triggers refuse UPDATE, DELETE and TRUNCATE; SQLite has no TRUNCATE, and its
triggers refuse UPDATE and DELETE. Migrations runs 0002, 0009 and 0012 created them. A later
migration that makes SQLite rebuild one of these tables drops its triggers, and must end with
`migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop)` (see
core.triggers; tests/test_triggers.py fails for one that does not). Someone with the database
file or a superuser login can still drop them: that is what the signatures and the witness are
for.
"""

from core.triggers import Trigger, TriggerSet

TABLES = ("runs_receipt", "runs_runevent", "runs_receiptcheckpoint", "runs_approvaldecision")
_OPERATIONS = ("UPDATE", "DELETE")
_FUNCTION = "warrant_refuse_change"
_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def _sqlite_trigger(table: str, operation: str) -> Trigger:
    name = f"{table}_no_{operation.lower()}"
    return Trigger(name, table, f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {operation} ON {table} BEGIN "
                                f"SELECT RAISE(ABORT, 'warrant: {table} rows are append-only ({operation} refused)'); END")


def _postgresql_triggers(table: str) -> tuple[Trigger, Trigger]:
    return (Trigger(f"{table}_no_update_delete", table,
                    f"CREATE OR REPLACE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {_FUNCTION}()"),
            Trigger(f"{table}_no_truncate", table,
                    f"CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"))


# The function is left in place on drop: PostgreSQL's triggers were made by two migrations.
TRIGGERS = TriggerSet(
    sqlite=tuple(_sqlite_trigger(table, operation) for table in TABLES for operation in _OPERATIONS),
    postgresql=tuple(trigger for table in TABLES for trigger in _postgresql_triggers(table)),
    postgresql_function=_PG_FUNCTION,
)


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
