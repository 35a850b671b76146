"""The trust chain: TrustChange rows become signed, hash-chained records (review.trust_chain).

The changes recorded before it are sealed here in the order they were made, with the receipt
signing key (so migrating a database that holds some needs the key, as sealing receipts does);
their roles are not known and are sealed as null. The columns are added without their constraints
first, filled, then constrained."""

import django.utils.timezone
from django.db import migrations, models


def seal_earlier(apps, schema_editor):
    from review.trust_chain import seal_earlier as seal

    seal(apps.get_model("agents", "TrustChange"))


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0008_approval_routing'),
    ]

    operations = [
        migrations.AlterField(
            model_name='trustchange',
            name='changed_at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name='trustchange',
            name='seq',
            field=models.PositiveBigIntegerField(null=True, unique=True),
        ),
        migrations.AddField(
            model_name='trustchange',
            name='prev_hash',
            field=models.CharField(default='', max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='trustchange',
            name='hash',
            field=models.CharField(default='', max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='trustchange',
            name='body',
            field=models.TextField(default='', help_text='RFC 8785 canonical JSON: what the hash and signature cover.'),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='trustchange',
            name='key_id',
            field=models.CharField(default='', max_length=32),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='trustchange',
            name='signature',
            field=models.TextField(default=''),
            preserve_default=False,
        ),
        migrations.RunPython(seal_earlier, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='trustchange',
            name='seq',
            field=models.PositiveBigIntegerField(unique=True),
        ),
        migrations.AlterField(
            model_name='trustchange',
            name='hash',
            field=models.CharField(max_length=64, unique=True),
        ),
    ]
