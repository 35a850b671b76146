from django.apps import AppConfig


class TriggersConfig(AppConfig):
    """Runs nobody typed: schedules (django-celery-beat) and signed webhooks, each run started
    through runs.start as a service account, governed like any other run (docs/triggers.md)."""

    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A queued fire starts as soon as the run before it is sealed, where runs.receipts says so
        # (beat's triggers.drain catches up every few seconds either way).
        from runs import receipts
        from triggers.firing import drain_after_seal

        signal = getattr(receipts, "receipt_sealed", None)
        if signal is not None:
            signal.connect(drain_after_seal, dispatch_uid="triggers.drain")
        # Without a broker there is no beat: the web process's ticker fires due schedules and
        # starts queued fires instead (runs.ticker runs these only then).
        from runs.ticker import embedded_job
        from triggers.firing import drain
        from triggers.schedules import fire_due

        embedded_job("triggers.fire_schedules", fire_due)
        embedded_job("triggers.drain", drain)
