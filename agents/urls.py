from django.urls import path

from agents import api_agents, api_profiles, api_sources, api_tools, api_trust

urlpatterns = [
    path("agents/", api_agents.AgentListCreateApi.as_view(), name="agent-list"),
    path("agents/<slug:slug>/", api_agents.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<slug:slug>/publish/", api_agents.AgentPublishApi.as_view(), name="agent-publish"),
    path("agents/<slug:slug>/versions/", api_agents.AgentVersionListApi.as_view(), name="agent-version-list"),
    path("agents/<slug:slug>/versions/<int:version>/", api_agents.AgentVersionDetailApi.as_view(),
         name="agent-version-detail"),
    path("model-profiles/", api_profiles.ModelProfileListCreateApi.as_view(), name="model-profile-list"),
    path("model-profiles/<slug:name>/", api_profiles.ModelProfileDetailApi.as_view(), name="model-profile-detail"),
    path("model-profiles/<slug:name>/test/", api_profiles.ModelProfileTestApi.as_view(), name="model-profile-test"),
    path("tools/", api_tools.ToolListApi.as_view(), name="tool-list"),
    path("tools/<slug:name>/", api_tools.ToolDetailApi.as_view(), name="tool-detail"),
    path("tools/<slug:name>/approve-change/", api_sources.ToolApproveChangeApi.as_view(), name="tool-approve-change"),
    path("tool-sources/", api_sources.ToolSourceListCreateApi.as_view(), name="tool-source-list"),
    path("tool-sources/<slug:name>/", api_sources.ToolSourceDetailApi.as_view(), name="tool-source-detail"),
    path("tool-sources/<slug:name>/sync/", api_sources.ToolSourceSyncApi.as_view(), name="tool-source-sync"),
    path("trust-proposals/", api_trust.TrustProposalListApi.as_view(), name="trust-proposal-list"),
    path("trust-proposals/<int:pk>/confirm/", api_trust.TrustProposalConfirmApi.as_view(), name="trust-proposal-confirm"),
    path("trust-proposals/<int:pk>/refuse/", api_trust.TrustProposalRefuseApi.as_view(), name="trust-proposal-refuse"),
    path("trust-proposals/<int:pk>/withdraw/", api_trust.TrustProposalWithdrawApi.as_view(),
         name="trust-proposal-withdraw"),
]
