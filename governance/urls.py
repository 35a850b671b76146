from django.contrib import admin
from django.urls import include, path

from governance import health
from governance.api_errors import json_404, json_500

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("runs.urls")),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
]

handler404 = json_404
handler500 = json_500
