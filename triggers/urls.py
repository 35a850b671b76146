from django.urls import path

from triggers import api, api_accounts

urlpatterns = [
    path("triggers/", api.TriggerListCreateApi.as_view(), name="trigger-list"),
    path("triggers/<slug:name>/", api.TriggerDetailApi.as_view(), name="trigger-detail"),
    path("triggers/<slug:name>/pause/", api.TriggerPauseApi.as_view(), name="trigger-pause"),
    path("triggers/<slug:name>/resume/", api.TriggerResumeApi.as_view(), name="trigger-resume"),
    path("triggers/<slug:name>/rotate-secret/", api.TriggerRotateSecretApi.as_view(), name="trigger-rotate-secret"),
    path("triggers/<slug:name>/fires/", api.TriggerFireListApi.as_view(), name="trigger-fires"),
    path("service-accounts/", api_accounts.ServiceAccountListCreateApi.as_view(), name="service-account-list"),
    path("service-accounts/<str:username>/", api_accounts.ServiceAccountDetailApi.as_view(),
         name="service-account-detail"),
    path("service-accounts/<str:username>/disable/", api_accounts.ServiceAccountDisableApi.as_view(),
         name="service-account-disable"),
    path("service-accounts/<str:username>/enable/", api_accounts.ServiceAccountEnableApi.as_view(),
         name="service-account-enable"),
    path("hooks/<slug:trigger>/", api.HookApi.as_view(), name="hook-deliver"),
]
