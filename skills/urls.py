from django.urls import path

from skills import api

urlpatterns = [
    path("skills/", api.SkillListCreateApi.as_view(), name="skill-list"),
    path("skills/<slug:name>/", api.SkillDetailApi.as_view(), name="skill-detail"),
]
