from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        from governance.checks import TRIGGERS_MADE_BY
        from runs import append_only, checks  # noqa: F401  (checks registers the system checks)

        # The set as it stands was complete at 0012 (approval decisions joined it there).
        TRIGGERS_MADE_BY.append((append_only, ("runs", "0012_approval_routing")))
