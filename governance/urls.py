from django.urls import path

from governance import api_evaluate, api_grants, api_policies, api_roles, drafts_api, tokens_api

urlpatterns = [
    path("policies/", api_policies.PolicyListCreateApi.as_view(), name="policy-list"),
    path("policies/evaluate/", api_evaluate.PolicyEvaluateApi.as_view(), name="policy-evaluate"),
    path("policies/evaluate/golden/", drafts_api.GoldenTrialApi.as_view(), name="policy-evaluate-golden"),
    path("policies/drafts/", drafts_api.DraftListCreateApi.as_view(), name="policy-draft-list"),
    path("policies/drafts/<int:draft_id>/", drafts_api.DraftDetailApi.as_view(), name="policy-draft-detail"),
    path("policies/drafts/<int:draft_id>/gate/", drafts_api.DraftGateApi.as_view(), name="policy-draft-gate"),
    path("policies/drafts/<int:draft_id>/activate/", drafts_api.DraftActivateApi.as_view(), name="policy-draft-activate"),
    path("policies/drafts/<int:draft_id>/discard/", drafts_api.DraftDiscardApi.as_view(), name="policy-draft-discard"),
    path("policies/<int:policy_id>/", api_policies.PolicyDetailApi.as_view(), name="policy-detail"),
    path("policies/<int:policy_id>/history/", api_policies.PolicyHistoryApi.as_view(), name="policy-history"),
    path("roles/", api_roles.RoleListCreateApi.as_view(), name="role-list"),
    path("roles/<str:name>/", api_roles.RoleDetailApi.as_view(), name="role-detail"),
    path("grants/", api_grants.GrantListCreateApi.as_view(), name="grant-list"),
    path("grants/<int:grant_id>/", api_grants.GrantDetailApi.as_view(), name="grant-detail"),
    path("tokens/", tokens_api.TokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<str:public_id>/", tokens_api.TokenDetailApi.as_view(), name="token-detail"),
]
