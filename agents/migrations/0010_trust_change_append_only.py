"""Trust changes become append-only in the database (agents.append_only), as receipts and review
records are. After 0009, whose backfill updates the rows it seals."""

from django.db import migrations

from agents import append_only


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0009_trust_chain'),
    ]

    operations = [
        migrations.RunPython(append_only.create_triggers, append_only.drop_triggers),
    ]
