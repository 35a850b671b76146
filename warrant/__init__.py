# The Celery app is imported with Django so that `shared_task` binds to it.
from warrant.celery import app as celery_app

__all__ = ("celery_app",)
