"""Trust proposals: a mark of trust is proposed by one governance admin and set when another confirms
it (agents.trust); the sealed change names who proposed it."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from agents import append_only


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0010_trust_change_append_only'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='trustchange',
            name='proposed_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.CreateModel(
            name='TrustProposal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('subject', models.CharField(choices=[('tool_source', 'Tool source'), ('tool', 'Built-in tool')], max_length=16)),
                ('name', models.CharField(max_length=64)),
                ('reason', models.TextField(blank=True)),
                ('proposer_roles', models.JSONField(default=list)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField()),
                ('outcome', models.CharField(choices=[('pending', 'Pending'), ('confirmed', 'Confirmed'), ('refused', 'Refused'), ('withdrawn', 'Withdrawn'), ('expired', 'Expired')], default='pending', max_length=16)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('change_seq', models.PositiveBigIntegerField(blank=True, null=True)),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('proposed_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('outcome', 'pending')), fields=('subject', 'name'), name='one_pending_trust_proposal')],
            },
        ),
        # SQLite rebuilt agents_trustchange to add proposed_by, dropping its triggers (agents.append_only).
        migrations.RunPython(append_only.create_triggers, migrations.RunPython.noop),
    ]
