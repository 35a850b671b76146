"""Admin bases every app's admin shares, and the JSON form field every admin edits JSON with."""

from django import forms
from django.contrib import admin
from django.contrib.admin.options import FORMFIELD_FOR_DBFIELD_DEFAULTS
from django.core.exceptions import ValidationError
from django.db import models

from core.parsers import loads_bounded


class ReadOnlyAdmin(admin.ModelAdmin):
    """For append-only records (versions, events, receipts, access logs): shown, never edited."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class BoundedJSONFormField(forms.JSONField):
    """The admin's JSON fields, with nesting bounded as in the API: a deep value is the field's
    "Enter a valid JSON." error, not a RecursionError (a 500)."""

    def to_python(self, value):
        if not self.disabled and isinstance(value, str) and value.strip():
            try:
                loads_bounded(value, cls=self.decoder)
            except ValueError:
                raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value}) from None
        return super().to_python(value)

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return forms.fields.InvalidJSONInput(data)


# A ModelAdmin copies these defaults when it is registered. governance is the first of the
# project's apps in INSTALLED_APPS, and its admin imports this module, so every model admin of
# the project's apps is registered after this line (tests/governance/test_admin_json.py).
FORMFIELD_FOR_DBFIELD_DEFAULTS[models.JSONField] = {"form_class": BoundedJSONFormField}
