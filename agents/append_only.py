"""The database refuses to change or remove trust changes, on SQLite as on PostgreSQL.

The same set as runs.append_only and review.append_only, from the same builder in core.triggers
(PostgreSQL refuses UPDATE, DELETE and TRUNCATE; SQLite UPDATE and DELETE), with a function of
its own so agents' migrations depend on no other app's. Agents migration 0010 creates them, after
0009 sealed the changes recorded before the chain (which updates those rows). A later migration
that makes SQLite rebuild agents_trustchange must end with
`migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop)`. Who can drop
triggers can still edit rows: the trust chain's signatures and the witness are what catch that.
"""

from core import triggers

TABLES = ("agents_trustchange",)
TRIGGERS = triggers.append_only(TABLES, function="warrant_trust_refuse_change", drop_function=True)


def create_triggers(apps, schema_editor) -> None:
    TRIGGERS.create(schema_editor.connection)


def drop_triggers(apps, schema_editor) -> None:
    TRIGGERS.drop(schema_editor.connection)
