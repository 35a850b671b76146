"""Signed receipts, hash-chained run events, signed checkpoints, and append-only tables on SQLite.

The SECRET_KEY seal goes: the Ed25519 signature replaces it. The old checkpoints were unsigned
notes of a past verification, not evidence, and are dropped before the table becomes append-only.
Receipts sealed before this migration carry no signature and verify as such (they say so).
"""

from django.db import migrations, models

from runs import append_only

# The append-only tables as they were at this migration (runs.append_only.TABLES grew later).
TABLES = ("runs_receipt", "runs_runevent", "runs_receiptcheckpoint")


def drop_unsigned_checkpoints(apps, schema_editor):
    apps.get_model("runs", "ReceiptCheckpoint").objects.all()._raw_delete(schema_editor.connection.alias)


def triggers(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            append_only.sqlite_create(cursor, TABLES)
        elif connection.vendor == "postgresql":
            table = "runs_receiptcheckpoint"
            cursor.execute(f"CREATE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table} "
                           f"FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()")
            cursor.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                           f"FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()")


def drop_triggers(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            append_only.sqlite_drop(cursor, TABLES)
        elif connection.vendor == "postgresql":
            for suffix in ("no_update_delete", "no_truncate"):
                cursor.execute(f"DROP TRIGGER IF EXISTS runs_receiptcheckpoint_{suffix} ON runs_receiptcheckpoint")


class Migration(migrations.Migration):
    dependencies = [("runs", "0008_approval_decided_via")]

    operations = [
        migrations.RunPython(drop_unsigned_checkpoints, migrations.RunPython.noop),
        migrations.RemoveField(model_name="receipt", name="seal"),
        migrations.AddField(model_name="receipt", name="key_id", field=models.CharField(
            default="", help_text="The signing key's id (see receipts/keys/).", max_length=16)),
        migrations.AddField(model_name="receipt", name="signature", field=models.CharField(
            default="", help_text="Ed25519, base64.", max_length=88)),
        migrations.AlterField(model_name="receipt", name="body", field=models.TextField(
            help_text="Canonical JSON (RFC 8785), byte for byte what the hash covers.")),
        migrations.AddField(model_name="runevent", name="hash", field=models.CharField(default="", max_length=64)),
        migrations.RenameField(model_name="receiptcheckpoint", old_name="hash", new_name="head"),
        migrations.AlterField(model_name="receiptcheckpoint", name="head", field=models.CharField(
            help_text="The hash of receipt #seq.", max_length=64)),
        migrations.AddField(model_name="receiptcheckpoint", name="at", field=models.DateTimeField()),
        migrations.AddField(model_name="receiptcheckpoint", name="key_id", field=models.CharField(max_length=16)),
        migrations.AddField(model_name="receiptcheckpoint", name="signature", field=models.CharField(max_length=88)),
        migrations.CreateModel(
            name="WitnessSink",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=16, unique=True)),
                ("delivered_seq", models.PositiveIntegerField(default=0)),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                ("failed_at", models.DateTimeField(blank=True, help_text="Set while the last attempt failed.",
                                                   null=True)),
                ("error", models.CharField(blank=True, max_length=300)),
            ],
        ),
        migrations.RunPython(triggers, drop_triggers),
    ]
