"""On PostgreSQL the database itself refuses to change receipts and run events.

The model layer already refuses; these triggers also stop raw SQL, another application, and a
TRUNCATE. SQLite has no TRUNCATE and this migration leaves it alone.
"""

from django.db import migrations

TABLES = ("runs_receipt", "runs_runevent")

FUNCTION = """
CREATE OR REPLACE FUNCTION warrant_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION, params=None)
    for table in TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()"
        )
        schema_editor.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_no_update_delete ON {table}")
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS warrant_refuse_change()")


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
