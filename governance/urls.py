from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance import health
from governance.api_errors import json_404, json_500

api = [
    path("", include("runs.urls")),
    path("", include("governance.api_urls")),
    path("", include("agents.urls")),
    path("", include("skills.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: the content security policy allows no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api)),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
]

handler404 = json_404
handler500 = json_500
