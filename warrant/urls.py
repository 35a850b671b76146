from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from warrant import health, metrics, pages
from warrant.schema import SchemaBuiltOnce
from core.api_errors import json_404, json_500

api = [
    path("", include("runs.urls")),
    path("", include("governance.urls")),
    path("", include("agents.urls")),
    path("", include("skills.urls")),
    path("", include("review.urls")),
    path("", include("evals.urls")),
    path("", include("triggers.urls")),
    path("schema/", SpectacularAPIView.as_view(generator_class=SchemaBuiltOnce), name="schema"),
    # The split view serves its start-up script as a file: the content security policy allows no inline script.
    path("docs/", pages.ApiDocsView.as_view(url_name="schema"), name="docs"),
]

# The admin's "View site" leads to the landing page.
admin.site.site_url = "/"

urlpatterns = [
    path("", pages.landing, name="landing"),
    # Any user signs in here, staff or not (the admin's login takes staff only); axes throttles both.
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", pages.account, name="account"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api)),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    # Prometheus, behind WARRANT_METRICS_TOKEN or WARRANT_METRICS_ALLOWED_IPS (404 when neither is set).
    path("metrics", metrics.metrics_view, name="metrics"),
]

handler404 = json_404
handler500 = json_500
