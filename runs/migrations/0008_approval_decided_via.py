from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0007_run_event_seq")]

    operations = [
        migrations.AddField(
            model_name="approvalrequest",
            name="decided_via",
            field=models.CharField(
                blank=True, max_length=64,
                help_text="How the decider authenticated: 'session', or 'token:' and the token's public id."),
        ),
    ]
