"""Every model admin of the project's apps edits JSON through the bounded field (core.admin)."""

from django.contrib import admin
from django.db import models

from core.admin import BoundedJSONFormField

PROJECT_APPS = {"governance", "agents", "skills", "runs"}


def test_every_json_model_field_in_the_workbench_uses_the_bounded_form_field():
    checked = []
    for model in admin.site._registry:  # the admin has no public list of its models
        if model._meta.app_label not in PROJECT_APPS:
            continue
        model_admin = admin.site.get_model_admin(model)
        for field in model._meta.get_fields():
            if isinstance(field, models.JSONField):
                form_field = model_admin.formfield_for_dbfield(field, request=None)
                assert isinstance(form_field, BoundedJSONFormField), f"{model._meta.label}.{field.name}"
                checked.append(field)
    assert checked
