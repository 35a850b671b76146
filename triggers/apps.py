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
        # A service account never gets a password, a session or a token (triggers.guards).
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import pre_save

        from governance.models import ApiToken
        from triggers import guards

        pre_save.connect(guards.refuse_password, sender=get_user_model(), dispatch_uid="triggers.no_password")
        pre_save.connect(guards.refuse_token, sender=ApiToken, dispatch_uid="triggers.no_token")
        user_logged_in.connect(guards.refuse_session, dispatch_uid="triggers.no_session")
