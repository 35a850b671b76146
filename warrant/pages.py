"""The few HTML pages outside the admin: the landing page, the signed-in page, and the API docs
viewer that sends a browser to sign in instead of answering a bare 401."""

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated


def landing(request):
    return render(request, "landing.html")


@login_required
def account(request):
    """Where a sign-in lands: who you are, and how to get an API token (staff or not)."""
    return render(request, "registration/account.html")


class ApiDocsView(SpectacularSwaggerSplitView):
    """The Swagger UI for anyone signed in. A browser without a session is sent to the sign-in
    page; an API client (no text/html in Accept) keeps the 401 and its token challenge."""

    def handle_exception(self, exc):
        if isinstance(exc, NotAuthenticated) and "text/html" in self.request.headers.get("Accept", ""):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
