from django.urls import path

from review import api

urlpatterns = [
    path("dashboard/summary/", api.DashboardSummaryApi.as_view(), name="dashboard-summary"),
]
