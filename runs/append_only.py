"""The database itself refuses to change or remove evidence rows, on SQLite as on PostgreSQL.

PostgreSQL's triggers (migrations 0002 and 0009) refuse UPDATE, DELETE and TRUNCATE; SQLite has
no TRUNCATE, and its triggers below refuse UPDATE and DELETE. Someone with the database file or
a superuser login can still drop them: that is what the signatures and the witness are for.
"""

TABLES = ("runs_receipt", "runs_runevent", "runs_receiptcheckpoint")
_OPERATIONS = ("UPDATE", "DELETE")


def _name(table: str, operation: str) -> str:
    return f"{table}_no_{operation.lower()}"


def sqlite_create(cursor) -> None:
    for table in TABLES:
        for operation in _OPERATIONS:
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {_name(table, operation)} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'warrant: {table} rows are append-only ({operation} refused)'); END")


def sqlite_drop(cursor) -> None:
    for table in TABLES:
        for operation in _OPERATIONS:
            cursor.execute(f"DROP TRIGGER IF EXISTS {_name(table, operation)}")


def missing(connection) -> list[str]:
    """The append-only triggers this database should have and does not (names as in the schema)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            present = {row[0] for row in cursor.fetchall()}
            wanted = [_name(t, o) for t in TABLES for o in _OPERATIONS]
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'D'")
            present = {row[0] for row in cursor.fetchall()}
            wanted = [f"{t}_{suffix}" for t in TABLES for suffix in ("no_update_delete", "no_truncate")]
        else:
            return []
    return [name for name in wanted if name not in present]
