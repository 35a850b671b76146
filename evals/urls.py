from django.urls import path

from evals import api, api_cases, api_proposals

urlpatterns = [
    path("evals/cases/", api_cases.CaseListCreateApi.as_view(), name="eval-case-list"),
    path("evals/cases/<int:case_id>/", api_cases.CaseDetailApi.as_view(), name="eval-case-detail"),
    path("evals/cases/<int:case_id>/record/", api_cases.CaseRecordApi.as_view(), name="eval-case-record"),
    path("evals/cases/<int:case_id>/versions/", api_cases.CaseVersionsApi.as_view(), name="eval-case-versions"),
    path("evals/case-proposals/", api_proposals.ProposalListApi.as_view(), name="eval-case-proposal-list"),
    path("evals/case-proposals/<int:proposal_id>/", api_proposals.ProposalDetailApi.as_view(),
         name="eval-case-proposal-detail"),
    path("evals/case-proposals/<int:proposal_id>/approve/", api_proposals.ProposalApproveApi.as_view(),
         name="eval-case-proposal-approve"),
    path("evals/case-proposals/<int:proposal_id>/refuse/", api_proposals.ProposalRefuseApi.as_view(),
         name="eval-case-proposal-refuse"),
    path("evals/case-proposals/<int:proposal_id>/withdraw/", api_proposals.ProposalWithdrawApi.as_view(),
         name="eval-case-proposal-withdraw"),
    path("evals/runs/", api.EvalRunListCreateApi.as_view(), name="eval-run-list"),
    path("evals/runs/<uuid:run_id>/", api.EvalRunDetailApi.as_view(), name="eval-run-detail"),
]
