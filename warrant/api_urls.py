from django.urls import path

from governance import api, tokens_api

urlpatterns = [
    path("policies/", api.PolicyListCreateApi.as_view(), name="policy-list"),
    path("policies/evaluate/", api.PolicyEvaluateApi.as_view(), name="policy-evaluate"),
    path("policies/<int:policy_id>/", api.PolicyDetailApi.as_view(), name="policy-detail"),
    path("policies/<int:policy_id>/history/", api.PolicyHistoryApi.as_view(), name="policy-history"),
    path("roles/", api.RoleListCreateApi.as_view(), name="role-list"),
    path("roles/<str:name>/", api.RoleDetailApi.as_view(), name="role-detail"),
    path("grants/", api.GrantListCreateApi.as_view(), name="grant-list"),
    path("grants/<int:grant_id>/", api.GrantDetailApi.as_view(), name="grant-detail"),
    path("tokens/", tokens_api.TokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<str:public_id>/", tokens_api.TokenDetailApi.as_view(), name="token-detail"),
]
