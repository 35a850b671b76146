from django.conf import settings
from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0005_tool_source_sync_outcome'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='toolsource',
            name='trusted',
            field=models.BooleanField(default=False, help_text="Its tools' descriptions and results are not outsiders' text: reading them does not taint a run. Set by a governance admin only (agents.trust), and every change is recorded."),
        ),
        migrations.AddField(
            model_name='tool',
            name='trusted_output',
            field=models.BooleanField(default=False, help_text="Built-in tools: its results hold no outsiders' text, so reading them does not taint a run. A discovered tool follows its source's mark instead. Set by a governance admin only (agents.trust)."),
        ),
        migrations.CreateModel(
            name='TrustChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('subject', models.CharField(choices=[('tool_source', 'Tool source'), ('tool', 'Built-in tool')], max_length=16)),
                ('name', models.CharField(max_length=64)),
                ('trusted', models.BooleanField()),
                ('was_trusted', models.BooleanField()),
                ('reason', models.TextField(blank=True)),
                ('changed_at', models.DateTimeField(auto_now_add=True)),
                ('changed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-changed_at', '-id'],
            },
        ),
    ]
