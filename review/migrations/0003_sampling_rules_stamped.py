"""The sampling rules change the governance stamp (core.stamp), so a process keeps what it read of
them while the stamp holds (review.sampling.rules_for)."""

from django.db import migrations

from core import stamp


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0002_sampling_rule_proposals"),
        ("governance", "0006_governance_stamp_triggers"),
    ]

    operations = [migrations.RunPython(stamp.create_triggers, migrations.RunPython.noop)]
