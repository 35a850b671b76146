from django.urls import path

from agents import api, sources_api

urlpatterns = [
    path("agents/", api.AgentListCreateApi.as_view(), name="agent-list"),
    path("agents/<slug:slug>/", api.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<slug:slug>/publish/", api.AgentPublishApi.as_view(), name="agent-publish"),
    path("agents/<slug:slug>/versions/", api.AgentVersionListApi.as_view(), name="agent-version-list"),
    path("agents/<slug:slug>/versions/<int:version>/", api.AgentVersionDetailApi.as_view(), name="agent-version-detail"),
    path("model-profiles/", api.ModelProfileListCreateApi.as_view(), name="model-profile-list"),
    path("model-profiles/<slug:name>/", api.ModelProfileDetailApi.as_view(), name="model-profile-detail"),
    path("model-profiles/<slug:name>/test/", api.ModelProfileTestApi.as_view(), name="model-profile-test"),
    path("tools/", api.ToolListApi.as_view(), name="tool-list"),
    path("tools/<slug:name>/", api.ToolDetailApi.as_view(), name="tool-detail"),
    path("tools/<slug:name>/approve-change/", sources_api.ToolApproveChangeApi.as_view(), name="tool-approve-change"),
    path("tool-sources/", sources_api.ToolSourceListCreateApi.as_view(), name="tool-source-list"),
    path("tool-sources/<slug:name>/", sources_api.ToolSourceDetailApi.as_view(), name="tool-source-detail"),
    path("tool-sources/<slug:name>/sync/", sources_api.ToolSourceSyncApi.as_view(), name="tool-source-sync"),
]
