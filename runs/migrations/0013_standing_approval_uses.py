"""A row per call a standing approval answered, so that its `uses` counts each call once even when
the step that made the call is delivered again (runs.standing). Uses counted before this
migration have no rows; they stay counted as they were."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0012_approval_routing"),
    ]

    operations = [
        migrations.CreateModel(
            name="StandingApprovalUse",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("call_id", models.CharField(max_length=128)),
                ("at", models.DateTimeField(auto_now_add=True)),
                ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="runs.run")),
                ("standing", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                               to="runs.standingapproval")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("standing", "run", "call_id"),
                                                        name="standing_use_once_per_call")],
            },
        ),
    ]
