import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# DRF's tokens are dropped, not carried over. Their keys were stored in plain text and shown to
# every superuser at /admin/authtoken/tokenproxy/, so none of them can be trusted to be known to
# its owner alone; hashing them would keep valid exactly the keys an insider may have copied.
# Their owners get new ones (`make -s token USER=...`, or POST /api/v1/tokens/).
DROP_DRF_TOKENS = "DROP TABLE IF EXISTS authtoken_token"


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0003_stamped_token'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.CharField(editable=False, help_text='Names the token in the admin and in decisions; part of the key, not secret.', max_length=16, unique=True)),
                ('digest', models.CharField(editable=False, help_text='sha256 of the key, hex.', max_length=64, unique=True)),
                ('name', models.CharField(blank=True, help_text='What its owner calls it.', max_length=100)),
                ('issued_via', models.CharField(choices=[('api', 'by its owner, through the API'), ('command', 'by a server operator, with manage.py issue_token')], editable=False, max_length=16)),
                ('issued_by', models.CharField(blank=True, editable=False, help_text='Who issued it: the owner (API), or the operating-system user running the command.', max_length=150)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('expires_at', models.DateTimeField(blank=True, editable=False, help_text='Empty: never expires.', null=True)),
                ('last_used_at', models.DateTimeField(blank=True, editable=False, help_text='Updated at most once per few minutes, not on every request.', null=True)),
                ('revoked_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('revoked_by', models.CharField(blank=True, editable=False, max_length=150)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API token',
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RunSQL(DROP_DRF_TOKENS, reverse_sql=migrations.RunSQL.noop),
    ]
