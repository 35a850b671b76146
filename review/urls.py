from django.urls import path

from review import api, api_review

urlpatterns = [
    path("dashboard/summary/", api.DashboardSummaryApi.as_view(), name="dashboard-summary"),
    path("review/rules/", api_review.RuleListCreateApi.as_view(), name="review-rules"),
    path("review/rules/<int:rule_id>/", api_review.RuleDetailApi.as_view(), name="review-rule"),
    path("review/rule-proposals/", api_review.RuleProposalListApi.as_view(), name="review-rule-proposals"),
    path("review/rule-proposals/<int:proposal_id>/", api_review.RuleProposalDetailApi.as_view(),
         name="review-rule-proposal"),
    path("review/rule-proposals/<int:proposal_id>/approve/", api_review.RuleProposalApproveApi.as_view(),
         name="review-rule-proposal-approve"),
    path("review/rule-proposals/<int:proposal_id>/refuse/", api_review.RuleProposalRefuseApi.as_view(),
         name="review-rule-proposal-refuse"),
    path("review/rule-proposals/<int:proposal_id>/withdraw/", api_review.RuleProposalWithdrawApi.as_view(),
         name="review-rule-proposal-withdraw"),
    path("review/queue/", api_review.QueueApi.as_view(), name="review-queue"),
    path("review/items/<uuid:item_id>/", api_review.ItemDetailApi.as_view(), name="review-item"),
    path("review/items/<uuid:item_id>/assign/", api_review.AssignApi.as_view(), name="review-item-assign"),
    path("review/items/<uuid:item_id>/records/", api_review.RecordCreateApi.as_view(), name="review-item-records"),
    path("review/verify/", api_review.ChainVerifyApi.as_view(), name="review-verify"),
]
