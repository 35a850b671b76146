"""POST runs/ keeps its Idempotency-Keys in one place, runs.idempotency (IdempotencyRecord, per
user, for every POST that takes a key): the run's own key and request digest go."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_signed_receipts_and_checkpoints'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='run',
            name='run_idempotency_key_unique_per_caller',
        ),
        migrations.RemoveField(
            model_name='run',
            name='idempotency_key',
        ),
        migrations.RemoveField(
            model_name='run',
            name='request_sha256',
        ),
    ]
