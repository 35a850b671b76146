"""The dashboard on the admin index (review/templates/review/index.html)."""

from django import template

from review.views import dashboard_context, may_see_dashboard

register = template.Library()


@register.simple_tag(takes_context=True)
def dashboard_visible(context) -> bool:
    """Whether this request's user sees the dashboard; asked once per request (several blocks ask)."""
    request = context["request"]
    if not hasattr(request, "review_dashboard_visible"):
        request.review_dashboard_visible = may_see_dashboard(request.user)
    return request.review_dashboard_visible


@register.inclusion_tag("review/dashboard.html", takes_context=True)
def dashboard(context) -> dict:
    return dashboard_context(context["request"])
