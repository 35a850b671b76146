"""Run.event_seq: the trace's last sequence number kept on the run, so appending an event needs
no search for the highest seq. Existing runs start from their last event."""

from django.db import migrations, models
from django.db.models import Max, OuterRef, Subquery


def forwards(apps, schema_editor):
    Run, RunEvent = apps.get_model("runs", "Run"), apps.get_model("runs", "RunEvent")
    last = RunEvent.objects.filter(run=OuterRef("pk")).values("run").annotate(last=Max("seq")).values("last")
    Run.objects.filter(pk__in=RunEvent.objects.values("run")).update(event_seq=Subquery(last))


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_receipt_seal_and_checkpoint")]

    operations = [
        migrations.AddField(model_name="run", name="event_seq", field=models.PositiveIntegerField(default=0)),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
