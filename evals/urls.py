from django.urls import path

from evals import api, api_cases

urlpatterns = [
    path("evals/cases/", api_cases.CaseListCreateApi.as_view(), name="eval-case-list"),
    path("evals/cases/<int:case_id>/", api_cases.CaseDetailApi.as_view(), name="eval-case-detail"),
    path("evals/cases/<int:case_id>/record/", api_cases.CaseRecordApi.as_view(), name="eval-case-record"),
    path("evals/cases/<int:case_id>/versions/", api_cases.CaseVersionsApi.as_view(), name="eval-case-versions"),
    path("evals/runs/", api.EvalRunListCreateApi.as_view(), name="eval-run-list"),
    path("evals/runs/<uuid:run_id>/", api.EvalRunDetailApi.as_view(), name="eval-run-detail"),
]
