"""The governance stamp's triggers (core.stamp), made here rather than after every migrate.

It runs after the latest migration of every app whose tables are stamped, so they all exist;
creating is idempotent, so a database that had them from the old post_migrate hook keeps them.
"""

from django.db import migrations

from core import stamp


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0005_api_token_seal"),
        ("agents", "0006_trust_marks"),
        ("skills", "0004_skill_version_status_choices"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(stamp.create_triggers, stamp.drop_triggers)]
