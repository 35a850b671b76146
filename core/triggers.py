"""Database triggers that migrations create, and the way to find the ones a database lacks.

A set of triggers is declared once, per database vendor, next to the code that relies on it
(core.stamp, runs.append_only). A migration creates it with
`migrations.RunPython(module.create_triggers, module.drop_triggers)`; creating is idempotent,
so running the operation again is always safe.

On SQLite, a migration that alters a table by rebuilding it (most AlterField operations, and
others: Django copies the rows into a new table and drops the old one) drops that table's
triggers with it. Such a migration must end with the same RunPython operation again;
tests/test_triggers.py fails for one that does not.
"""

from dataclasses import dataclass


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
        with connection.cursor() as cursor:
            for statement in self.create_statements(connection.vendor):
                cursor.execute(statement)

    def drop(self, connection) -> None:
        with connection.cursor() as cursor:
            for statement in self.drop_statements(connection.vendor):
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
