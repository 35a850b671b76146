from django.db import migrations, models

from core import stamp


class Migration(migrations.Migration):

    dependencies = [
        ('skills', '0006_emergency_two_admins'),
    ]

    operations = [
        migrations.AddField(
            model_name='skill',
            name='emergency_request_action',
            field=models.CharField(blank=True, editable=False, max_length=100),
        ),
        # Adding a column to skills_skill rebuilds it on SQLite, dropping its stamp triggers.
        migrations.RunPython(stamp.create_triggers, migrations.RunPython.noop),
    ]
