"""The database refuses to change or remove review records, on SQLite as on PostgreSQL.

The same set as runs.append_only, from the same builder in core.triggers (PostgreSQL refuses
UPDATE, DELETE and TRUNCATE; SQLite UPDATE and DELETE), with a function of its own so neither
app's migrations depend on the other's. Review migration 0001 creates them; a later migration
that makes SQLite rebuild the table must end with
`migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop)`. Who can drop
triggers can still edit rows: the chain's signatures are what catches that.
"""

from core import triggers

TABLES = ("review_reviewrecord",)
TRIGGERS = triggers.append_only(TABLES, function="warrant_review_refuse_change", drop_function=True)


def create_triggers(apps, schema_editor) -> None:
    TRIGGERS.create(schema_editor.connection)


def drop_triggers(apps, schema_editor) -> None:
    TRIGGERS.drop(schema_editor.connection)


def missing(connection) -> list[str]:
    return TRIGGERS.missing(connection)
