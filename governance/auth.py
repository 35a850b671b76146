"""Login throttling and lockout (django-axes) for the login forms: the admin and the browsable API."""

from axes.backends import AxesStandaloneBackend


class LockoutBackend(AxesStandaloneBackend):
    """Refuses a locked-out username and address before any password is checked.

    Only web logins are throttled: an authenticate() without a request (a management command, a
    test client's login) has no address to count against, so this backend stays out of its way.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request) -> str:
    """The address failed logins are counted under: the proxy's header when configured, else the peer."""
    from django.conf import settings

    header = settings.WARRANT_CLIENT_IP_HEADER
    if header and request.META.get(header):
        return request.META[header].split(",")[0].strip()
    return request.META.get("REMOTE_ADDR", "")
