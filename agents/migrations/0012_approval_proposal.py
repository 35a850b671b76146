"""Approval proposals: loosening a tool's or a tool source's approval is proposed by one governance
admin and written when another confirms it (agents.trust_approval), through the trust proposals."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0011_trust_proposal'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='trustproposal',
            name='one_pending_trust_proposal',
        ),
        migrations.AddField(
            model_name='trustproposal',
            name='kind',
            field=models.CharField(choices=[('trust', 'Mark it trusted'), ('approval', 'Loosen its approval')], default='trust', max_length=16),
        ),
        migrations.AddField(
            model_name='trustproposal',
            name='change',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='trustproposal',
            name='was',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddConstraint(
            model_name='trustproposal',
            constraint=models.UniqueConstraint(condition=models.Q(('outcome', 'pending')), fields=('kind', 'subject', 'name'), name='one_pending_proposal_of_each_kind'),
        ),
    ]
