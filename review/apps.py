from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Compliance review: the dashboard (figures, charts, page, API); sampling and review records to come."""

    name = "review"
