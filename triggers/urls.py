from django.urls import path

from triggers import api

urlpatterns = [
    path("triggers/", api.TriggerListCreateApi.as_view(), name="trigger-list"),
    path("triggers/<slug:name>/", api.TriggerDetailApi.as_view(), name="trigger-detail"),
    path("triggers/<slug:name>/pause/", api.TriggerPauseApi.as_view(), name="trigger-pause"),
    path("triggers/<slug:name>/resume/", api.TriggerResumeApi.as_view(), name="trigger-resume"),
    path("triggers/<slug:name>/rotate-secret/", api.TriggerRotateSecretApi.as_view(), name="trigger-rotate-secret"),
    path("triggers/<slug:name>/fires/", api.TriggerFireListApi.as_view(), name="trigger-fires"),
    path("hooks/<slug:trigger>/", api.HookApi.as_view(), name="hook-deliver"),
]
