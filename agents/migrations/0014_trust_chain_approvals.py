"""The trust chain records the confirmed approval and re-approval proposals too (review.trust_chain):
a TrustChange of kind "approval" or "change" holds the approval before and after, and no trust mark.

On SQLite these operations rebuild agents_trustchange, which drops its append-only triggers: the
last operation makes them again (agents.append_only; on PostgreSQL they are there already)."""

from django.db import migrations, models

from agents import append_only


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0013_change_proposal'),
    ]

    operations = [
        migrations.AddField(
            model_name='trustchange',
            name='after',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='trustchange',
            name='before',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='trustchange',
            name='kind',
            field=models.CharField(choices=[('trust', 'Trust mark'), ('approval', 'Approval loosened'), ('change', 'Held change re-approved')], default='trust', max_length=16),
        ),
        migrations.AlterField(
            model_name='trustchange',
            name='trusted',
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='trustchange',
            name='was_trusted',
            field=models.BooleanField(blank=True, null=True),
        ),
        # The subject "tool" is any tool for an approval or re-approval, not only a built-in one: its label.
        migrations.AlterField(
            model_name='trustchange',
            name='subject',
            field=models.CharField(choices=[('tool_source', 'Tool source'), ('tool', 'Tool')], max_length=16),
        ),
        migrations.AlterField(
            model_name='trustproposal',
            name='subject',
            field=models.CharField(choices=[('tool_source', 'Tool source'), ('tool', 'Tool')], max_length=16),
        ),
        migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop),
    ]
