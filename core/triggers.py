"""Database triggers that migrations create, and the way to find the ones a database lacks.

A set of triggers is declared once, per database vendor, next to the code that relies on it
(core.stamp, runs.append_only, review.append_only; the last two built by append_only() below).
A migration creates it with `migrations.RunPython(module.create_triggers, module.drop_triggers)`;
creating is idempotent, so running the operation again is always safe.

On SQLite, a migration that alters a table by rebuilding it (most AlterField operations, and
others: Django copies the rows into a new table and drops the old one) drops that table's
triggers with it. Such a migration must end with the same RunPython operation again;
tests/test_triggers.py fails for one that does not.
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Trigger:
    name: str
    table: str
    create: str  # the CREATE TRIGGER statement, idempotent (IF NOT EXISTS / OR REPLACE)


@dataclass(frozen=True)
class TriggerSet:
    sqlite: tuple[Trigger, ...]
    postgresql: tuple[Trigger, ...]
    # PostgreSQL triggers call a function: its CREATE OR REPLACE FUNCTION statement and its name.
    postgresql_function: str = ""
    postgresql_function_name: str = ""

    def triggers(self, vendor: str) -> tuple[Trigger, ...]:
        if vendor == "sqlite":
            return self.sqlite
        if vendor == "postgresql":
            return self.postgresql
        raise NotImplementedError(f"no triggers are declared for {vendor}")

    def tables(self, vendor: str) -> set[str]:
        return {trigger.table for trigger in self.triggers(vendor)}

    def create_statements(self, vendor: str) -> list[str]:
        function = [self.postgresql_function] if vendor == "postgresql" and self.postgresql_function else []
        return function + [trigger.create for trigger in self.triggers(vendor)]

    def drop_statements(self, vendor: str) -> list[str]:
        if vendor == "sqlite":
            return [f"DROP TRIGGER IF EXISTS {t.name}" for t in self.sqlite]
        statements = [f"DROP TRIGGER IF EXISTS {t.name} ON {t.table}" for t in self.triggers(vendor)]
        if self.postgresql_function_name:
            statements.append(f"DROP FUNCTION IF EXISTS {self.postgresql_function_name}()")
        return statements

    def create(self, connection) -> None:
        """Create the set's triggers on the tables the database has: a table a later migration makes
        gets its triggers from a migration after that one (see core.stamp)."""
        self._execute(connection, self._on_tables_present(connection).create_statements(connection.vendor))

    def drop(self, connection) -> None:
        self._execute(connection, self._on_tables_present(connection).drop_statements(connection.vendor))

    def _on_tables_present(self, connection) -> "TriggerSet":
        present = set(connection.introspection.table_names())
        return replace(self, sqlite=tuple(t for t in self.sqlite if t.table in present),
                       postgresql=tuple(t for t in self.postgresql if t.table in present))

    @staticmethod
    def _execute(connection, statements: list[str]) -> None:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    def missing(self, connection) -> list[str]:
        """The names of the triggers this database should have on the table named and has not
        (on PostgreSQL a disabled trigger counts as missing)."""
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
            elif connection.vendor == "postgresql":
                cursor.execute("SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                               "WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'")
            else:
                return []
            present = set(cursor.fetchall())
        return [t.name for t in self.triggers(connection.vendor) if (t.name, t.table) not in present]


_REFUSE_CHANGE = """
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def append_only(tables: tuple[str, ...], *, function: str, drop_function: bool) -> TriggerSet:
    """Triggers that refuse UPDATE and DELETE on each of `tables` (and TRUNCATE on PostgreSQL,
    SQLite has none), raising a message that names the table and the operation.

    `function` is the PostgreSQL function the triggers call; each app has its own, so that neither
    app's migrations depend on the other's. `drop_function`: whether dropping the set drops the
    function too, which a set must not do when older migrations made some of its triggers and
    expect the function to outlive a rollback of the newer ones. The statements are what
    migrations have already installed: changing their text changes nothing in an existing
    database, so tests/test_triggers.py holds them to the letter.
    """
    sqlite = []
    for table in tables:
        for operation in ("UPDATE", "DELETE"):
            name = f"{table}_no_{operation.lower()}"
            sqlite.append(Trigger(name, table, f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {operation} ON {table} "
                                               f"BEGIN SELECT RAISE(ABORT, 'warrant: {table} rows are append-only "
                                               f"({operation} refused)'); END"))
    postgresql = []
    for table in tables:
        for suffix, event, each in (("update_delete", "UPDATE OR DELETE", "ROW"), ("truncate", "TRUNCATE", "STATEMENT")):
            name = f"{table}_no_{suffix}"
            postgresql.append(Trigger(name, table, f"CREATE OR REPLACE TRIGGER {name} BEFORE {event} ON {table} "
                                                   f"FOR EACH {each} EXECUTE FUNCTION {function}()"))
    return TriggerSet(sqlite=tuple(sqlite), postgresql=tuple(postgresql),
                      postgresql_function=_REFUSE_CHANGE.format(function=function),
                      postgresql_function_name=function if drop_function else "")
