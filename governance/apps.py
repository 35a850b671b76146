from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _install_stamp_triggers(sender, using, **kwargs) -> None:
    from django.db import connections

    from core import stamp

    tables = set(connections[using].introspection.table_names())
    if stamp.STAMP_TABLE in tables and tables.issuperset(stamp.TABLES):
        stamp.install_triggers(connections[using])


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance import checks  # noqa: F401  (registers the system checks)

        # After every migrate, not in a migration: SQLite drops a table's triggers when it rebuilds it.
        post_migrate.connect(_install_stamp_triggers, sender=self, dispatch_uid="governance-stamp-triggers")
