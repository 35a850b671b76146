from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # governance and skills sit below evals, so they cannot import the gate: it is handed to them.
        from evals import gating
        from governance import drafts
        from skills import services

        drafts.register_gate(gating.gate_policy)
        services.register_activation_gate(gating.gate_skill)
