"""The database refuses to change or remove review records, on SQLite as on PostgreSQL.

The same shape as runs.append_only (PostgreSQL refuses UPDATE, DELETE and TRUNCATE; SQLite
UPDATE and DELETE), with a function of its own so neither app's migrations depend on the other's.
Review migration 0001 creates them; a later migration that makes SQLite rebuild the table must
end with `migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop)`. Who can
drop triggers can still edit rows: the chain's signatures are what catches that.
"""

from core.triggers import Trigger, TriggerSet

TABLES = ("review_reviewrecord",)
_FUNCTION = "warrant_review_refuse_change"
_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def _sqlite(table: str, operation: str) -> Trigger:
    name = f"{table}_no_{operation.lower()}"
    return Trigger(name, table, f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {operation} ON {table} BEGIN "
                                f"SELECT RAISE(ABORT, 'warrant: {table} rows are append-only ({operation} refused)'); END")


def _postgresql(table: str) -> tuple[Trigger, Trigger]:
    return (Trigger(f"{table}_no_update_delete", table,
                    f"CREATE OR REPLACE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {_FUNCTION}()"),
            Trigger(f"{table}_no_truncate", table,
                    f"CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"))


TRIGGERS = TriggerSet(
    sqlite=tuple(_sqlite(table, op) for table in TABLES for op in ("UPDATE", "DELETE")),
    postgresql=tuple(t for table in TABLES for t in _postgresql(table)),
    postgresql_function=_PG_FUNCTION,
    postgresql_function_name=_FUNCTION,
)


def create_triggers(apps, schema_editor) -> None:
    TRIGGERS.create(schema_editor.connection)


def drop_triggers(apps, schema_editor) -> None:
    TRIGGERS.drop(schema_editor.connection)


def missing(connection) -> list[str]:
    return TRIGGERS.missing(connection)
