from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"
    default_auto_field = "django.db.models.BigAutoField"
