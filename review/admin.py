"""The workbench's home: the admin index shows the dashboard above the app list to compliance and
governance staff (review.views.may_see_dashboard); to everyone else it is the index it was."""

from django.contrib import admin

admin.site.index_template = "review/index.html"
