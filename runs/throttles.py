from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle


class PostThrottle(ScopedRateThrottle):
    """The view's scoped rate, counted on writes only: reading a run never uses up starting one."""

    def allow_request(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)

    def get_rate(self) -> str | None:
        # Read at request time (DRF binds the rates at import), so a changed setting takes effect.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
