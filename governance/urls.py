from django.urls import path

from governance import api_evaluate, api_grants, api_policies, api_roles, tokens_api

urlpatterns = [
    path("policies/", api_policies.PolicyListCreateApi.as_view(), name="policy-list"),
    path("policies/evaluate/", api_evaluate.PolicyEvaluateApi.as_view(), name="policy-evaluate"),
    path("policies/<int:policy_id>/", api_policies.PolicyDetailApi.as_view(), name="policy-detail"),
    path("policies/<int:policy_id>/history/", api_policies.PolicyHistoryApi.as_view(), name="policy-history"),
    path("roles/", api_roles.RoleListCreateApi.as_view(), name="role-list"),
    path("roles/<str:name>/", api_roles.RoleDetailApi.as_view(), name="role-detail"),
    path("grants/", api_grants.GrantListCreateApi.as_view(), name="grant-list"),
    path("grants/<int:grant_id>/", api_grants.GrantDetailApi.as_view(), name="grant-detail"),
    path("tokens/", tokens_api.TokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<str:public_id>/", tokens_api.TokenDetailApi.as_view(), name="token-detail"),
]
