"""Proposed changes of golden cases (evals.proposals): read by whoever reads the golden set, decided
by governance admins: approve (a different one than the proposer), refuse, or withdraw (the proposer)."""

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from core.api_views import PaginatedList, errors, proposal_decision_view
from core.filters import IntegerFilter
from evals import proposals
from evals.api_cases import ProposalSerializer
from evals.models import GoldenCaseProposal
from evals.permissions import ReadEvalsWriteGovernanceAdmin


MAX_ID = 2**63 - 1  # the largest id a BigAutoField holds


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class CaseIdFilter(IntegerFilter):
    pass


class ProposalFilter(django_filters.FilterSet):
    # By id, not as a choice of existing cases: a case deleted since (or never made) lists nothing, not 400.
    case = CaseIdFilter(field_name="case_id", min_value=1, max_value=MAX_ID)

    class Meta:
        model = GoldenCaseProposal
        fields = ["status", "kind", "agent_slug", "case"]


class ProposalListApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = ProposalSerializer
    queryset = GoldenCaseProposal.objects.select_related("proposed_by", "decided_by")
    filterset_class = ProposalFilter

    @extend_schema(operation_id="eval_case_proposals_list", summary="Proposed changes of golden cases, newest first",
                   responses=ProposalSerializer(many=True))
    def get(self, request):
        return self.list_response()


class ProposalDetailApi(GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = ProposalSerializer
    queryset = GoldenCaseProposal.objects.select_related("proposed_by", "decided_by")
    lookup_url_kwarg = "proposal_id"

    @extend_schema(operation_id="eval_case_proposals_retrieve", summary="Read a proposed change of a golden case",
                   responses={200: ProposalSerializer, **errors(403, 404)})
    def get(self, request, proposal_id):
        return Response(ProposalSerializer(self.get_object()).data)


def _decision(verb: str, summary: str, description: str):
    return proposal_decision_view(decide=getattr(proposals, verb), model=GoldenCaseProposal, serializer=ProposalSerializer,
                                  permission=ReadEvalsWriteGovernanceAdmin, operation=f"eval_case_proposals_{verb}",
                                  name=f"Proposal{verb.title()}Api", summary=summary, description=description)


ProposalApproveApi = _decision(
    "approve", "Approve a proposed change of a golden case",
    "Applies the change; the case's new version names the proposer and the approver. Refused with 403 "
    "`second_admin_required` (nothing written) when the approver proposed it, 409 `proposal_stale` when the case "
    "changed since it was proposed, 409 `request_expired` past the second-admin window, 409 `proposal_decided` "
    "when it was decided already.")
ProposalRefuseApi = _decision(
    "refuse", "Refuse a proposed change of a golden case",
    "Another governance admin than the proposer turns it down; nothing changes (the proposer withdraws instead).")
ProposalWithdrawApi = _decision(
    "withdraw", "Withdraw one's own proposed change of a golden case", "Only its proposer; nothing changes.")
