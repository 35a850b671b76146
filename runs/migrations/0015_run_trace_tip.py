"""Run.trace_tip: "seq:hash" of the trace's last event, kept on the run so that appending events
to a run just read needs no read of its events. Existing runs keep "" (their next writer reads the
link from the events, as before)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_notice_retries")]

    operations = [
        migrations.AddField(model_name="run", name="trace_tip", field=models.CharField(blank=True, default="", max_length=80)),
    ]
